"""The pipeline picture as a PNG, drawn with Pillow (imported only when a PNG is drawn).

Shapes are drawn ``SUPERSAMPLE`` times larger than the PNG and shrunk with a Lanczos filter,
which gives antialiased lines, curves and arrowheads. A large picture is drawn so in bands, each
with a few rows of overlap and at most ``BAND_PIXELS`` large, so memory stays bounded however
many nodes there are. Text is then set on the shrunk image, at the PNG's own size, with the
TrueType fonts it was measured with (FreeType antialiases it).
"""

from __future__ import annotations

import io
import itertools
import logging
import math

from leapp.spec.picture_fonts import PillowFonts, require_pillow
from leapp.spec.picture_scene import (
    DASH,
    Box,
    Dot,
    Line,
    Polygon,
    Scene,
    Text,
    rounded,
)

__all__ = ["BAND_PIXELS", "SUPERSAMPLE", "render_png"]

logger = logging.getLogger(__name__)

SUPERSAMPLE = 3
BAND_PIXELS = 24_000_000  # of one supersampled band
_OVERLAP = 16  # PNG rows drawn above and below a band, so its edges come out as drawn whole


def render_png(scene: Scene, fonts: PillowFonts) -> bytes:
    """The PNG file of ``scene`` at ``fonts.scale`` pixels per unit."""
    require_pillow()
    from PIL import Image, ImageDraw

    scale = fonts.scale
    size = (math.ceil(scene.width * scale), math.ceil(scene.height * scale))
    image = Image.new("RGB", size, scene.background)
    shapes = [shape for group in scene.groups for shape in group.shapes]
    factor = SUPERSAMPLE
    rows = max(BAND_PIXELS // (size[0] * factor * factor) - 2 * _OVERLAP, 16)
    for top in range(0, size[1], rows):
        first, last = max(top - _OVERLAP, 0), min(top + rows + _OVERLAP, size[1])
        band = Image.new("RGB", (size[0] * factor, (last - first) * factor), scene.background)
        painter = _Painter(ImageDraw.Draw(band), scale * factor, first / scale)
        for shape in shapes:
            if not isinstance(shape, Text):
                painter.paint(shape)
        band = band.resize((size[0], last - first), Image.Resampling.LANCZOS)
        keep = (0, top - first, size[0], min(top + rows, size[1]) - first)
        image.paste(band.crop(keep), (0, top))
    draw = ImageDraw.Draw(image)
    for shape in shapes:
        if isinstance(shape, Text):
            label = shape.label
            position = (label.x * scale, label.baseline * scale)
            font = fonts.font(label.style)
            draw.text(position, label.text, fill=shape.color, font=font, anchor="ls")
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    logger.debug("drew a %d x %d PNG (shapes at %dx, %d rows a band)", *size, factor, rows)
    return out.getvalue()


class _Painter:
    """Paints shapes on a Pillow drawing at ``scale`` pixels per unit, whose top row is the
    picture's row ``top`` (in units)."""

    def __init__(self, draw, scale: float, top: float = 0.0):
        self.draw, self.scale, self.top = draw, scale, top

    def paint(self, shape) -> None:
        if isinstance(shape, Box):
            self._box(shape)
        elif isinstance(shape, Dot):
            x, y = self._px((shape.x, shape.y))
            r = (shape.radius + shape.stroke_width / 2) * self.scale
            width = round(shape.stroke_width * self.scale)
            box = (x - r, y - r, x + r, y + r)
            self.draw.ellipse(box, fill=shape.fill, outline=shape.stroke, width=width)
        elif isinstance(shape, Line):
            self._line(shape)
        elif isinstance(shape, Polygon):
            self.draw.polygon([self._px(p) for p in shape.points], fill=shape.fill)

    def _px(self, point) -> tuple[int, int]:
        """Whole pixels (Pillow truncates, which shifts shapes above a band's top by one)."""
        x, y = point[0] * self.scale, (point[1] - self.top) * self.scale
        return (math.floor(x + 0.5), math.floor(y + 0.5))

    def _box(self, box: Box) -> None:
        """A rounded box, its stroke centred on its edge (as in the SVG)."""
        s, half = self.scale, box.stroke_width / 2
        rect = box.rect
        xy = (
            *self._px((rect.x - half, rect.y - half)),
            *self._px((rect.right + half, rect.bottom + half)),
        )
        radius = round((box.radius + half) * s)
        width = round(box.stroke_width * s) if box.stroke else 0
        self.draw.rounded_rectangle(
            xy, radius, fill=box.fill, outline=box.stroke, width=width, corners=box.corners
        )

    def _line(self, line: Line) -> None:
        points = [self._px(p) for p in _flatten(rounded(line.points))]
        width = max(round(line.width * self.scale), 1)
        runs = [points]
        if line.dashed:
            runs = _dashes(points, DASH[0] * self.scale, DASH[1] * self.scale)
        for run in runs:
            if len(run) >= 2:
                self.draw.line(run, fill=line.color, width=width, joint="curve")


def _flatten(segments: list[tuple], steps: int = 10) -> list[tuple[float, float]]:
    """The path ``segments`` (see picture_scene.rounded) as points along it."""
    points: list[tuple[float, float]] = []
    for segment in segments:
        if segment[0] in ("M", "L"):
            points.append(segment[1])
            continue
        (cx, cy), (x1, y1) = segment[1], segment[2]
        x0, y0 = points[-1]
        for i in range(1, steps + 1):
            t = i / steps
            u = 1 - t
            a, b, c = u * u, 2 * u * t, t * t
            points.append((a * x0 + b * cx + c * x1, a * y0 + b * cy + c * y1))
    return points


def _dashes(points: list[tuple[float, float]], on: float, off: float) -> list[list]:
    """The drawn runs of a dashed polyline, the pattern starting at its first point."""
    runs: list[list] = [[points[0]]]
    drawing, left = True, on
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        length = math.hypot(x1 - x0, y1 - y0)
        done = 0.0
        while length - done > left:
            done += left
            t = done / length
            point = (x0 + (x1 - x0) * t, y0 + (y1 - y0) * t)
            if drawing:
                runs[-1].append(point)
            else:
                runs.append([point])
            drawing, left = not drawing, on if not drawing else off
        left -= length - done
        if drawing:
            runs[-1].append((x1, y1))
    return runs
