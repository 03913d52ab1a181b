"""The pipeline picture: ``<name>.png`` and ``<name>.svg`` next to ``<name>.yaml``, drawn from
the spec alone (``compile_graph(visualize=True)`` writes them; ``leapp-ros inspect --picture``
too).

One card per model: its name, a badge with its backend, its input ports down the left side and
its output ports down the right side, each with dtype and shape. Cards stand in columns by
data-flow depth (a node one column right of the deepest node that feeds it; feedback does not
count). Edges run with rounded corners in the gaps between columns, so no line crosses a card:
a ``data_flow`` edge solid (blue), a ``feedback_flow`` edge dashed (orange) and a node's
feedback to itself, its state, dashed (purple), with the ports at both ends marked in the same
colour. Edges that skip a column run along lanes above the cards (data) or below them
(feedback). Pipeline inputs are green tags left of the ports they feed and pipeline outputs red
tags right of theirs, each labelled with its ``node/port`` key. Under the title: the counts of
nodes, inputs and outputs (and the rate, when ``pipeline.configs`` has a ``frequency``), then
a legend.

One layout (:mod:`~leapp.spec.picture_layout`, :mod:`~leapp.spec.picture_routes`, placing the
values of :mod:`~leapp.spec.picture_places`), made into one scene of shapes and text
(:mod:`~leapp.spec.picture_scene`), drawn by two renderers: :mod:`~leapp.spec.picture_png`
(Pillow: antialiased shapes, TrueType text) and :mod:`~leapp.spec.picture_svg` (XML written by
hand). Fonts: :mod:`~leapp.spec.picture_fonts`.

Pillow is needed for the PNG (``pip install 'leapp_ros[picture]'``); :func:`write_picture`
raises :class:`~leapp.errors.DependencyError` without it. The SVG alone needs nothing: without
Pillow, ``draw_pipeline(spec).svg()`` sizes the boxes from estimated text widths.

Example::

    from leapp import spec
    from leapp.spec.picture import write_picture

    files = write_picture(spec.load("exports/torch_pipeline"))
    files.png, files.svg  # exports/torch_pipeline/torch_pipeline.png and .svg
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from leapp.errors import SpecError
from leapp.spec.picture_fonts import Fonts, PillowFonts, load_fonts, require_pillow
from leapp.spec.picture_layout import layout_pipeline
from leapp.spec.picture_places import Layout, NodePlace
from leapp.spec.picture_scene import COLORS, Scene, build_scene
from leapp.spec.schema import Spec

__all__ = [
    "COLORS",
    "Picture",
    "PictureFiles",
    "draw_pipeline",
    "require_pillow",
    "write_picture",
]

logger = logging.getLogger(__name__)

#: PNG pixels per picture unit: 2 keeps text sharp on high-density screens.
DEFAULT_SCALE = 2.0


@dataclass(frozen=True)
class Picture:
    """A laid-out pipeline picture; :meth:`png` and :meth:`svg` draw it."""

    name: str
    layout: Layout
    scene: Scene
    fonts: Fonts

    @property
    def width(self) -> float:
        """In picture units (the SVG's; the PNG has ``scale`` pixels per unit)."""
        return self.layout.width

    @property
    def height(self) -> float:
        return self.layout.height

    @property
    def boxes(self) -> Mapping[str, NodePlace]:
        """Each node's card: its column, rectangle and header."""
        return self.layout.nodes

    def png(self) -> bytes:
        """The PNG file (needs Pillow)."""
        from leapp.spec.picture_png import render_png

        require_pillow()
        if not isinstance(self.fonts, PillowFonts):
            raise SpecError(
                f"the picture of {self.name!r} was laid out without Pillow's fonts, so its "
                "text would not fit a PNG; draw it again with Pillow installed."
            )
        return render_png(self.scene, self.fonts)

    def svg(self) -> str:
        """The SVG document."""
        from leapp.spec.picture_svg import render_svg

        return render_svg(self.scene, f"pipeline {self.name}")


@dataclass(frozen=True)
class PictureFiles:
    """Where :func:`write_picture` wrote the picture."""

    png: Path
    svg: Path


def draw_pipeline(spec: Spec, *, scale: float = DEFAULT_SCALE) -> Picture:
    """Lay out ``spec``'s models and ``pipeline`` wiring (see the module docstring) for a PNG
    of ``scale`` pixels per unit; text is measured with Pillow's fonts when it is installed."""
    if not spec.models:
        raise SpecError(f"pipeline {spec.name!r} has no models to draw; export a node first.")
    if not scale > 0:
        raise ValueError(f"scale must be a positive number of pixels per unit, got {scale!r}")
    fonts = load_fonts(scale)
    layout = layout_pipeline(spec, fonts)
    return Picture(spec.name, layout, build_scene(spec, layout), fonts)


def write_picture(
    spec: Spec, path: str | os.PathLike[str] | None = None, *, scale: float = DEFAULT_SCALE
) -> PictureFiles:
    """Draw ``spec`` and write ``path`` (a PNG; default ``<name>.png`` next to its YAML) and
    the SVG beside it (the same name ending in ``.svg``). Needs Pillow."""
    if path is None:
        if spec.path is None:
            raise SpecError(
                f"spec {spec.name!r} has no file, so there is no folder to put its picture in; "
                "pass a path, or write the spec with leapp.spec.dump() first."
            )
        path = spec.path.with_name(f"{spec.name}.png")
    require_pillow()
    picture = draw_pipeline(spec, scale=scale)
    png = Path(path)
    svg = png.with_suffix(".svg")
    png.write_bytes(picture.png())
    svg.write_text(picture.svg(), encoding="utf-8")
    logger.debug("drew %s and %s (%g x %g units)", png, svg, picture.width, picture.height)
    return PictureFiles(png, svg)
