"""The pipeline picture's graph drawing: which column each node stands in, and how each edge
runs between the columns (:mod:`leapp.spec.picture_layout` places them).

Columns: a node's column is one more than the deepest column among the nodes whose
``data_flow`` feeds it (feedback does not count), so producers stand left of their consumers.
Inside a column, nodes keep spec order, then are sorted by the mean row of their producers.

Edges are grouped into routes: one per output port and edge kind (``data``, ``feedback``,
``state`` = feedback into the same node). Gap ``g`` is the space left of column ``g`` (gap
``len(columns)`` is right of the last one). A route leaves its port into a vertical channel of
the gap right of its node (its exit gap) and enters each target from a channel of the gap left
of the target's column; if some target is not entered from the exit gap, the route runs along
a horizontal lane of its own, above the boxes for data, below them for feedback. Every segment
is horizontal or vertical; the renderers round the corners.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from leapp.errors import SpecError
from leapp.spec.schema import Spec

__all__ = ["EDGE_KINDS", "Point", "Route", "node_columns", "order_channels", "routes", "stacks"]

#: Edge kinds, in the order the legend lists them.
EDGE_KINDS = ("data", "feedback", "state")

Point = tuple[float, float]


@dataclass
class Route:
    """One output port's edges of one kind, and the targets entered from each gap."""

    source: str  # "node/output"
    kind: str  # "data" | "feedback" | "state"
    exit_gap: int
    gaps: dict[int, list[str]]  # gap -> targets ("node/input") entered from its channel
    channel_x: dict[int, float] = field(default_factory=dict)  # gap -> its vertical channel
    lane_y: float | None = None  # the lane's y, when the route spans several gaps
    paths: dict[str, list[Point]] = field(default_factory=dict)  # target -> its polyline

    @property
    def lane(self) -> bool:
        """Whether some target is entered from another gap than the exit gap."""
        return len(self.gaps) > 1

    def trace(self, start: Point, ends: Mapping[str, Point]) -> None:
        """Fill :attr:`paths`: from ``start`` (right of the source port) to each target's
        ``ends`` point (where its arrowhead begins), through the channels and the lane."""
        exit_x = self.channel_x[self.exit_gap]
        for gap, targets in self.gaps.items():
            for target in targets:
                end = ends[target]
                if gap == self.exit_gap:
                    points = [start, (exit_x, start[1]), (exit_x, end[1]), end]
                else:
                    x, lane = self.channel_x[gap], self.lane_y
                    points = [start, (exit_x, start[1]), (exit_x, lane), (x, lane), (x, end[1])]
                    points.append(end)
                self.paths[target] = _simplify(points)


def node_columns(spec: Spec) -> dict[str, int]:
    """Each model's column: 0 unless a ``data_flow`` edge feeds it, else one more than the
    deepest producer that feeds it. Edges against spec order (invalid) are not counted."""
    columns: dict[str, int] = {}
    producers = _producers(spec)
    for model in spec.models:
        depths = [columns[p] + 1 for p in producers.get(model.name, ()) if p in columns]
        columns[model.name] = max(depths, default=0)
    return columns


def stacks(spec: Spec, columns: Mapping[str, int]) -> list[list[str]]:
    """The nodes of each column, top to bottom."""
    producers, rank = _producers(spec), {}
    result: list[list[str]] = [[] for _ in range(max(columns.values()) + 1)]
    for model in spec.models:
        result[columns[model.name]].append(model.name)
    for stack in result:
        rows = {n: [rank[p] for p in producers.get(n, ()) if p in rank] for n in stack}
        stack.sort(key=lambda n: sum(rows[n]) / len(rows[n]) if rows[n] else 0.0)
        rank.update({n: i for i, n in enumerate(stack)})
    return result


def routes(spec: Spec, columns: Mapping[str, int]) -> list[Route]:
    """Every edge of ``spec.pipeline``, grouped into routes (see the module docstring)."""
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
    result = []
    for (source, kind), targets in grouped.items():
        exit_gap = columns[_node(source)] + 1
        route = Route(source, kind, exit_gap, {exit_gap: []})
        for target in targets:
            route.gaps.setdefault(columns[_node(target)], []).append(target)  # gap left of it
        result.append(route)
    return result


def order_channels(in_gap: list[Route], gap: int, source_y, target_y) -> list[Route]:
    """The routes of one gap, left to right, ordered so that few of their lines cross: among
    routes turning down, the one coming in lowest stands leftmost; among routes turning up,
    the one coming in highest. ``source_y`` / ``target_y`` give a port key's row."""

    def key(route: Route) -> tuple[int, float]:
        lane = route.lane_y if route.lane_y is not None else 0.0
        come = source_y(route.source) if gap == route.exit_gap else lane
        goes = [target_y(t) for t in route.gaps[gap]] + ([lane] if route.lane else [])
        down = sum(goes) / len(goes) >= come if goes else True
        return (0, -come) if down else (1, come)

    return sorted(in_gap, key=key)


def _simplify(points: list[Point]) -> list[Point]:
    """``points`` without repeats and without middle points of straight runs."""
    kept: list[Point] = []
    for point in points:
        if kept and _close(kept[-1], point):
            continue
        if len(kept) >= 2 and _straight(kept[-2], kept[-1], point):
            kept[-1] = point
        else:
            kept.append(point)
    return kept


def _close(a: Point, b: Point) -> bool:
    return abs(a[0] - b[0]) < 1e-6 and abs(a[1] - b[1]) < 1e-6


def _straight(a: Point, b: Point, c: Point) -> bool:
    return (abs(a[0] - b[0]) < 1e-6 and abs(b[0] - c[0]) < 1e-6) or (
        abs(a[1] - b[1]) < 1e-6 and abs(b[1] - c[1]) < 1e-6
    )


def _producers(spec: Spec) -> dict[str, set[str]]:
    producers: dict[str, set[str]] = {}
    for source, targets in spec.pipeline.data_flow.items():
        for target in targets:
            src, dst = _node(source), _node(target)
            if src != dst:
                producers.setdefault(dst, set()).add(src)
    return producers


def _node(key: str) -> str:
    return key.split("/")[0]


def _check_nodes(columns: Mapping[str, int], source: str, target: str) -> None:
    for key in (source, target):
        if _node(key) not in columns:
            raise SpecError(
                f"cannot draw the edge {source} -> {target}: {_node(key)!r} is not a model of "
                "this spec; check pipeline.data_flow and pipeline.feedback_flow."
            )
