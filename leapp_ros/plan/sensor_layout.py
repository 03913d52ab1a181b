"""How a camera image or a cloud of height samples fills a port: axes, channels, encodings.

An image port's **layout** names its axes, from the first: ``N`` a batch axis of size 1, ``H``
rows, ``W`` columns, ``C`` channels (``HW``, ``HWC``, ``CHW``, ``NHW``, ``NHWC``, ``NCHW``). A
height port fed by a ``sensor_msgs/PointCloud2`` is ``P`` (the points in cloud order), ``NP``,
or an organized cloud's grid ``HW`` / ``NHW``. :func:`image_layout` and :func:`cloud_layout`
read it from ``ports.<port>.layout`` or, without one, from the port's shape and element names:

- a colour axis is one whose ``element_names`` entry lists colour names (``r g b [a]`` in any
  order, or ``red``, ``green``, ``blue``, ``alpha``): the last axis makes ``HWC``, the third
  from last ``CHW``;
- otherwise the shape tells: 2 axes are ``HW``; of 3 axes, a last one of 1, 3 or 4 elements
  (and a first one of another size) is ``HWC``, a first one of 1, 3 or 4 (and a last one of
  another) ``CHW``; 4 axes are ``N`` (of size 1) and one of those; a single-channel port of
  shape ``[1, H, W]`` is ``NHW``. Anything left open is an :class:`UnfitLayoutError` that asks
  for ``ports.<port>.layout``.

The channels are named in the port's order (``r g b`` when the port does not name them: what
vision models take; ``mono`` for one channel of a colour camera, ``depth`` or ``height``).
:data:`ENCODINGS` are the ``sensor_msgs/Image`` encodings read, with their channel order and
pixel type; :func:`accepted_encodings` those a port takes: a colour port every colour encoding
holding its channels (alpha dropped, channels reordered) and float channels in its own order
(``32FC3``, ``32FC4``), a mono port ``mono8`` and ``32FC1``, a depth port ``32FC1`` (metres)
and ``16UC1`` (millimetres), an elevation grid ``32FC1``; a ``uint8`` port only 8-bit
encodings, a ``uint16`` port only ``16UC1``, a float port any of them. Pure data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "CAMERA_DEPTH",
    "CAMERA_IMAGE",
    "CLOUD_LAYOUTS",
    "ENCODINGS",
    "IMAGE_LAYOUTS",
    "TERRAIN_HEIGHT",
    "Encoding",
    "UnfitLayoutError",
    "accepted_encodings",
    "cloud_layout",
    "default_scale",
    "image_layout",
]

CAMERA_IMAGE = "state/camera/image"  # Isaac ROS Deploy's kind of a camera image
CAMERA_DEPTH = "state/camera/depth"  # a depth image, metres
TERRAIN_HEIGHT = "state/terrain/height"  # heights of terrain samples around the base

IMAGE_LAYOUTS = ("HW", "HWC", "CHW", "NHW", "NHWC", "NCHW")
CLOUD_LAYOUTS = ("P", "NP", "HW", "NHW")
_DTYPES = ("uint8", "uint16", "float16", "float32", "float64")
_COLOURS = {"r": "r", "g": "g", "b": "b", "a": "a", "red": "r", "green": "g", "blue": "b"}
_COLOURS["alpha"] = "a"


@dataclass(frozen=True)
class Encoding:
    """A ``sensor_msgs/Image`` encoding: its channels in memory order and its pixel type (a
    NumPy type code without byte order); ``ordered`` False: float channels in the port's own
    order (``32FC3``, ``32FC4``: what a simulator renders, and the harness sends for float
    values that no 8-bit frame holds)."""

    name: str
    channels: tuple[str, ...]
    code: str
    ordered: bool = True

    @property
    def integer(self) -> bool:
        return self.code[0] == "u"


ENCODINGS = {
    encoding.name: encoding
    for encoding in (
        Encoding("mono8", ("mono",), "u1"),
        Encoding("rgb8", ("r", "g", "b"), "u1"),
        Encoding("bgr8", ("b", "g", "r"), "u1"),
        Encoding("rgba8", ("r", "g", "b", "a"), "u1"),
        Encoding("bgra8", ("b", "g", "r", "a"), "u1"),
        Encoding("16UC1", ("depth",), "u2"),
        Encoding("32FC1", ("depth",), "f4"),
        Encoding("32FC3", ("", "", ""), "f4", ordered=False),
        Encoding("32FC4", ("", "", "", ""), "f4", ordered=False),
    )
}


class UnfitLayoutError(ValueError):
    """The port's shape, dtype or names do not make an image or a height grid."""


def image_layout(
    kind: str,
    shape: tuple[int, ...],
    dtype: str,
    names: tuple = (),
    *,
    channels: tuple[str, ...] = (),
    layout: str = "",
) -> tuple[str, tuple[str, ...]]:
    """The layout and channel names of an Image port of ``kind``.

    Args:
        names: the port's ``element_names`` entries (aligned with its last axes).
        channels: the channel names from ``ports.<port>.names`` (empty: from ``names``).
        layout: ``ports.<port>.layout`` (empty: from the shape and names).

    Raises:
        UnfitLayoutError: the port is no image of this kind (says what to set).
    """
    if dtype not in _DTYPES:
        raise UnfitLayoutError(f"an image port is {', '.join(_DTYPES)}, not {dtype}")
    single = kind != CAMERA_IMAGE
    names = tuple(names or ())
    layout = _image_axes(shape, names, layout.upper(), single)
    channels = _channels(kind, shape, layout, names, tuple(channels))
    if not accepted_encodings(kind, channels, dtype):
        raise UnfitLayoutError(
            f"no image encoding fits a {dtype} port of kind {kind!r} with channels "
            f"{list(channels)} (depth: float, or uint16 for 16UC1 millimetres; colour: uint8 "
            "or float)"
        )
    return layout, channels


def _image_axes(shape: tuple[int, ...], names: tuple, layout: str, single: bool) -> str:
    if layout:
        if layout not in IMAGE_LAYOUTS:
            raise UnfitLayoutError(
                f"ports.<port>.layout {layout!r} is none of {', '.join(IMAGE_LAYOUTS)}"
            )
        if len(layout) != len(shape):
            raise UnfitLayoutError(f"layout {layout} has {len(layout)} axes, shape {list(shape)}")
        if layout[0] == "N" and shape[0] != 1:
            raise UnfitLayoutError(f"the batch axis N of shape {list(shape)} must be 1")
        return layout
    batch = len(shape) == 4 or (len(shape) == 3 and single and shape[0] == 1)
    if batch and shape[0] != 1:
        raise UnfitLayoutError(f"the batch axis of shape {list(shape)} must be 1")
    rest = shape[1:] if batch else shape
    named = ((None,) * len(rest) + names)[-len(rest) :]  # entries align from the last axis
    if len(rest) == 2:
        return "N" * batch + "HW"
    if len(rest) != 3:
        raise UnfitLayoutError(
            f"an image port has 2 to 4 axes ([H, W], [H, W, C], [C, H, W], a batch of 1 "
            f"first), the shape is {list(shape)}"
        )
    if _colour_names(named[-1]):
        return "N" * batch + "HWC"
    if _colour_names(named[0]):
        return "N" * batch + "CHW"
    last, first = rest[-1] in (1, 3, 4), rest[0] in (1, 3, 4)
    if last and not first:
        return "N" * batch + "HWC"
    if first and not last:
        return "N" * batch + "CHW"
    raise UnfitLayoutError(
        f"shape {list(shape)} could be [H, W, C] or [C, H, W]: set ports.<port>.layout "
        "(HWC or CHW, NHWC or NCHW with a batch axis), or name the channels"
    )


def _colour_names(entry: object) -> bool:
    return isinstance(entry, (list, tuple)) and all(str(n).lower() in _COLOURS for n in entry)


def _channels(
    kind: str, shape: tuple[int, ...], layout: str, names: tuple, given: tuple[str, ...]
) -> tuple[str, ...]:
    count = shape[layout.index("C")] if "C" in layout else 1
    fixed = {CAMERA_DEPTH: "depth", TERRAIN_HEIGHT: "height"}.get(kind)
    if fixed is not None:
        if count != 1:
            raise UnfitLayoutError(
                f"a {kind} port has one channel, shape {list(shape)} has {count}"
            )
        return (fixed,)
    if count == 1:
        return ("mono",)
    if count not in (3, 4):
        raise UnfitLayoutError(f"a colour image has 1, 3 or 4 channels, not {count}")
    entry: object = given or None
    if entry is None:
        at = layout.index("C") - len(shape)  # element_names align from the last axis
        entry = names[at] if len(names) >= -at else None
    if not isinstance(entry, (list, tuple)):
        return ("r", "g", "b", "a")[:count]
    channels = tuple(_COLOURS.get(str(name).lower(), "") for name in entry)
    if len(channels) != count or not all(channels) or len(set(channels)) != count:
        raise UnfitLayoutError(f"channel names {list(entry)} are not r, g, b (and a) once each")
    if "a" in channels and count == 3:
        raise UnfitLayoutError(f"a 3-channel port names alpha: {list(entry)}")
    return channels


def accepted_encodings(kind: str, channels: tuple[str, ...], dtype: str) -> tuple[str, ...]:
    """The encodings a port of ``kind``, ``channels`` and ``dtype`` reads."""
    if kind == TERRAIN_HEIGHT:
        names = ("32FC1",)
    elif kind == CAMERA_DEPTH:
        names = ("32FC1", "16UC1")
    elif channels == ("mono",):
        names = ("mono8", "32FC1")
    else:
        names = tuple(
            name
            for name, encoding in ENCODINGS.items()
            if len(encoding.channels) > 1 and set(channels) <= set(encoding.channels)
        )
        names += (f"32FC{len(channels)}",)
    if dtype == "uint8":
        return tuple(name for name in names if ENCODINGS[name].code == "u1")
    if dtype == "uint16":
        return tuple(name for name in names if ENCODINGS[name].code == "u2")
    return names


def default_scale(kind: str, dtype: str) -> float:
    """What an integer pixel becomes in a float port unless ``ports.<port>.scale`` says
    otherwise: 16UC1 depth in millimetres becomes metres (0.001), 8-bit colour or mono 0..1
    (1/255); integer ports take the pixels as they are (1)."""
    if not dtype.startswith("float"):
        return 1.0
    return 0.001 if kind == CAMERA_DEPTH else 1.0 / 255.0


def cloud_layout(shape: tuple[int, ...], layout: str = "") -> str:
    """The layout of a height port fed by a PointCloud2 (see the module documentation).

    Raises:
        UnfitLayoutError: another shape, or a layout that does not fit it.
    """
    layout = layout.upper()
    if layout:
        if layout not in CLOUD_LAYOUTS:
            raise UnfitLayoutError(
                f"ports.<port>.layout {layout!r} of a PointCloud2 port is none of "
                f"{', '.join(CLOUD_LAYOUTS)}"
            )
        if len(layout) != len(shape) or (layout[0] == "N" and shape[0] != 1):
            raise UnfitLayoutError(f"layout {layout} does not fit shape {list(shape)}")
        return layout
    if len(shape) == 1:
        return "P"
    if len(shape) == 2:
        return "NP" if shape[0] == 1 else "HW"
    if len(shape) == 3 and shape[0] == 1:
        return "NHW"
    raise UnfitLayoutError(
        f"heights from a PointCloud2 are [N] (points in cloud order), [1, N], or [H, W] / "
        f"[1, H, W] (an organized cloud); the shape is {list(shape)} "
        f"({math.prod(shape)} values)"
    )
