"""A PNG line chart of deviations over time, one line per topic, drawn with Pillow.

The y axis is logarithmic (decades labelled ``1e-6`` ...); a value at or below the floor
(``1e-12`` by default, and exact zeros) is drawn on the floor, which is labelled ``<= floor``;
an infinite one (a dtype or shape mismatch) at the top. An optional horizontal dashed line
marks a tolerance. Pillow is the picture dependency of leapp (``pip install
'leapp_ros[picture]'``); :func:`require_plotting` says so when it is missing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from leapp.errors import DependencyError

__all__ = ["require_plotting", "write_deviation_plot"]

_WIDTH, _PLOT_HEIGHT = 960, 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 20, 56, 40
_LEGEND_ROW = 18
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#7f7f7f", "#bcbd22")  # fmt: skip


def require_plotting() -> Any:
    """The ``PIL`` package, or DependencyError saying what to install."""
    try:
        import PIL
        from PIL import Image, ImageDraw, ImageFont  # noqa: F401
    except ImportError as e:
        raise DependencyError(
            f"the deviation plot needs Pillow ({e}): pip install 'leapp_ros[picture]' (or "
            "pip install 'pillow>=10.1'), or leave the plot out"
        ) from e
    return PIL


def write_deviation_plot(
    path: str | os.PathLike[str],
    series: Mapping[str, Sequence[tuple[float, float]]],
    *,
    title: str,
    x_label: str = "time since the first message (s)",
    y_label: str = "largest |difference|",
    tolerance: float | None = None,
    floor: float = 1e-12,
) -> Path:
    """Draw ``series`` (``{name: [(x, y), ...]}``) into the PNG ``path``; the path."""
    require_plotting()
    from PIL import Image, ImageDraw, ImageFont

    path = Path(path)
    font = ImageFont.load_default(size=13)
    height = _PLOT_HEIGHT + _TOP + _BOTTOM + _LEGEND_ROW * max(len(series), 1) + 10
    image = Image.new("RGB", (_WIDTH, height), "white")
    draw = ImageDraw.Draw(image)
    draw.text((_LEFT, 8), title, fill="black", font=font)
    points = [point for values in series.values() for point in values]
    finite = [y for _, y in points if math.isfinite(y) and y > floor]
    low = math.floor(math.log10(floor))
    high = max(math.ceil(math.log10(max(finite))) if finite else low + 1, low + 1)
    if tolerance is not None and tolerance > 0:
        high = max(high, math.ceil(math.log10(tolerance)))
    xs = [x for x, _ in points] or [0.0, 1.0]
    x0, x1 = min(0.0, min(xs)), max(xs)
    x1 = x1 if x1 > x0 else x0 + 1.0
    box = (_LEFT, _TOP, _WIDTH - _RIGHT, _TOP + _PLOT_HEIGHT)

    def place(x: float, y: float) -> tuple[float, float]:
        if not math.isfinite(y):
            level = high
        else:
            level = min(max(math.log10(y) if y > floor else low, low), high)
        px = box[0] + (x - x0) / (x1 - x0) * (box[2] - box[0])
        py = box[3] - (level - low) / (high - low) * (box[3] - box[1])
        return px, py

    draw.rectangle(box, outline="black")
    step = max(1, (high - low) // 8)
    for decade in range(low, high + 1, step):
        _, py = place(x0, 10.0**decade)
        draw.line((box[0], py, box[2], py), fill="#e5e5e5")
        label = f"<= 1e{decade}" if decade == low else f"1e{decade}"
        draw.text((box[0] - 6, py), label, fill="black", font=font, anchor="rm")
    for index in range(6):
        x = x0 + (x1 - x0) * index / 5
        px, _ = place(x, floor)
        draw.text((px, box[3] + 6), f"{x:.3g}", fill="black", font=font, anchor="mt")
    draw.text(((box[0] + box[2]) / 2, box[3] + 22), x_label, fill="black", font=font, anchor="mt")
    draw.text((8, _TOP - 26), y_label, fill="black", font=font)
    if tolerance is not None and tolerance > 0:
        _, py = place(x0, tolerance)
        for start in range(box[0], box[2], 12):
            draw.line((start, py, min(start + 6, box[2]), py), fill="#888888")
    for index, (name, values) in enumerate(series.items()):
        color = _COLORS[index % len(_COLORS)]
        placed = [place(x, y) for x, y in values]
        if len(placed) > 1:
            draw.line(placed, fill=color, width=2)
        for px, py in placed if len(placed) <= 60 else ():
            draw.ellipse((px - 2, py - 2, px + 2, py + 2), fill=color)
        row = box[3] + _BOTTOM + index * _LEGEND_ROW
        draw.line((_LEFT, row + 7, _LEFT + 24, row + 7), fill=color, width=3)
        peak = max((y for _, y in values), default=0.0)
        draw.text((_LEFT + 32, row), f"{name}  (largest {peak:.3g})", fill="black", font=font)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format="PNG")
    return path
