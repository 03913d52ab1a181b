"""The fonts of the pipeline picture, and how wide a text set in them is.

The picture uses three faces: a sans-serif (names and labels), its bold (title, node names) and
a monospace (dtypes, shapes, ``node/port`` keys). Each is looked up by file name, in this order:

1. the folder named by ``LEAPP_PICTURE_FONTS``, if set;
2. Pillow's own search (``ImageFont.truetype`` looks in the system's font folders: under
   ``$XDG_DATA_DIRS/fonts`` on Linux, ``/Library/Fonts`` on macOS, ``%WINDIR%\\Fonts``);
3. the copy matplotlib ships, if matplotlib is installed (found without importing it);
4. the TrueType font built into Pillow (``ImageFont.load_default(size=...)``, Pillow >= 10.1),
   for every face (there is no bold then).

Text is measured with the font the PNG is drawn with, at the PNG's scale, so a box sized from
these widths holds its text in the PNG exactly. Without Pillow only the SVG can be drawn; its
text is then measured by :class:`EstimatedFonts` (widths per kind of character, rounded up), and
the viewer's own font draws it. Importing this module never imports Pillow.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from leapp.errors import DependencyError

__all__ = [
    "FONT_FILES",
    "STYLES",
    "SVG_FAMILIES",
    "EstimatedFonts",
    "Fonts",
    "PillowFonts",
    "TextStyle",
    "load_fonts",
    "require_pillow",
]

logger = logging.getLogger(__name__)

_INSTALL = "pip install 'leapp_ros[picture]' (or: pip install 'pillow>=10.1')"
_PILLOW_MIN = (10, 1)


@dataclass(frozen=True)
class TextStyle:
    """A face (``sans``, ``bold`` or ``mono``) and its size in picture units."""

    face: str
    size: float


#: Every kind of text in the picture.
STYLES: Mapping[str, TextStyle] = {
    "title": TextStyle("bold", 20),
    "subtitle": TextStyle("sans", 12),
    "name": TextStyle("bold", 14),
    "backend": TextStyle("mono", 11),
    "port": TextStyle("sans", 13),
    "detail": TextStyle("mono", 12),
    "tag": TextStyle("mono", 12),
    "legend": TextStyle("sans", 12),
}
#: The font files of each face, first choice first.
FONT_FILES: Mapping[str, tuple[str, ...]] = {
    "sans": ("DejaVuSans.ttf",),
    "bold": ("DejaVuSans-Bold.ttf",),
    "mono": ("DejaVuSansMono.ttf",),
}
#: The CSS font families the SVG asks for, per face.
SVG_FAMILIES: Mapping[str, str] = {
    "sans": "'DejaVu Sans', Verdana, 'Helvetica Neue', Arial, sans-serif",
    "bold": "'DejaVu Sans', Verdana, 'Helvetica Neue', Arial, sans-serif",
    "mono": "'DejaVu Sans Mono', Menlo, Consolas, 'Liberation Mono', monospace",
}


class Fonts(Protocol):
    """Text measurement in picture units, for one kind of text (a key of :data:`STYLES`)."""

    def width(self, text: str, style: str) -> float: ...
    def ascent(self, style: str) -> float: ...
    def descent(self, style: str) -> float: ...


def require_pillow() -> Any:
    """Return the ``PIL`` package, or raise :class:`DependencyError` saying what to install."""
    try:
        import PIL
        from PIL import features
    except ImportError as e:
        raise DependencyError(
            f"drawing the pipeline picture needs Pillow, which is not installed: {_INSTALL}."
        ) from e
    version = tuple(int(part) for part in PIL.__version__.split(".")[:2] if part.isdigit())
    if version < _PILLOW_MIN:
        raise DependencyError(
            f"drawing the pipeline picture needs Pillow >= 10.1, found {PIL.__version__}: "
            f"{_INSTALL}."
        )
    if not features.check("freetype2"):
        raise DependencyError(
            "drawing the pipeline picture needs Pillow built with FreeType (TrueType text); "
            f"this one has none: reinstall it from a wheel, {_INSTALL}."
        )
    return PIL


def load_fonts(scale: float) -> Fonts:
    """:class:`PillowFonts` for a PNG at ``scale`` pixels per unit when Pillow is installed,
    else :class:`EstimatedFonts` (enough for the SVG)."""
    try:
        require_pillow()
    except DependencyError as e:
        logger.debug("measuring the picture's text without Pillow: %s", e)
        return EstimatedFonts()
    return PillowFonts(scale)


class PillowFonts:
    """The faces as Pillow fonts, loaded at ``scale`` pixels per unit; widths in units."""

    def __init__(self, scale: float):
        if scale <= 0:
            raise ValueError(f"scale must be positive, got {scale}")
        self.scale = scale
        self.files = {face: _font_file(names) for face, names in FONT_FILES.items()}
        missing = [face for face, file in self.files.items() if file is None]
        if missing:
            logger.info(
                "no %s font found (%s); the picture uses Pillow's built-in font for them",
                "/".join(missing),
                ", ".join(FONT_FILES[face][0] for face in missing),
            )

    def font(self, style: str) -> Any:
        """The Pillow font of ``style`` at this scale."""
        text_style = STYLES[style]
        return _pillow_font(self.files[text_style.face], round(text_style.size * self.scale))

    def width(self, text: str, style: str) -> float:
        return self.font(style).getlength(text) / self.scale

    def ascent(self, style: str) -> float:
        return self.font(style).getmetrics()[0] / self.scale

    def descent(self, style: str) -> float:
        return self.font(style).getmetrics()[1] / self.scale


class EstimatedFonts:
    """Widths of DejaVu Sans (Mono) estimated per kind of character, a little on the wide
    side, for the SVG when Pillow is not installed."""

    _NARROW = frozenset("iljtfr.,:;'!|()[]{}` /\\")
    _WIDE = frozenset("mwMW@%")

    def width(self, text: str, style: str) -> float:
        text_style = STYLES[style]
        if text_style.face == "mono":
            return 0.61 * text_style.size * len(text)
        ems = sum(self._em(c) for c in text)
        return ems * text_style.size * (1.1 if text_style.face == "bold" else 1.0)

    def _em(self, char: str) -> float:
        if char in self._NARROW:
            return 0.4
        if char in self._WIDE:
            return 1.0
        return 0.74 if char.isupper() else 0.64

    def ascent(self, style: str) -> float:
        return 0.93 * STYLES[style].size

    def descent(self, style: str) -> float:
        return 0.24 * STYLES[style].size


@functools.cache
def _font_file(names: tuple[str, ...]) -> str | None:
    """The first of ``names`` found (see the module docstring), or None."""
    from PIL import ImageFont

    for name in names:
        for candidate in _candidates(name):
            try:
                return ImageFont.truetype(candidate, 10).path
            except OSError:
                continue
    return None


def _candidates(name: str) -> list[str]:
    """Where to look for the font file ``name``, in order; the bare name is Pillow's search."""
    chosen = os.environ.get("LEAPP_PICTURE_FONTS")
    first = [Path(chosen) / name] if chosen else []
    later = [Path(folder) / name for folder in _matplotlib_fonts()]
    return [str(p) for p in first if p.is_file()] + [name] + [str(p) for p in later if p.is_file()]


def _matplotlib_fonts() -> list[str]:
    try:
        found = importlib.util.find_spec("matplotlib")
    except (ImportError, ValueError):
        return []
    locations = found.submodule_search_locations if found else None
    return [str(Path(loc) / "mpl-data" / "fonts" / "ttf") for loc in locations or ()]


@functools.lru_cache(maxsize=64)
def _pillow_font(file: str | None, size: int) -> Any:
    from PIL import ImageFont

    size = max(size, 1)
    return ImageFont.load_default(size=size) if file is None else ImageFont.truetype(file, size)
