"""Where everything in the pipeline picture goes (:mod:`leapp.spec.picture` draws it).

Columns: a node's column is one more than the deepest column among the nodes whose
``data_flow`` feeds it (feedback does not count), so producers stand left of their consumers.
Inside a column, nodes keep spec order, then are sorted by the mean row of their producers.
Every box of a column has the column's width; boxes are stacked top-down.

Edges are grouped into routes: one per output port and edge kind (``data``, ``feedback``,
``state`` = feedback into the same node). Gap ``g`` is the space left of column ``g`` (gap
``len(columns)`` is right of the last one). A route leaves its port into a vertical channel
of the gap right of its node (its exit gap) and enters each target from a channel of the gap
left of the target's column; if some target is not entered from the exit gap, the route runs
along its own horizontal lane, above the boxes for data, below them for feedback. Each gap
holds, left to right: the tags of the left column's pipeline outputs, its channels, the tags
of the right column's pipeline inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from leapp.errors import SpecError
from leapp.spec.raster import line_height, text_width
from leapp.spec.schema import ModelSpec, Spec

__all__ = ["ARROW", "STUB", "Layout", "Place", "Route", "layout_pipeline", "node_columns"]

ARROW = 8  # length of an arrowhead
STUB = 5  # free pixels between a box and an edge or tag arrow touching it
_CHANNEL = 12  # between two vertical channels
_LANE = 12  # between two horizontal lanes


@dataclass(frozen=True)
class Place:
    """A box: its column and its rectangle in pixels."""

    column: int
    x: int
    y: int
    width: int
    height: int


@dataclass
class Route:
    """One output port's edges of one kind, and the targets entered from each gap."""

    source: str  # "node/output"
    kind: str  # "data" | "feedback" | "state"
    exit_gap: int
    gaps: dict[int, list[str]]  # gap -> targets ("node/input") entered from its channel
    lane: bool = False  # along a lane: above the boxes for data, below them for feedback
    channel_x: dict[int, int] = field(default_factory=dict)  # gap -> its vertical channel's x
    lane_y: int | None = None  # the lane's y, when ``lane``


@dataclass
class Layout:
    """Pixel positions for the picture of one spec."""

    scale: int
    pad: int
    margin: int
    header_height: int  # of every box: name and backend
    title_height: int  # of the title and legend above everything
    width: int = 0
    height: int = 0
    boxes: dict[str, Place] = field(default_factory=dict)
    in_y: dict[str, int] = field(default_factory=dict)  # "node/input" -> row centre
    out_y: dict[str, int] = field(default_factory=dict)  # "node/output" -> row centre
    in_x: dict[str, int] = field(default_factory=dict)  # "node/input" -> box's left edge
    out_x: dict[str, int] = field(default_factory=dict)  # "node/output" -> box's right edge
    port_kind: dict[tuple[str, str], str] = field(default_factory=dict)  # marker colours
    routes: list[Route] = field(default_factory=list)

    def tag_width(self, label: str) -> int:
        return text_width(label, self.scale) + self.pad + 4

    def row_height(self) -> int:
        return line_height(self.scale) + 2 * self.scale


def node_columns(spec: Spec) -> dict[str, int]:
    """Each model's column: 0 unless a ``data_flow`` edge feeds it, else one more than the
    deepest producer that feeds it. Edges against spec order (invalid) are not counted."""
    columns: dict[str, int] = {}
    producers = _producers(spec)
    for model in spec.models:
        depths = [columns[p] + 1 for p in producers.get(model.name, ()) if p in columns]
        columns[model.name] = max(depths, default=0)
    return columns


def layout_pipeline(spec: Spec, *, scale: int = 2, min_width: int = 0) -> Layout:
    """Place the boxes, tags, channels and lanes of ``spec``'s picture."""
    pad = 5 * scale
    header = pad + 2 * line_height(scale) + pad // 2
    title = 2 * line_height(scale) + line_height(scale + 1) + 2 * scale
    layout = Layout(scale=scale, pad=pad, margin=4 * pad, header_height=header, title_height=title)
    columns = node_columns(spec)
    stacks = _stacks(spec, columns)
    layout.routes = _routes(spec, columns)
    _mark_ports(spec, layout)
    sizes = {model.name: _box_size(model, layout) for model in spec.models}
    widths = [max(sizes[n][0] for n in stack) for stack in stacks]
    gap_x = _place_columns(spec, layout, stacks, widths, columns)
    top = [r for r in layout.routes if r.lane and r.kind == "data"]
    bottom = [r for r in layout.routes if r.lane and r.kind != "data"]
    body_top = layout.margin + title + 2 * pad + len(top) * _LANE + 2 * pad
    body_bottom = _place_boxes(spec, layout, stacks, widths, sizes, gap_x, body_top)
    for i, route in enumerate(top):
        route.lane_y = layout.margin + title + 2 * pad + i * _LANE + _LANE // 2
    for i, route in enumerate(bottom):
        route.lane_y = body_bottom + 2 * pad + i * _LANE + _LANE // 2
    layout.height = body_bottom + 2 * pad + len(bottom) * _LANE + layout.margin
    title_width = text_width(spec.name, scale + 1) + 1
    layout.width = max(layout.width, min_width, title_width) + 2 * layout.margin
    return layout


def _producers(spec: Spec) -> dict[str, set[str]]:
    producers: dict[str, set[str]] = {}
    for source, targets in spec.pipeline.data_flow.items():
        for target in targets:
            src, dst = _node(source), _node(target)
            if src != dst:
                producers.setdefault(dst, set()).add(src)
    return producers


def _stacks(spec: Spec, columns: dict[str, int]) -> list[list[str]]:
    """The nodes of each column, top to bottom."""
    producers, rank = _producers(spec), {}
    stacks: list[list[str]] = [[] for _ in range(max(columns.values()) + 1)]
    for model in spec.models:
        stacks[columns[model.name]].append(model.name)
    for stack in stacks:
        rows = {n: [rank[p] for p in producers.get(n, ()) if p in rank] for n in stack}
        stack.sort(key=lambda n: sum(rows[n]) / len(rows[n]) if rows[n] else 0.0)
        rank.update({n: i for i, n in enumerate(stack)})
    return stacks


def _routes(spec: Spec, columns: dict[str, int]) -> list[Route]:
    grouped: dict[tuple[str, str], list[str]] = {}
    for section, flow in (
        ("data", spec.pipeline.data_flow),
        ("feedback", spec.pipeline.feedback_flow),
    ):
        for source, targets in flow.items():
            for target in targets:
                _check_nodes(columns, source, target)
                own = _node(source) == _node(target)
                kind = "state" if section == "feedback" and own else section
                grouped.setdefault((source, kind), []).append(target)
    routes = []
    for (source, kind), targets in grouped.items():
        exit_gap = columns[_node(source)] + 1
        route = Route(source, kind, exit_gap, {exit_gap: []})
        for target in targets:
            route.gaps.setdefault(columns[_node(target)], []).append(target)  # gap left of it
        route.lane = len(route.gaps) > 1
        routes.append(route)
    return routes


def _node(key: str) -> str:
    return key.split("/")[0]


def _check_nodes(columns: dict[str, int], source: str, target: str) -> None:
    for key in (source, target):
        if _node(key) not in columns:
            raise SpecError(
                f"cannot draw the edge {source} -> {target}: {_node(key)!r} is not a model of "
                "this spec; check pipeline.data_flow and pipeline.feedback_flow."
            )


def _mark_ports(spec: Spec, layout: Layout) -> None:
    for node, ports in spec.pipeline.inputs.items():
        layout.port_kind.update({("input", f"{node}/{p}"): "input" for p in ports})
    for node, ports in spec.pipeline.outputs.items():
        layout.port_kind.update({("output", f"{node}/{p}"): "output" for p in ports})
    for route in layout.routes:
        layout.port_kind["output", route.source] = route.kind
        for targets in route.gaps.values():
            layout.port_kind.update({("input", t): route.kind for t in targets})


def _port_label(port) -> str:
    return f"{port.name} {port.dtype}[{','.join(str(n) for n in port.shape)}]"


def _box_size(model: ModelSpec, layout: Layout) -> tuple[int, int]:
    scale, pad = layout.scale, layout.pad
    left = max((text_width(_port_label(p), scale) for p in model.inputs), default=0)
    right = max((text_width(_port_label(p), scale) for p in model.outputs), default=0)
    header = max(text_width(model.name, scale) + 1, text_width("no backend", scale))
    rows = max(len(model.inputs), len(model.outputs), 1)
    width = max(header, left + right + 3 * pad) + 2 * pad
    return width, layout.header_height + pad + rows * layout.row_height()


def _tag_zone(layout: Layout, keys: list[str]) -> int:
    """Width a gap needs for the tags (and their arrows) of ``keys``."""
    widths = [layout.tag_width(k) for k in keys]
    return STUB + ARROW + layout.pad + max(widths) + layout.pad if widths else 0


def _place_columns(spec, layout, stacks, widths, columns) -> list[int]:
    """Every gap's and column's x; every channel's x. Returns the gaps' left edges."""
    tagged_in = [[] for _ in stacks]
    tagged_out = [[] for _ in stacks]
    for section, tagged in (
        (spec.pipeline.inputs, tagged_in),
        (spec.pipeline.outputs, tagged_out),
    ):
        for node, ports in section.items():
            if node in columns:
                tagged[columns[node]].extend(f"{node}/{p}" for p in ports)
    in_channels: dict[int, list[Route]] = {}
    for route in layout.routes:
        for gap in route.gaps:
            in_channels.setdefault(gap, []).append(route)
    x, gap_x = layout.margin, []
    for gap in range(len(stacks) + 1):
        gap_x.append(x)
        out_zone = _tag_zone(layout, tagged_out[gap - 1]) if gap > 0 else 0
        in_zone = _tag_zone(layout, tagged_in[gap]) if gap < len(stacks) else 0
        x += STUB + out_zone + layout.pad
        for route in in_channels.get(gap, []):
            route.channel_x[gap] = x + _CHANNEL // 2
            x += _CHANNEL
        x += layout.pad + max(in_zone, ARROW + STUB + layout.pad)
        if gap < len(stacks):
            x += widths[gap]
    layout.width = x - layout.margin
    return gap_x


def _place_boxes(spec, layout, stacks, widths, sizes, gap_x, top) -> int:
    """Every box's rectangle and every port's row; returns the lowest box's bottom."""
    bottom, row = top, layout.row_height()
    models = {model.name: model for model in spec.models}
    for column, stack in enumerate(stacks):
        x = gap_x[column + 1] - widths[column]  # the column ends where the next gap starts
        y = top
        for node in stack:
            height = sizes[node][1]
            layout.boxes[node] = Place(column, x, y, widths[column], height)
            first = y + layout.header_height + layout.pad // 2 + row // 2
            for i, port in enumerate(models[node].inputs):
                layout.in_y[f"{node}/{port.name}"] = first + i * row
                layout.in_x[f"{node}/{port.name}"] = x
            for i, port in enumerate(models[node].outputs):
                layout.out_y[f"{node}/{port.name}"] = first + i * row
                layout.out_x[f"{node}/{port.name}"] = x + widths[column] - 1
            y += height + 4 * layout.pad
        bottom = max(bottom, y - 4 * layout.pad)
    return bottom
