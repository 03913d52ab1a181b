"""``sensor_msgs/Image`` into one port's array, and an array into an Image.

:class:`ImageCodec` reads a frame (rclpy's message, or :class:`~leapp_ros.messages.cdr.Fields`
read from its CDR bytes, whose ``data`` is a view of the payload) without Python per pixel: the
pixel bytes are viewed as a ``[H, W, C]`` NumPy array with the row ``step`` as its stride (row
padding skipped) in the byte order ``is_bigendian`` says; the port's channels are picked from
the encoding's (a slice: ``bgr8`` reversed into an ``r g b`` port, alpha dropped), the axes
moved to the port's layout (``CHW``, a batch axis) and the dtype made the port's, all views but
for the last step, which is the one copy: a cast, integer pixels times the port's ``scale`` in
a float port (16UC1 millimetres become metres), or a plain copy. A frame that needs none (its
encoding, channel order, dtype and layout the port's, no row padding) is handed on as a
read-only view of the payload when the node's model never writes into its inputs (``copy``
False). Which encodings a port takes and how its axes are read is
:mod:`leapp_ros.plan.sensor_layout`'s. A frame of another size, an encoding the port does not
take, or a ``data`` shorter than ``step`` × ``height`` is a
:class:`~leapp_ros.messages.multiarray.MessageError` naming both sides: the node drops and
counts it.

:meth:`ImageCodec.encode` goes the other way (the test harness, a simulator): the port's array
as an Image in the encoding that holds the port's channels exactly (``rgb8`` for ``r g b``,
``mono8``, ``32FC1`` for float depth, ``16UC1`` for a ``uint16`` depth port); a float colour
or mono port's values divided by its scale when that gives whole numbers in 0..255, else as
``32FC3`` / ``32FC4`` / ``32FC1`` floats in the port's channel order, so that every value
arrives as it was.
"""

from __future__ import annotations

import array
import itertools
from typing import Any

import numpy as np

from leapp_ros.messages.multiarray import MessageError, numpy_dtype
from leapp_ros.plan.bindings import Binding
from leapp_ros.plan.sensor_layout import ENCODINGS, accepted_encodings

__all__ = ["ImageCodec"]


def _channel_slice(picks: list[int]) -> slice | list[int]:
    """``picks`` as a slice where they step evenly (a view), else the list."""
    if len(picks) == 1:
        return slice(picks[0], picks[0] + 1)
    step = picks[1] - picks[0]
    if step and all(b - a == step for a, b in itertools.pairwise(picks)):
        stop = picks[-1] + step
        return slice(picks[0], stop if stop >= 0 else None, step)
    return picks


class ImageCodec:
    """Frames of one Image port (see the module documentation).

    Args:
        binding: the port's binding (layout, channels, scale).
        dtype, shape: the port's.
        copy: every decoded array is one of its own (False: a read-only view of the payload
            where the frame needs no conversion).
    """

    def __init__(self, binding: Binding, dtype: str, shape: tuple[int, ...], copy: bool = True):
        self.binding = binding
        self.shape = tuple(shape)
        self.dtype = numpy_dtype(dtype)
        layout = binding.layout
        self.layout = layout
        self.height, self.width = shape[layout.index("H")], shape[layout.index("W")]
        self.channels = binding.elements
        self.scale = binding.scale
        self.encodings = accepted_encodings(binding.kind, self.channels, dtype)
        self._picks = {
            name: _channel_slice(
                [ENCODINGS[name].channels.index(c) for c in self.channels]
                if len(self.channels) > 1 and ENCODINGS[name].ordered
                else list(range(len(self.channels)))
            )
            for name in self.encodings
        }
        exact = [n for n in self.encodings if ENCODINGS[n].channels in (self.channels, ("depth",))]
        self._sent = exact[0] if exact else self.encodings[0]  # what encode sends
        self._float_sent = next((n for n in self.encodings if n.startswith("32FC")), None)
        plain = layout.lstrip("N")
        self._axes = tuple("HWC".index(axis) for axis in plain) if "C" in plain else None
        self._batch = layout.startswith("N")
        self._float = self.dtype.kind == "f"
        self._copy = copy
        self._what = f"{binding.kind} port of {self.width}x{self.height}"

    def decode(self, message: Any) -> np.ndarray:
        """The port's array in ``message`` (an Image, typed or read from CDR).

        Raises:
            MessageError: another size, an encoding the port does not take, too few bytes.
        """
        encoding = message.encoding
        pick = self._picks.get(encoding)
        if pick is None:
            raise MessageError(
                f"an Image in encoding {encoding!r} for a {self._what}, which takes "
                f"{', '.join(self.encodings)}; set the camera driver's encoding"
            )
        height, width = message.height, message.width
        if (height, width) != (self.height, self.width):
            raise MessageError(
                f"an Image of {width}x{height} (width x height) for a {self._what}; set the "
                f"camera driver's resolution to {self.width}x{self.height}"
            )
        pixels = self._view(message, ENCODINGS[encoding], height, width)
        pixels = pixels[:, :, pick]
        pixels = pixels.transpose(self._axes) if self._axes else pixels[:, :, 0]
        if self._batch:
            pixels = pixels[None]
        if self._float and ENCODINGS[encoding].integer:
            out = np.empty(self.shape, self.dtype)
            return np.multiply(pixels, self.scale, out=out, dtype=self.dtype, casting="unsafe")
        if pixels.dtype == self.dtype:
            if (not self._copy or isinstance(pick, list)) and pixels.flags.c_contiguous:
                return pixels  # a view (read-only), or the copy the channel list made
            return np.array(pixels, order="C")
        out = np.empty(self.shape, self.dtype)
        np.copyto(out, pixels, casting="unsafe")
        return out

    @staticmethod
    def _view(message: Any, encoding: Any, height: int, width: int) -> np.ndarray:
        """The pixels as ``[H, W, C]`` over the message's bytes (row padding skipped)."""
        item = int(encoding.code[1])
        pixel = item * len(encoding.channels)
        step, data = message.step, message.data
        needed = step * (height - 1) + width * pixel if height and width else 0
        if step < width * pixel or len(data) < needed:
            raise MessageError(
                f"an Image of {width}x{height} {encoding.name} with step {step} needs "
                f"{needed} bytes and steps of at least {width * pixel}; it has {len(data)} "
                "bytes"
            )
        order = ">" if message.is_bigendian and item > 1 else "<"
        return np.ndarray(
            (height, width, len(encoding.channels)),
            np.dtype(order + encoding.code),
            buffer=data,
            strides=(step, pixel, item),
        )

    def encode(self, value: Any, stamp: Any = None) -> Any:
        """An rclpy Image holding ``value`` (the port's shape; see the module documentation).

        Raises:
            MessageError: another shape, or float colour values that are not whole multiples
                of the port's scale within 0..255.
        """
        from sensor_msgs.msg import Image

        values = np.asarray(value)
        if values.shape != self.shape:
            raise MessageError(f"expected shape {list(self.shape)}, got {list(values.shape)}")
        pixels = values[0] if self._batch else values
        # back to [H, W, C]
        pixels = pixels.transpose(np.argsort(self._axes)) if self._axes else pixels[..., None]
        name = self._sent
        wire = np.dtype("<" + ENCODINGS[name].code)
        if ENCODINGS[name].integer and self._float:
            whole = self._whole(pixels / np.asarray(self.scale, pixels.dtype), wire)
            if whole is None and self._float_sent is None:
                raise MessageError(
                    f"a float image port of scale {self.scale:g} gets {name} pixels: give values "
                    f"k x {self.scale:g}, k a whole number in the range of {wire}"
                )
            if whole is None:
                name, wire = self._float_sent, np.dtype("<f4")
            else:
                pixels = whole
        pixels = np.ascontiguousarray(pixels, wire)
        message = Image(height=self.height, width=self.width, encoding=name, is_bigendian=0)
        message.step = self.width * pixels.shape[-1] * wire.itemsize
        message.data = array.array("B", pixels.tobytes())
        if stamp is not None:
            message.header.stamp = stamp
        return message

    @staticmethod
    def _whole(pixels: np.ndarray, wire: np.dtype) -> np.ndarray | None:
        """``pixels`` as whole numbers in the range of ``wire``, or None where they are not."""
        rounded = np.rint(pixels)
        info = np.iinfo(wire)
        held = (rounded >= info.min) & (rounded <= info.max)
        if not held.all() or not np.allclose(rounded, pixels, rtol=0, atol=1e-3):
            return None
        return rounded

    def __repr__(self) -> str:
        return f"ImageCodec({self.binding.describe()}, {self.dtype}, {list(self.shape)})"
