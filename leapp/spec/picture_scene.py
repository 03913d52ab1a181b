"""The pipeline picture as shapes and text: what :mod:`leapp.spec.picture_png` and
:mod:`leapp.spec.picture_svg` draw, built once from a :class:`~leapp.spec.picture_places.Layout`.

A :class:`Scene` is a list of groups, drawn in order: each group (the title, the legend, one
edge, one tag, one node) holds its shapes, in the order they are painted. Shapes are rounded
boxes, dots, polylines (drawn with rounded corners, solid or dashed), filled polygons (the
arrowheads) and texts, in picture units. Colours say what a thing is: an edge's kind (data,
feedback, state), a pipeline input or output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from leapp.spec.picture_places import ARROW, DOT, Label, Layout, Rect
from leapp.spec.picture_routes import Point
from leapp.spec.schema import Spec

__all__ = [
    "COLORS",
    "DASH",
    "Box",
    "Color",
    "Dot",
    "Group",
    "Line",
    "Polygon",
    "Scene",
    "Text",
    "build_scene",
    "rounded",
]

Color = tuple[int, int, int]

COLORS: Mapping[str, Color] = {
    "background": (255, 255, 255),
    "box": (255, 255, 255),
    "header": (238, 242, 248),
    "border": (148, 163, 184),
    "shadow": (229, 233, 240),
    "text": (15, 23, 42),
    "detail": (100, 116, 139),
    "port": (148, 163, 184),  # the dot of a port no edge or tag touches
    "data": (37, 99, 235),
    "feedback": (234, 88, 12),
    "state": (147, 51, 234),
    "input": (22, 163, 74),
    "output": (220, 38, 38),
}
#: Badge fill and text colour of each backend.
BADGES: Mapping[str | None, tuple[Color, Color]] = {
    "jit": ((254, 243, 199), (146, 64, 14)),
    "onnx": ((224, 242, 254), (7, 89, 133)),
    "pt2": ((237, 233, 254), (91, 33, 182)),
    None: ((241, 245, 249), (100, 116, 139)),
}
DASH = (6.0, 4.0)  # a dashed line: drawn, left out
EDGE_WIDTH = 1.75
CORNER = 7.0  # radius of an edge's rounded corners
RADIUS = 8.0  # of a box's corners
TAG_RADIUS = 4.0


@dataclass(frozen=True)
class Box:
    rect: Rect
    fill: Color | None
    stroke: Color | None = None
    stroke_width: float = 0.0
    radius: float = 0.0
    corners: tuple[bool, bool, bool, bool] = (True, True, True, True)  # tl, tr, br, bl


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    radius: float
    fill: Color
    stroke: Color
    stroke_width: float


@dataclass(frozen=True)
class Line:
    points: tuple[Point, ...]
    color: Color
    width: float
    dashed: bool = False


@dataclass(frozen=True)
class Polygon:
    points: tuple[Point, ...]
    fill: Color


@dataclass(frozen=True)
class Text:
    label: Label
    color: Color


Shape = Box | Dot | Line | Polygon | Text


@dataclass(frozen=True)
class Group:
    """Shapes that belong together; ``kind`` and ``attributes`` name them in the SVG."""

    kind: str  # "heading" | "legend" | "edge" | "tag" | "node"
    shapes: tuple[Shape, ...]
    attributes: tuple[tuple[str, str], ...] = ()
    title: str | None = None  # a tooltip in the SVG


@dataclass(frozen=True)
class Scene:
    width: float
    height: float
    background: Color
    groups: tuple[Group, ...]


def build_scene(spec: Spec, layout: Layout) -> Scene:
    """The shapes of ``spec``'s picture, placed as ``layout`` says."""
    title, *subtitles = layout.texts
    texts = [Text(title, COLORS["text"])] + [Text(t, COLORS["detail"]) for t in subtitles]
    heading = Group("heading", tuple(texts))
    groups = [heading, _legend(layout)]
    # data last: where a port's data and feedback edges leave it together, the solid line shows
    ordered = sorted(layout.routes, key=lambda route: route.kind == "data")
    for route in ordered:
        groups += [_edge(route.kind, route.source, t, p) for t, p in route.paths.items()]
    groups += [_tag(tag) for tag in layout.tags]
    groups += [_node(spec, layout, model.name) for model in spec.models]
    return Scene(layout.width, layout.height, COLORS["background"], tuple(groups))


def rounded(points: tuple[Point, ...] | list[Point], radius: float = CORNER) -> list[tuple]:
    """A polyline as path segments with its corners rounded: ``("M", p)`` first, then
    ``("L", p)`` straight on to ``p`` and ``("Q", c, p)`` a quadratic curve bent by ``c``."""
    segments: list[tuple] = [("M", points[0])]
    for before, corner, after in zip(points, points[1:], points[2:], strict=False):
        r = min(radius, _distance(before, corner) / 2, _distance(corner, after) / 2)
        segments.append(("L", _toward(corner, before, r)))
        segments.append(("Q", corner, _toward(corner, after, r)))
    if len(points) > 1:
        segments.append(("L", points[-1]))
    return segments


def arrowhead(tip: Point, color: Color, length: float = ARROW) -> Polygon:
    """A filled arrowhead pointing right, its tip at ``tip``."""
    x, y = tip
    half = length * 0.45
    return Polygon(((x, y), (x - length, y - half), (x - length, y + half)), color)


def _distance(a: Point, b: Point) -> float:
    return ((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) ** 0.5


def _toward(start: Point, end: Point, length: float) -> Point:
    total = _distance(start, end) or 1.0
    return (
        start[0] + (end[0] - start[0]) * length / total,
        start[1] + (end[1] - start[1]) * length / total,
    )


def _tint(color: Color, white: float = 0.88) -> Color:
    """``color`` mixed with ``white`` parts of white."""
    return tuple(round(c + (255 - c) * white) for c in color)  # type: ignore[return-value]


def _legend(layout: Layout) -> Group:
    shapes: list[Shape] = []
    for item in layout.legend:
        color, sample = COLORS[item.kind], item.sample
        middle = sample.y + sample.height / 2
        if item.kind in ("input", "output"):
            shapes.append(Box(sample, _tint(color), color, 1.25, TAG_RADIUS))
        else:
            tip = (sample.right, middle)
            start, end = (sample.x, middle), (sample.right - ARROW + 0.5, middle)
            shapes.append(Line((start, end), color, EDGE_WIDTH, item.kind != "data"))
            shapes.append(arrowhead(tip, color))
        shapes.append(Text(item.label, COLORS["text"]))
    return Group("legend", tuple(shapes))


def _edge(kind: str, source: str, target: str, points: list[Point]) -> Group:
    color = COLORS[kind]
    tip = (points[-1][0] + ARROW - 0.5, points[-1][1])
    shapes = (Line(tuple(points), color, EDGE_WIDTH, kind != "data"), arrowhead(tip, color))
    attributes = (("kind", kind), ("source", source), ("target", target))
    return Group("edge", shapes, attributes, f"{source} \N{RIGHTWARDS ARROW} {target} ({kind})")


def _tag(tag) -> Group:
    color = COLORS[tag.kind]
    start, tip, y = tag.arrow
    shapes = (
        Line(((start, y), (tip - ARROW + 0.5, y)), color, EDGE_WIDTH),
        arrowhead((tip, y), color),
        Box(tag.rect, _tint(color), color, 1.25, TAG_RADIUS),
        Text(tag.label, COLORS["text"]),
    )
    what = "pipeline input" if tag.kind == "input" else "pipeline output"
    return Group("tag", shapes, (("kind", tag.kind), ("port", tag.key)), f"{what} {tag.key}")


def _node(spec: Spec, layout: Layout, name: str) -> Group:
    place = layout.nodes[name]
    rect, backend = place.rect, next(m for m in spec.models if m.name == name).parameters.backend
    inset = 0.75
    header_height = place.header_bottom - rect.y - inset
    header = Rect(rect.x + inset, rect.y + inset, rect.width - 2 * inset, header_height)
    badge_fill, badge_text = BADGES.get(backend, BADGES[None])
    shadow = Rect(rect.x + 1, rect.y + 2.5, rect.width, rect.height)
    separator = ((rect.x, place.header_bottom), (rect.right, place.header_bottom))
    shapes: list[Shape] = [
        Box(shadow, COLORS["shadow"], radius=RADIUS),
        Box(rect, COLORS["box"], COLORS["border"], 1.5, RADIUS),
        Box(header, COLORS["header"], radius=RADIUS - inset, corners=(True, True, False, False)),
        Line(separator, COLORS["border"], 1.0),
        Text(place.name, COLORS["text"]),
        Box(place.badge, badge_fill, radius=place.badge.height / 2),
        Text(place.backend, badge_text),
    ]
    for (side, key), port in layout.ports.items():
        if key.split("/")[0] != name:
            continue
        kind = layout.port_kind.get((side, key))
        fill = COLORS[kind] if kind else COLORS["port"]
        shapes.append(Dot(port.x, port.y, DOT, fill, COLORS["box"], 1.5))
        shapes += [Text(port.name, COLORS["text"]), Text(port.detail, COLORS["detail"])]
    attributes = (("node", name), ("backend", backend or "none"))
    return Group("node", tuple(shapes), attributes, f"{name} ({backend or 'no backend'})")
