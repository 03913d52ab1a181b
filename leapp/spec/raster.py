"""A small RGB canvas and its PNG encoding, for the pipeline picture (NumPy and zlib only).

The canvas draws only what the picture needs: filled rectangles and frames, horizontal and
vertical lines (solid or dashed, in a pattern anchored to the image so joined segments line
up), arrowheads pointing right, and text in the built-in font of :mod:`leapp.spec.glyphs`.
Everything is clipped to the image.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from leapp.spec.glyphs import GLYPH_HEIGHT, GLYPH_WIDTH, glyph

__all__ = ["Canvas", "Color", "encode_png", "line_height", "text_width"]

Color = tuple[int, int, int]

DASH = 10  # a dashed line is DASH pixels drawn, DASH pixels left out


def text_width(text: str, scale: int = 1) -> int:
    """Pixels ``text`` takes on one line at ``scale`` (one blank column between glyphs)."""
    return max(len(text) * (GLYPH_WIDTH + 1) - 1, 0) * scale


def line_height(scale: int = 1) -> int:
    """Pixels from one line of text to the next at ``scale``."""
    return (GLYPH_HEIGHT + 2) * scale


class Canvas:
    """An RGB image ``height`` x ``width``, filled with ``background``."""

    def __init__(self, width: int, height: int, background: Color) -> None:
        self.pixels = np.empty((height, width, 3), dtype=np.uint8)
        self.pixels[:] = background

    @property
    def width(self) -> int:
        return self.pixels.shape[1]

    @property
    def height(self) -> int:
        return self.pixels.shape[0]

    def fill(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Fill the pixels with ``x0 <= x < x1`` and ``y0 <= y < y1``."""
        x0, x1 = max(x0, 0), min(x1, self.width)
        y0, y1 = max(y0, 0), min(y1, self.height)
        if x0 < x1 and y0 < y1:
            self.pixels[y0:y1, x0:x1] = color

    def frame(self, x0: int, y0: int, x1: int, y1: int, color: Color, width: int = 1) -> None:
        """The outline of the rectangle ``[x0, x1) x [y0, y1)``, ``width`` pixels inside it."""
        self.fill(x0, y0, x1, y0 + width, color)
        self.fill(x0, y1 - width, x1, y1, color)
        self.fill(x0, y0, x0 + width, y1, color)
        self.fill(x1 - width, y0, x1, y1, color)

    def hline(
        self, x0: int, x1: int, y: int, color: Color, width: int = 2, dashed: bool = False
    ) -> None:
        """A horizontal line from ``x0`` to ``x1`` (both included), centred on ``y``."""
        x0, x1 = min(x0, x1), max(x0, x1)
        top = y - width // 2
        for start, stop in _runs(x0, x1 + width // 2 + 1, dashed):
            self.fill(start - width // 2, top, stop, top + width, color)

    def vline(
        self, x: int, y0: int, y1: int, color: Color, width: int = 2, dashed: bool = False
    ) -> None:
        """A vertical line from ``y0`` to ``y1`` (both included), centred on ``x``."""
        y0, y1 = min(y0, y1), max(y0, y1)
        left = x - width // 2
        for start, stop in _runs(y0, y1 + width // 2 + 1, dashed):
            self.fill(left, start - width // 2, left + width, stop, color)

    def arrow_right(self, x: int, y: int, color: Color, size: int = 7) -> None:
        """A filled arrowhead whose tip is at ``(x, y)``, pointing right."""
        for step in range(size + 1):  # one column of pixels per step back from the tip
            half = step * 3 // 5
            self.fill(x - step, y - half, x - step + 1, y + half + 1, color)

    def dot(self, x: int, y: int, color: Color, radius: int = 3) -> None:
        """A filled square of side ``2 * radius + 1`` centred on ``(x, y)``."""
        self.fill(x - radius, y - radius, x + radius + 1, y + radius + 1, color)

    def text(
        self, x: int, y: int, text: str, color: Color, scale: int = 1, bold: bool = False
    ) -> int:
        """Write ``text`` with its top-left corner at ``(x, y)``; return the pixels it took."""
        advance = (GLYPH_WIDTH + 1) * scale
        for index, char in enumerate(text):
            if char == " ":
                continue
            left = x + index * advance
            self._stamp(left, y, glyph(char, scale), color)
            if bold:
                self._stamp(left + 1, y, glyph(char, scale), color)
        return text_width(text, scale) + (1 if bold and text else 0)

    def png(self) -> bytes:
        return encode_png(self.pixels)

    def _stamp(self, x: int, y: int, ink: np.ndarray, color: Color) -> None:
        h, w = ink.shape
        x0, y0 = max(x, 0), max(y, 0)
        x1, y1 = min(x + w, self.width), min(y + h, self.height)
        if x0 >= x1 or y0 >= y1:
            return
        region = self.pixels[y0:y1, x0:x1]
        region[ink[y0 - y : y1 - y, x0 - x : x1 - x]] = color


def _runs(start: int, stop: int, dashed: bool) -> list[tuple[int, int]]:
    """``[start, stop)`` whole, or as the dashes of a pattern anchored at pixel 0."""
    if not dashed:
        return [(start, stop)]
    first = start - start % (2 * DASH)
    runs = []
    for begin in range(first, stop, 2 * DASH):
        lo, hi = max(begin, start), min(begin + DASH, stop)
        if lo < hi:
            runs.append((lo, hi))
    return runs


def encode_png(pixels: np.ndarray) -> bytes:
    """``pixels`` (``height x width x 3``, uint8) as a PNG file: 8-bit RGB, no interlace."""
    if pixels.ndim != 3 or pixels.shape[2] != 3 or pixels.dtype != np.uint8:
        raise ValueError(f"expected a height x width x 3 uint8 array, got {pixels.shape}")
    height, width = pixels.shape[:2]
    rows = np.zeros((height, 1 + width * 3), dtype=np.uint8)  # filter byte 0 (None) per row
    rows[:, 1:] = pixels.reshape(height, width * 3)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"".join(
        [
            b"\x89PNG\r\n\x1a\n",
            _chunk(b"IHDR", header),
            _chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)),
            _chunk(b"IEND", b""),
        ]
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)
