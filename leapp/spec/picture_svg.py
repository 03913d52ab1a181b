"""The pipeline picture as an SVG document (plain XML, written here; no Pillow needed).

One ``<g>`` per group of the scene, with ``class`` naming what it is (``heading``, ``legend``,
``edge data`` / ``edge feedback`` / ``edge state``, ``tag input`` / ``tag output``, ``node``)
and ``data-*`` attributes naming its node, port or edge ends, plus a ``<title>`` a viewer shows
as a tooltip. Edges are ``<path>`` elements with rounded corners (quadratic curves) and a
filled arrowhead; texts are ``<text>`` elements set in the fonts of
:data:`leapp.spec.picture_fonts.SVG_FAMILIES` (the viewer picks the first one it has; the
boxes are sized for DejaVu Sans).
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from leapp.spec.picture_fonts import STYLES, SVG_FAMILIES
from leapp.spec.picture_scene import (
    DASH,
    Box,
    Color,
    Dot,
    Group,
    Line,
    Polygon,
    Scene,
    Text,
    rounded,
)

__all__ = ["render_svg"]


def render_svg(scene: Scene, title: str) -> str:
    """The SVG document of ``scene``; ``title`` is its ``<title>``."""
    width, height = _number(scene.width), _number(scene.height)
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="{escape(SVG_FAMILIES["sans"])}">',
        f"<title>{escape(title)}</title>",
        f'<rect width="100%" height="100%" fill="{_color(scene.background)}"/>',
    ]
    for group in scene.groups:
        lines += _group(group)
    lines.append("</svg>")
    return "\n".join(lines) + "\n"


def _group(group: Group) -> list[str]:
    attributes = dict(group.attributes)
    kind = attributes.get("kind")
    classes = f"{group.kind} {kind}" if kind else group.kind
    data = "".join(f" data-{name}={quoteattr(value)}" for name, value in group.attributes)
    lines = [f"<g class={quoteattr(classes)}{data}>"]
    if group.title:
        lines.append(f"  <title>{escape(group.title)}</title>")
    lines += ["  " + _shape(shape) for shape in group.shapes]
    lines.append("</g>")
    return lines


def _shape(shape) -> str:
    if isinstance(shape, Box):
        return _box(shape)
    if isinstance(shape, Dot):
        return (
            f'<circle cx="{_number(shape.x)}" cy="{_number(shape.y)}" '
            f'r="{_number(shape.radius)}" fill="{_color(shape.fill)}" '
            f'stroke="{_color(shape.stroke)}" stroke-width="{_number(shape.stroke_width)}"/>'
        )
    if isinstance(shape, Line):
        return _line(shape)
    if isinstance(shape, Polygon):
        points = " ".join(f"{_number(x)},{_number(y)}" for x, y in shape.points)
        return f'<polygon points="{points}" fill="{_color(shape.fill)}"/>'
    if isinstance(shape, Text):
        return _text(shape)
    raise TypeError(f"no SVG for {shape!r}")


def _box(box: Box) -> str:
    paint = f'fill="{_color(box.fill)}"' if box.fill else 'fill="none"'
    if box.stroke:
        paint += f' stroke="{_color(box.stroke)}" stroke-width="{_number(box.stroke_width)}"'
    rect = box.rect
    if all(box.corners):
        return (
            f'<rect x="{_number(rect.x)}" y="{_number(rect.y)}" width="{_number(rect.width)}" '
            f'height="{_number(rect.height)}" rx="{_number(box.radius)}" {paint}/>'
        )
    corners = (
        (rect.x, rect.y),
        (rect.right, rect.y),
        (rect.right, rect.bottom),
        (rect.x, rect.bottom),
    )
    return f'<path d="{_rounded_corners(corners, box.corners, box.radius)}" {paint}/>'


def _rounded_corners(corners, rounded_ones, radius: float) -> str:
    """A closed path through the four ``corners``, those flagged in ``rounded_ones`` rounded."""
    parts = []
    for i, corner in enumerate(corners):
        before, after = corners[i - 1], corners[(i + 1) % 4]
        r = radius if rounded_ones[i] else 0.0
        start, end = _toward(corner, before, r), _toward(corner, after, r)
        parts.append(("M" if i == 0 else "L") + _point(start))
        if r:
            parts.append("Q" + _point(corner) + " " + _point(end))
    return " ".join(parts) + " Z"


def _line(line: Line) -> str:
    parts = []
    for segment in rounded(line.points):
        parts.append(segment[0] + " ".join(_point(p) for p in segment[1:]))
    dash = f' stroke-dasharray="{_number(DASH[0])} {_number(DASH[1])}"' if line.dashed else ""
    return (
        f'<path d="{" ".join(parts)}" fill="none" stroke="{_color(line.color)}" '
        f'stroke-width="{_number(line.width)}" stroke-linejoin="round"{dash}/>'
    )


def _text(text: Text) -> str:
    label, style = text.label, STYLES[text.label.style]
    face = ""  # the sans-serif is the document's
    if style.face == "bold":
        face = ' font-weight="bold"'
    elif style.face != "sans":
        face = f' font-family="{escape(SVG_FAMILIES[style.face])}"'
    return (
        f'<text x="{_number(label.x)}" y="{_number(label.baseline)}" '
        f'font-size="{_number(style.size)}"{face} fill="{_color(text.color)}" '
        f'xml:space="preserve">{escape(label.text)}</text>'
    )


def _toward(start, end, length: float):
    dx, dy = end[0] - start[0], end[1] - start[1]
    total = (dx * dx + dy * dy) ** 0.5 or 1.0
    return (start[0] + dx * length / total, start[1] + dy * length / total)


def _point(point) -> str:
    return f"{_number(point[0])},{_number(point[1])}"


def _number(value: float) -> str:
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def _color(color: Color) -> str:
    return "#{:02x}{:02x}{:02x}".format(*color)
