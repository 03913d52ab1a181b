"""The pipeline picture: ``<name>.png`` next to ``<name>.yaml``, drawn from the spec alone.

One box per model: its name, its backend, its input ports down the left side and its output
ports down the right side, each with dtype and shape. Boxes stand in columns by data-flow depth
(a node one column right of the deepest node that feeds it; feedback does not count), left to
right. Every edge is drawn with right angles in the gaps between columns, so no line crosses a
box: a ``data_flow`` edge solid (blue), a ``feedback_flow`` edge dashed (orange) and a node's
feedback to itself, its state, dashed (purple), with the ports at both ends marked in the same
colour. Edges that skip a column run along lanes above the boxes (data) or below them
(feedback). Pipeline inputs are green tags left of the ports they feed and pipeline outputs red
tags right of theirs, each labelled with its ``node/port`` key. A legend sits under the title.

Example::

    from leapp import spec
    from leapp.spec.picture import write_picture

    write_picture(spec.load("exports/torch_pipeline"))  # exports/torch_pipeline/torch_pipeline.png
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from leapp.errors import SpecError
from leapp.spec.picture_layout import ARROW, STUB, Layout, Route, layout_pipeline
from leapp.spec.raster import Canvas, Color, line_height, text_width
from leapp.spec.schema import ModelSpec, Spec

__all__ = ["COLORS", "Box", "Picture", "draw_pipeline", "write_picture"]

logger = logging.getLogger(__name__)

COLORS: Mapping[str, Color] = {
    "background": (255, 255, 255),
    "box": (246, 248, 251),
    "header": (219, 228, 242),
    "border": (82, 94, 112),
    "text": (22, 26, 32),
    "detail": (112, 120, 134),
    "data": (36, 94, 188),
    "feedback": (228, 116, 16),
    "state": (148, 56, 192),
    "input": (26, 140, 66),
    "output": (200, 44, 44),
}
_EDGE_WIDTH = 2
_LEGEND = (
    ("data", "data"),
    ("feedback (next tick)", "feedback"),
    ("state (own feedback)", "state"),
    ("pipeline input", "input"),
    ("pipeline output", "output"),
)


@dataclass(frozen=True)
class Box:
    """Where one node's box is, in pixels: ``x <= column < x + width``; the header (name and
    backend) spans ``y`` to ``header_bottom``."""

    node: str
    column: int
    x: int
    y: int
    width: int
    height: int
    header_bottom: int


@dataclass(frozen=True)
class Picture:
    """A drawn pipeline: the PNG file's bytes and where each node's box landed."""

    width: int
    height: int
    boxes: Mapping[str, Box]
    title_bottom: int  # the title and the legend lie above this row
    png: bytes


def draw_pipeline(spec: Spec) -> Picture:
    """Draw ``spec``'s models and ``pipeline`` wiring (see the module docstring)."""
    if not spec.models:
        raise SpecError(f"pipeline {spec.name!r} has no models to draw; export a node first.")
    layout = layout_pipeline(spec)
    legend_width = _legend(layout)[-1][0]
    if legend_width > layout.width - 2 * layout.margin:
        layout = layout_pipeline(spec, min_width=legend_width)
    canvas = Canvas(layout.width, layout.height, COLORS["background"])
    _draw_title(canvas, spec.name, layout)
    for model in spec.models:
        _draw_box(canvas, model, layout)
    for route in layout.routes:
        _draw_route(canvas, route, layout)
    _draw_tags(canvas, spec, layout)
    boxes = {
        name: Box(name, b.column, b.x, b.y, b.width, b.height, b.y + layout.header_height)
        for name, b in layout.boxes.items()
    }
    title_bottom = layout.margin + layout.title_height
    return Picture(layout.width, layout.height, boxes, title_bottom, canvas.png())


def write_picture(spec: Spec, path: str | os.PathLike[str] | None = None) -> Path:
    """Draw ``spec`` and write it to ``path`` (default: ``<name>.png`` next to its YAML)."""
    if path is None:
        if spec.path is None:
            raise SpecError(
                f"spec {spec.name!r} has no file, so there is no folder to put its picture in; "
                "pass a path, or write the spec with leapp.spec.dump() first."
            )
        path = spec.path.with_name(f"{spec.name}.png")
    picture = draw_pipeline(spec)
    target = Path(path)
    target.write_bytes(picture.png)
    logger.debug("drew %s (%d x %d)", target, picture.width, picture.height)
    return target


# ----------------------------------------------------------------------------------- drawing
def _draw_title(canvas: Canvas, name: str, layout: Layout) -> None:
    x, y, scale = layout.margin, layout.margin, layout.scale
    canvas.text(x, y, name, COLORS["text"], scale + 1, bold=True)
    y += line_height(scale + 1) + scale * 2
    mid = y + line_height(scale) // 2 - scale
    for offset, label, kind in _legend(layout)[:-1]:
        if kind in ("input", "output"):
            _draw_tag(canvas, x + offset, mid, label, COLORS[kind], layout)
            continue
        canvas.hline(x + offset, x + offset + 40, mid, COLORS[kind], _EDGE_WIDTH, kind != "data")
        canvas.arrow_right(x + offset + 46, mid, COLORS[kind], ARROW)
        canvas.text(x + offset + 56, y, label, COLORS["text"], scale)


def _legend(layout: Layout) -> list[tuple[int, str, str]]:
    """``(x offset, label, kind)`` of each legend item; the last offset is the legend's width."""
    items, x = [], 0
    for label, kind in _LEGEND:
        items.append((x, label, kind))
        if kind in ("input", "output"):
            x += layout.tag_width(label) + 3 * layout.pad
        else:
            x += 56 + text_width(label, layout.scale) + 3 * layout.pad
    return [*items, (x - 3 * layout.pad, "", "")]


def _draw_box(canvas: Canvas, model: ModelSpec, layout: Layout) -> None:
    box, scale, pad = layout.boxes[model.name], layout.scale, layout.pad
    x0, y0, x1, y1 = box.x, box.y, box.x + box.width, box.y + box.height
    canvas.fill(x0, y0, x1, y1, COLORS["box"])
    canvas.fill(x0, y0, x1, y0 + layout.header_height, COLORS["header"])
    canvas.frame(x0, y0, x1, y1, COLORS["border"], 2)
    canvas.fill(x0, y0 + layout.header_height - 1, x1, y0 + layout.header_height + 1,
                COLORS["border"])  # fmt: skip
    canvas.text(x0 + pad, y0 + pad, model.name, COLORS["text"], scale, bold=True)
    backend = model.parameters.backend or "no backend"
    canvas.text(x0 + pad, y0 + pad + line_height(scale), backend, COLORS["detail"], scale)
    for side, ports in (("input", model.inputs), ("output", model.outputs)):
        for port in ports:
            key = f"{model.name}/{port.name}"
            y = (layout.in_y if side == "input" else layout.out_y)[key]
            detail = f" {port.dtype}[{','.join(str(n) for n in port.shape)}]"
            width = text_width(port.name + detail, scale)
            x = x0 + pad if side == "input" else x1 - pad - width
            top = y - line_height(scale) // 2 + scale
            x += canvas.text(x, top, port.name, COLORS["text"], scale)
            canvas.text(x, top, detail, COLORS["detail"], scale)
            marker = COLORS[layout.port_kind.get((side, key), "border")]
            canvas.dot(x0 if side == "input" else x1 - 1, y, marker, 4)


def _draw_route(canvas: Canvas, route: Route, layout: Layout) -> None:
    """One output port's edges of one kind: out to its exit channel, along its lane (if any
    target is not in the next column) and into each target's port."""
    color, dashed = COLORS[route.kind], route.kind != "data"

    def across(y: int, x0: int, x1: int) -> None:
        canvas.hline(x0, x1, y, color, _EDGE_WIDTH, dashed)

    def down(x: int, y0: int, y1: int) -> None:
        canvas.vline(x, y0, y1, color, _EDGE_WIDTH, dashed)

    sx, sy = layout.out_x[route.source], layout.out_y[route.source]
    lane_y = route.lane_y
    for gap, targets in route.gaps.items():
        x = route.channel_x[gap]
        ys = [layout.in_y[t] for t in targets]
        if gap == route.exit_gap:
            across(sy, sx + STUB, x)
            ys.append(sy)
        if lane_y is not None:
            ys.append(lane_y)
        down(x, min(ys), max(ys))
        for target in targets:
            tx, ty = layout.in_x[target] - STUB, layout.in_y[target]
            across(ty, x, tx - ARROW)
            canvas.arrow_right(tx, ty, color, ARROW)
    if lane_y is not None:
        xs = list(route.channel_x.values())
        across(lane_y, min(xs), max(xs))


def _draw_tags(canvas: Canvas, spec: Spec, layout: Layout) -> None:
    """Pipeline inputs left of their ports, pipeline outputs right of theirs."""
    for section, kind in ((spec.pipeline.inputs, "input"), (spec.pipeline.outputs, "output")):
        for node, ports in section.items():
            for port in ports:
                key = f"{node}/{port}"
                color = COLORS[kind]
                if kind == "input" and key in layout.in_y:
                    y, tip = layout.in_y[key], layout.in_x[key] - STUB
                    x = tip - ARROW - layout.pad - layout.tag_width(key)
                    width = _draw_tag(canvas, x, y, key, color, layout)
                    canvas.hline(x + width, tip - ARROW, y, color, _EDGE_WIDTH)
                    canvas.arrow_right(tip, y, color, ARROW)
                elif kind == "output" and key in layout.out_y:
                    y, start = layout.out_y[key], layout.out_x[key] + STUB
                    tip = start + ARROW + layout.pad
                    canvas.hline(start, tip - ARROW, y, color, _EDGE_WIDTH)
                    canvas.arrow_right(tip, y, color, ARROW)
                    _draw_tag(canvas, tip + 1, y, key, color, layout)


def _draw_tag(canvas: Canvas, x: int, y: int, label: str, color: Color, layout: Layout) -> int:
    """A framed label centred on row ``y``, starting at ``x``; return its width."""
    width, half = layout.tag_width(label), line_height(layout.scale) // 2 + layout.scale - 2
    canvas.fill(x, y - half, x + width, y + half, _tint(color))
    canvas.frame(x, y - half, x + width, y + half, color, 2)
    top = y - line_height(layout.scale) // 2 + layout.scale
    canvas.text(x + layout.pad // 2 + 2, top, label, COLORS["text"], layout.scale)
    return width


def _tint(color: Color) -> Color:
    """``color`` mixed with five parts of white."""
    r, g, b = color
    return ((r + 5 * 255) // 6, (g + 5 * 255) // 6, (b + 5 * 255) // 6)
