"""Where everything in the pipeline picture goes, in picture units (a PNG pixel at scale 1; the
SVG's user units), as the values of :mod:`leapp.spec.picture_places`.
:mod:`leapp.spec.picture_scene` turns the result into shapes and text that both renderers draw,
so the PNG and the SVG show the same layout.

Every text is measured with the fonts of :mod:`leapp.spec.picture_fonts`, and every box is
sized from those widths, so no two texts of the picture overlap however long a name is.

Top to bottom: the title, a subtitle (counts, rate), the legend, the lanes of data edges that
skip a column, the boxes, the lanes of feedback edges. Left to right, columns of boxes (see
:mod:`leapp.spec.picture_routes`) and, in each gap between columns, left to right: the tags of
the left column's pipeline outputs, the vertical channels of the edges, the tags of the right
column's pipeline inputs.
"""

from __future__ import annotations

from collections.abc import Mapping

from leapp.spec.picture_fonts import Fonts
from leapp.spec.picture_places import (
    ARROW,
    DOT,
    Label,
    Layout,
    LegendItem,
    NodePlace,
    PortPlace,
    Rect,
    TagPlace,
)
from leapp.spec.picture_routes import Route, node_columns, order_channels, routes, stacks
from leapp.spec.schema import ModelSpec, Spec, TensorSpec

__all__ = ["LEGEND", "layout_pipeline"]

MARGIN = 24.0  # around everything
PAD = 10.0  # inside a box, around its text
ROW = 24.0  # one port row
GUTTER = 32.0  # at least between an input's label and the output label of the same row
LEAD = 16.0  # from a port's dot to the tag it points to or comes from
CHANNEL = 14.0  # between two vertical channels of a gap
LANE = 14.0  # between two horizontal lanes
TAG_PAD = 6.0  # inside a tag, left and right of its label
TAG_HEIGHT = 20.0
STACK_GAP = 32.0  # between two boxes of one column
SAMPLE = 34.0  # length of a legend's sample line
#: ``(kind, label)`` of each legend entry.
LEGEND = (
    ("data", "data"),
    ("feedback", "feedback (next tick)"),
    ("state", "state (own feedback)"),
    ("input", "pipeline input"),
    ("output", "pipeline output"),
)


class _Measure:
    """Labels measured with ``fonts``."""

    def __init__(self, fonts: Fonts):
        self.fonts = fonts

    def label(self, text: str, style: str, x: float = 0.0, baseline: float = 0.0) -> Label:
        fonts = self.fonts
        width, ascent = fonts.width(text, style), fonts.ascent(style)
        return Label(text, style, x, baseline, width, ascent, fonts.descent(style))

    def centred(self, text: str, style: str, x: float, middle: float) -> Label:
        """A label whose letters are centred vertically on ``middle``."""
        ascent, descent = self.fonts.ascent(style), self.fonts.descent(style)
        return self.label(text, style, x, middle + (ascent - descent) / 2)

    def height(self, style: str) -> float:
        return self.fonts.ascent(style) + self.fonts.descent(style)


def layout_pipeline(spec: Spec, fonts: Fonts) -> Layout:
    """Place the title, legend, boxes, ports, tags, channels and lanes of ``spec``'s picture."""
    measure, layout = _Measure(fonts), Layout()
    columns = node_columns(spec)
    column_stacks = stacks(spec, columns)
    layout.routes = routes(spec, columns)
    top = _place_heading(spec, measure, layout)
    _mark_ports(spec, layout)
    models = {model.name: model for model in spec.models}
    sizes = {name: _box_size(models[name], measure) for name in models}
    widths = [max(sizes[n][0] for n in stack) for stack in column_stacks]
    tagged = _tagged_ports(spec, columns, len(column_stacks))
    gap_x, channel_x, right = _place_columns(layout, tagged, widths, measure)
    # nested lanes: the narrower a lane, the nearer the boxes, so lanes cross no channel
    lanes = sorted((r for r in layout.routes if r.lane), key=lambda r: max(r.gaps) - min(r.gaps))
    top_lanes = [r for r in reversed(lanes) if r.kind == "data"]
    bottom_lanes = [r for r in lanes if r.kind != "data"]
    body_top = top + len(top_lanes) * LANE + (PAD if top_lanes else 0.0)
    bottom = body_top
    for column, stack in enumerate(column_stacks):
        x, y = gap_x[column + 1] - widths[column], body_top
        for node in stack:
            _place_node(layout, models[node], column, Rect(x, y, widths[column], 0), measure)
            y = layout.nodes[node].rect.bottom + STACK_GAP
        bottom = max(bottom, y - STACK_GAP)
    for i, route in enumerate(top_lanes):
        route.lane_y = top + i * LANE + LANE / 2
    for i, route in enumerate(bottom_lanes):
        route.lane_y = bottom + PAD + i * LANE + LANE / 2
    _place_tags(spec, layout, measure)
    _trace_routes(layout, channel_x)
    layout.height = bottom + (PAD + len(bottom_lanes) * LANE if bottom_lanes else 0.0) + MARGIN
    heading = [t.rect.right for t in layout.texts] + [i.label.rect.right for i in layout.legend]
    layout.width = max(right, *heading) + MARGIN
    return layout


def _place_heading(spec: Spec, measure: _Measure, layout: Layout) -> float:
    """The title, the subtitle and the legend (of the kinds of edge and tag drawn); returns the
    y where the drawing starts."""
    title = measure.label(spec.name, "title", MARGIN, MARGIN + measure.fonts.ascent("title"))
    y = title.baseline + measure.fonts.descent("title") + 4 + measure.fonts.ascent("subtitle")
    layout.texts = [title, measure.label(_subtitle(spec), "subtitle", MARGIN, y)]
    middle = y + measure.fonts.descent("subtitle") + 12 + TAG_HEIGHT / 2
    x = MARGIN
    shown = {route.kind for route in layout.routes}
    shown |= {"input"} if any(spec.pipeline.inputs.values()) else set()
    shown |= {"output"} if any(spec.pipeline.outputs.values()) else set()
    for kind, text in (entry for entry in LEGEND if entry[0] in shown):
        if kind in ("input", "output"):
            label = measure.centred(text, "legend", x + TAG_PAD, middle)
            sample = Rect(x, middle - TAG_HEIGHT / 2, label.width + 2 * TAG_PAD, TAG_HEIGHT)
        else:
            sample = Rect(x, middle - TAG_HEIGHT / 2, SAMPLE, TAG_HEIGHT)
            label = measure.centred(text, "legend", x + SAMPLE + 6, middle)
        layout.legend.append(LegendItem(kind, label, sample))
        x = max(label.rect.right, sample.right) + 22
    return middle + TAG_HEIGHT / 2 + 22


def _subtitle(spec: Spec) -> str:
    """``"3 nodes · 1 input · 1 output · 50 Hz"``."""

    def count(n: int, what: str) -> str:
        return f"{n} {what}" + ("" if n == 1 else "s")

    inputs = sum(len(ports) for ports in spec.pipeline.inputs.values())
    outputs = sum(len(ports) for ports in spec.pipeline.outputs.values())
    parts = [count(len(spec.models), "node"), count(inputs, "input"), count(outputs, "output")]
    frequency = spec.pipeline.configs.get("frequency")
    if isinstance(frequency, int | float) and not isinstance(frequency, bool):
        parts.append(f"{frequency:g} Hz")
    return " \N{MIDDLE DOT} ".join(parts)


def _mark_ports(spec: Spec, layout: Layout) -> None:
    for node, ports in spec.pipeline.inputs.items():
        layout.port_kind.update({("input", f"{node}/{p}"): "input" for p in ports})
    for node, ports in spec.pipeline.outputs.items():
        layout.port_kind.update({("output", f"{node}/{p}"): "output" for p in ports})
    # a port on edges of several kinds takes the colour of its data edges
    for route in sorted(layout.routes, key=lambda route: route.kind == "data"):
        layout.port_kind["output", route.source] = route.kind
        for targets in route.gaps.values():
            layout.port_kind.update({("input", t): route.kind for t in targets})


def _detail(port: TensorSpec) -> str:
    return f"{port.dtype}[{','.join(str(n) for n in port.shape)}]"


def _port_width(port: TensorSpec, measure: _Measure) -> float:
    name, detail = measure.label(port.name, "port"), measure.label(_detail(port), "detail")
    return name.width + measure.fonts.width(" ", "port") + detail.width


def _header_height(measure: _Measure) -> float:
    return 2 * PAD + max(measure.height("name"), measure.height("backend") + 6)


def _box_size(model: ModelSpec, measure: _Measure) -> tuple[float, float]:
    left = max((_port_width(p, measure) for p in model.inputs), default=0.0)
    right = max((_port_width(p, measure) for p in model.outputs), default=0.0)
    gutter = GUTTER if left and right else 0.0
    name = measure.label(model.name, "name").width
    badge = measure.label(model.parameters.backend or "no backend", "backend").width + 12
    width = max(name + 16 + badge, left + gutter + right) + 2 * PAD
    rows = max(len(model.inputs), len(model.outputs), 1)
    return width, _header_height(measure) + rows * ROW + PAD


def _place_node(layout, model: ModelSpec, column: int, at: Rect, measure: _Measure) -> None:
    """The box of ``model`` at ``at`` (its x, y and width), its header and its ports."""
    header = _header_height(measure)
    rows = max(len(model.inputs), len(model.outputs), 1)
    rect = Rect(at.x, at.y, at.width, header + rows * ROW + PAD)
    middle = rect.y + header / 2
    name = measure.centred(model.name, "name", rect.x + PAD, middle)
    backend_text = model.parameters.backend or "no backend"
    width = measure.label(backend_text, "backend").width
    backend = measure.centred(backend_text, "backend", rect.right - PAD - 6 - width, middle)
    badge_height = measure.height("backend") + 6
    badge = Rect(backend.x - 6, middle - badge_height / 2, width + 12, badge_height)
    layout.nodes[model.name] = NodePlace(
        model.name, column, rect, rect.y + header, name, backend, badge
    )
    space = measure.fonts.width(" ", "port")
    for side, ports in (("input", model.inputs), ("output", model.outputs)):
        for i, port in enumerate(ports):
            y = rect.y + header + PAD / 2 + i * ROW + ROW / 2
            wide = _port_width(port, measure)
            x = rect.x + PAD if side == "input" else rect.right - PAD - wide
            name = measure.centred(port.name, "port", x, y)
            detail = measure.label(_detail(port), "detail", x + name.width + space, name.baseline)
            key = f"{model.name}/{port.name}"
            edge = rect.x if side == "input" else rect.right
            layout.ports[side, key] = PortPlace(key, side, edge, y, name, detail)


def _tagged_ports(spec: Spec, columns: Mapping[str, int], count: int):
    """Per column: the keys of its pipeline inputs and of its pipeline outputs."""
    tagged = {"input": [[] for _ in range(count)], "output": [[] for _ in range(count)]}
    for section, kind in ((spec.pipeline.inputs, "input"), (spec.pipeline.outputs, "output")):
        for node, ports in section.items():
            if node in columns:
                tagged[kind][columns[node]].extend(f"{node}/{p}" for p in ports)
    return tagged


def _tag_zone(keys: list[str], measure: _Measure) -> float:
    """Width a gap needs for the tags (and their arrows) of ``keys``."""
    widths = [measure.label(k, "tag").width + 2 * TAG_PAD for k in keys]
    return DOT + LEAD + max(widths) + PAD if widths else 0.0


def _place_columns(layout: Layout, tagged, widths: list[float], measure: _Measure):
    """Every gap's and column's x (each column ends where the next gap starts), reserving the
    channels of each gap. Returns the gaps' left edges, where each gap's channels start and the
    right end of the drawing."""
    channels: dict[int, int] = {}
    for route in layout.routes:
        for gap in route.gaps:
            channels[gap] = channels.get(gap, 0) + 1
    x, gap_x, channel_x = MARGIN, [], []
    for gap in range(len(widths) + 1):
        gap_x.append(x)
        if gap > 0:
            x += max(_tag_zone(tagged["output"][gap - 1], measure), DOT + PAD)
        channel_x.append(x + PAD / 2)
        if channels.get(gap):
            x += PAD + channels[gap] * CHANNEL
        if gap < len(widths):
            x += max(_tag_zone(tagged["input"][gap], measure), DOT + ARROW + 2 * PAD)
            x += widths[gap]
    return gap_x, channel_x, x


def _place_tags(spec: Spec, layout: Layout, measure: _Measure) -> None:
    """Pipeline inputs left of their ports, pipeline outputs right of theirs."""
    for section, kind in ((spec.pipeline.inputs, "input"), (spec.pipeline.outputs, "output")):
        for node, ports in section.items():
            for port in ports:
                place = layout.ports.get((kind, f"{node}/{port}"))
                if place is None:
                    continue
                width = measure.label(place.key, "tag").width + 2 * TAG_PAD
                if kind == "input":
                    x = place.x - DOT - LEAD - width
                    arrow = (x + width, place.x - DOT - 1, place.y)
                else:
                    x = place.x + DOT + LEAD
                    arrow = (place.x + DOT + 1, x, place.y)
                rect = Rect(x, place.y - TAG_HEIGHT / 2, width, TAG_HEIGHT)
                label = measure.centred(place.key, "tag", x + TAG_PAD, place.y)
                layout.tags.append(TagPlace(place.key, kind, rect, label, arrow))


def _trace_routes(layout: Layout, channel_x: list[float]) -> None:
    """Put each route's channels in their gaps (see order_channels) and trace its lines."""
    in_gap: dict[int, list[Route]] = {}
    for route in layout.routes:
        for gap in route.gaps:
            in_gap.setdefault(gap, []).append(route)

    def source_y(key: str) -> float:
        return layout.ports["output", key].y

    def target_y(key: str) -> float:
        return layout.ports["input", key].y

    for gap, members in in_gap.items():
        for i, route in enumerate(order_channels(members, gap, source_y, target_y)):
            route.channel_x[gap] = channel_x[gap] + i * CHANNEL + CHANNEL / 2
    outputs = {tag.key: tag.rect.right for tag in layout.tags if tag.kind == "output"}
    for route in layout.routes:
        port = layout.ports["output", route.source]
        start = (outputs.get(route.source, port.x + DOT + 1), port.y)
        ends = {}
        for targets in route.gaps.values():
            for target in targets:
                place = layout.ports["input", target]
                ends[target] = (place.x - DOT - 1 - ARROW + 0.5, place.y)
        route.trace(start, ends)
