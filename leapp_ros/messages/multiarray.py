"""Tensors to ``std_msgs`` MultiArray messages and back, cheaply (this is the hot path).

Every tensor travels as the ``std_msgs`` MultiArray of its dtype
(see :mod:`leapp_ros.plan.pipeline`):

- float32, float64: ``Float32MultiArray``, ``Float64MultiArray``;
- int8, int16, int32, int64: ``Int8MultiArray`` ... ``Int64MultiArray``;
- uint8, uint16, uint32, uint64: ``UInt8MultiArray`` ... ``UInt64MultiArray``;
- bool: ``UInt8MultiArray`` with 0 and 1 (any non-zero byte reads back as True);
- float16, bfloat16: ``Float32MultiArray`` (widening is exact; received values are narrowed).

``data`` holds the elements in row-major (C) order, ``layout.data_offset`` is 0 and
``layout.dim`` has one entry per axis: ``label`` (the axis name from the spec's
``element_names`` when it has one, else ``dim<i>``), ``size``, and ``stride``, the number of
elements spanned by one step along the axis *and all later ones* as ``MultiArrayLayout``'s
comment defines it (for shape ``[4, 6]``: strides 24 and 6). A 0-d tensor has no dims and one
element.

Receiving checks what arrived against the port and raises :class:`MessageError` naming what
was expected and what came: the message must be the port's MultiArray type (its ``data`` of the
port's wire type), the number of elements must match, ``data_offset`` must be 0, and
a non-empty layout must have the port's sizes axis by axis (a stride must be the row-major one,
or 0 when a sender left it unset). **An empty layout is accepted** when the element count is
right, so a quick ``ros2 topic pub /ns/node/input std_msgs/msg/Float32MultiArray "{data: [1,
2, 3]}"`` works without spelling out the dims.

Conversion never goes through Python lists: publishing copies the tensor's bytes once into
an ``array.array`` (which rosidl then serializes directly), receiving wraps the message's
``array.array`` with ``np.frombuffer`` (and ``torch.from_numpy``) without copying (except bool,
float16 and bfloat16, which need a cast). Use :func:`codec` once per port and call its methods
in callbacks; :func:`to_message` and :func:`from_message` are shorthands that look the codec up.
A publisher that publishes at once can refill one message per port
(``codec.to_message(tensor, reuse=message)``), which halves the cost of publishing.

The nodes' raw data path (serialized messages, no rclpy message objects) is
:mod:`leapp_ros.messages.raw_multiarray`, built on these codecs' layout and checks.

Nodes use the NumPy side (:meth:`PortCodec.array_from_message`, and ``to_message`` takes
arrays too), so a node whose model needs no torch never imports it; torch is imported only by
the tensor methods (and for bfloat16, which NumPy lacks).
"""

from __future__ import annotations

import array
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from leapp.errors import LeappError
from leapp_ros.plan.pipeline import message_type

__all__ = [
    "SUPPORTED_DTYPES",
    "MessageError",
    "PortCodec",
    "codec",
    "from_message",
    "numpy_dtype",
    "to_message",
]


class MessageError(LeappError):
    """A message does not fit its port (length, layout), or a tensor does not fit its topic."""


@dataclass(frozen=True)
class _Wire:
    message: str  # std_msgs class name
    typecode: str  # array.array typecode of the message's data field
    numpy: Any  # numpy dtype of the data field


# The data field of each port's message (the message type itself comes from the plan).
_DATA = {
    "float32": ("f", np.float32),
    "float64": ("d", np.float64),
    "float16": ("f", np.float32),
    "bfloat16": ("f", np.float32),
    "int8": ("b", np.int8),
    "int16": ("h", np.int16),
    "int32": ("i", np.int32),
    "int64": ("q", np.int64),
    "uint8": ("B", np.uint8),
    "uint16": ("H", np.uint16),
    "uint32": ("I", np.uint32),
    "uint64": ("Q", np.uint64),
    "bool": ("B", np.uint8),
}
_WIRE = {
    dtype: _Wire(message_type(dtype).rsplit("/", 1)[1], typecode, numpy_dtype)
    for dtype, (typecode, numpy_dtype) in _DATA.items()
}

#: tensor dtypes that have a message type.
SUPPORTED_DTYPES: tuple[str, ...] = tuple(_WIRE)

# dtypes whose wire type differs from the tensor's, so both directions need a cast.
_CAST = {"float16", "bfloat16"}


def numpy_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype of a port's dtype name (bfloat16, which NumPy lacks: MessageError)."""
    try:
        return np.dtype(dtype)
    except TypeError:
        raise MessageError(
            f"dtype {dtype!r} has no NumPy equivalent; such a port cannot be read from or "
            "written to a robot message: export it as float32"
        ) from None


class Port(Protocol):
    """What a codec needs from a plan port (:class:`~leapp_ros.plan.pipeline.InputPlan` or
    :class:`~leapp_ros.plan.pipeline.OutputPlan`)."""

    @property
    def dtype(self) -> str: ...

    @property
    def shape(self) -> tuple[int, ...]: ...


class PortCodec:
    """Converts tensors of one port (dtype, shape, axis labels) to messages and back.

    Build it once per port with :func:`codec`; the layout and all checks are precomputed.

    Attributes:
        message_class: the ``std_msgs`` message class of the port.
        dtype: the tensor dtype name, ``shape`` the tensor shape, ``size`` its element count.
    """

    __slots__ = (
        "_dim_class",
        "_dims",
        "_labelled",
        "_layout_class",
        "_numpy",
        "_port_numpy",
        "_reshape",
        "_typecode",
        "dtype",
        "message_class",
        "shape",
        "size",
    )

    def __init__(self, dtype: str, shape: tuple[int, ...], labels: tuple[str, ...] = ()):
        from std_msgs import msg as std_msgs

        wire = _WIRE.get(dtype)
        if wire is None:
            raise MessageError(
                f"dtype {dtype!r} has no std_msgs MultiArray; supported: "
                f"{', '.join(SUPPORTED_DTYPES)}; change the port's dtype and export again"
            )
        self.dtype = dtype
        self.shape = tuple(int(size) for size in shape)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.message_class = getattr(std_msgs, wire.message)
        self._typecode = wire.typecode
        self._numpy = np.dtype(wire.numpy)
        self._port_numpy = None if dtype == "bfloat16" else np.dtype(dtype)
        strides = [int(np.prod(self.shape[axis:], dtype=np.int64)) for axis in range(len(shape))]
        labels = tuple(labels[i] if i < len(labels) else f"dim{i}" for i in range(len(shape)))
        self._dims = list(zip(self.shape, strides, strict=True))
        self._reshape = len(self.shape) != 1
        self._labelled = tuple(zip(labels, self.shape, strides, strict=True))
        self._layout_class = std_msgs.MultiArrayLayout
        self._dim_class = std_msgs.MultiArrayDimension

    def to_message(self, tensor: Any, reuse: Any = None) -> Any:
        """A message holding ``tensor`` (any strides; converted to the wire dtype).

        Args:
            tensor: a torch tensor or a NumPy array of the port's dtype and shape.
            reuse: a message this codec returned before, to fill in place instead of building
                a new one (about half the cost). Only for messages that are published at once
                and not kept: rclpy serializes on ``publish``, so the node reuses one message
                per output.

        Raises:
            MessageError: the tensor's shape or dtype is not the port's.
        """
        if not isinstance(tensor, np.ndarray):
            tensor = _tensor_array(tensor, self.dtype)
        if tensor.dtype != (self._port_numpy or np.float32) or tensor.shape != self.shape:
            raise MessageError(
                f"expected a {self.dtype} tensor of shape {list(self.shape)}, got "
                f"{str(tensor.dtype).removeprefix('torch.')} {list(tensor.shape)}"
            )
        if self.dtype in _CAST:
            tensor = tensor.astype(np.float32)
        if reuse is None:
            reuse = self.new_message()
        # tobytes() writes C order whatever the strides are; bool bytes are 0/1 already.
        reuse.data = array.array(self._typecode, tensor.tobytes())
        return reuse

    def array_from_message(self, message: Any) -> Any:
        """The value in ``message`` as a NumPy array of the port's dtype and shape (sharing
        the message's memory when no cast is needed; a torch tensor for bfloat16).

        Raises:
            MessageError: see :meth:`from_message`.
        """
        return self.port_value(self._values(message))

    def port_value(self, values: np.ndarray) -> Any:
        """Wire values (the wire dtype, the port's shape) as the port's array."""
        if self.dtype == "bool":
            return values.astype(bool)  # any non-zero byte is True; a 0-d array stays one
        if self._port_numpy is None:
            import torch

            return torch.from_numpy(values).to(torch.bfloat16)
        if self.dtype in _CAST:
            return values.astype(self._port_numpy)
        return values

    def _values(self, message: Any) -> Any:
        """The data of ``message`` as a NumPy view of its wire dtype, in the port's shape,
        once the message type, element count, offset and layout are checked."""
        data = message.data
        layout = message.layout
        dims = layout.dim
        if (
            len(data) != self.size
            or data.typecode != self._typecode
            or layout.data_offset != 0
            or (dims and [(dim.size, dim.stride) for dim in dims] != self._dims)
        ):
            self._check(message)
        values = np.frombuffer(data, self._numpy)
        return values.reshape(self.shape) if self._reshape else values

    def from_message(self, message: Any) -> Any:
        """The tensor in ``message``, sharing its memory when no cast is needed.

        Raises:
            MessageError: another MultiArray type than the port's, wrong element count,
                non-zero ``data_offset``, or a non-empty layout whose dims are not the port's
                shape.
        """
        import torch

        values = torch.from_numpy(self._values(message))
        if self.dtype == "bool":
            return values != 0
        if self.dtype in _CAST:
            return values.to(getattr(torch, self.dtype))
        return values

    @property
    def wire_dtype(self) -> np.dtype:
        """The NumPy dtype of the message's ``data`` elements."""
        return self._numpy

    @property
    def layout_dims(self) -> tuple[tuple[str, int, int], ...]:
        """``(label, size, stride)`` of each axis, as :meth:`new_message` lays them out."""
        return self._labelled

    def new_message(self) -> Any:
        """An empty message of this port with its own layout (messages never share one)."""
        dims = [self._dim_class(label=a, size=b, stride=c) for a, b, c in self._labelled]
        return self.message_class(layout=self._layout_class(dim=dims, data_offset=0))

    def _check(self, message: Any) -> None:
        data, layout = message.data, message.layout
        expected = f"{self.size} {self.dtype} element(s) of shape {list(self.shape)}"
        if data.typecode != self._typecode:
            raise MessageError(
                f"expected a {self.message_class.__name__} for {expected}, got a "
                f"{type(message).__name__} (array typecode {data.typecode!r})"
            )
        self.check_layout(len(data), layout.data_offset, layout.dim)

    def check_layout(self, count: int, data_offset: int, dims: Sequence[Any]) -> None:
        """Raise MessageError unless ``count`` elements at ``data_offset`` laid out as
        ``dims`` (objects with ``size`` and ``stride``) fit this port."""
        expected = f"{self.size} {self.dtype} element(s) of shape {list(self.shape)}"
        if count != self.size:
            raise MessageError(f"expected {expected}, got {count} element(s)")
        if data_offset != 0:
            raise MessageError(f"expected data_offset 0, got {data_offset}")
        if not dims:
            return
        sizes = [dim.size for dim in dims]
        strides_ok = all(
            dim.stride in (stride, 0) for dim, (_, stride) in zip(dims, self._dims, strict=False)
        )
        if sizes != list(self.shape) or not strides_ok:
            got = [(dim.size, dim.stride) for dim in dims]
            raise MessageError(
                f"expected layout dims (size, stride) {self._dims} or an empty layout "
                f"for {expected}, got {got}"
            )

    def __repr__(self) -> str:
        return f"PortCodec({self.dtype}, {list(self.shape)}, {self.message_class.__name__})"


@functools.lru_cache(maxsize=1024)
def codec(port: Port) -> PortCodec:
    """The (cached) codec of a plan port: its dtype, shape and, for outputs, its labels."""
    return PortCodec(port.dtype, tuple(port.shape), tuple(getattr(port, "labels", ())))


def _tensor_array(tensor: Any, dtype: str) -> np.ndarray:
    """A torch tensor as a NumPy array (bfloat16 widened to float32, which the wire carries)."""
    tensor = tensor.detach()
    if dtype == "bfloat16" and str(tensor.dtype) == "torch.bfloat16":
        import torch

        return tensor.to(torch.float32).numpy().astype(np.float32)
    return tensor.numpy()


def to_message(tensor: Any, port: Port) -> Any:
    """``tensor`` as the port's ``std_msgs`` MultiArray; see :meth:`PortCodec.to_message`."""
    return codec(port).to_message(tensor)


def from_message(message: Any, port: Port) -> Any:
    """The tensor in ``message`` for ``port``; see :meth:`PortCodec.from_message`."""
    return codec(port).from_message(message)
