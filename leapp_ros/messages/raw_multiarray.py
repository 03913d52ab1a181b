"""A port's ``std_msgs`` MultiArray as CDR bytes and back, for the raw data path.

:class:`RawArrayCodec` is :class:`~leapp_ros.messages.multiarray.PortCodec` on serialized
messages (what a ``raw=True`` subscription receives and ``publish(bytes)`` sends; the byte
layout is in :mod:`leapp_ros.messages.cdr`):

- writing fills one preallocated buffer per port: the encapsulation header, the layout (the
  port's dims, labels and strides, as the typed path writes them) and the element count are
  written once; each message copies the values into the buffer's data section and sends a
  copy of the buffer, so the message on the wire is the typed path's, byte for byte apart from
  padding;
- reading recognizes the two headers a sender of this port writes, the full layout this codec
  writes and the empty layout of a quick ``ros2 topic pub`` or a hand-written node, by
  comparing the bytes before the data with them, and then views the data in place
  (``np.frombuffer``, no copy). Anything else (other labels, a big-endian sender, malformed
  bytes) is parsed field by field and checked exactly as the typed path checks a message:
  same rules, same :class:`~leapp_ros.messages.multiarray.MessageError` texts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from leapp_ros.messages import cdr
from leapp_ros.messages.multiarray import MessageError, PortCodec, _tensor_array

__all__ = ["RawArrayCodec"]


class RawArrayCodec:
    """Serialized MultiArray messages of one port (see the module documentation).

    Args:
        codec: the port's typed codec (dtype, shape, labels, checks).
    """

    __slots__ = (
        "_bare",
        "_bfloat16",
        "_buffer",
        "_codec",
        "_fields",
        "_full",
        "_port_numpy",
        "_shaped",
        "_wire",
        "size",
    )

    def __init__(self, codec: PortCodec):
        self._codec = codec
        self.size = codec.size
        self._wire = codec.wire_dtype.newbyteorder("<")
        self._port_numpy = (np.float32,) if codec.dtype == "bfloat16" else (np.dtype(codec.dtype),)
        self._fields = cdr.layout(codec.message_class)
        self._bfloat16 = codec.dtype == "bfloat16"
        dims = [cdr.Fields(label=a, size=b, stride=c) for a, b, c in codec.layout_dims]
        full = self._serialized(dims)
        self._full = (full[: len(full) - self._data_bytes], len(full) - self._data_bytes)
        bare = self._serialized([])
        self._bare = (bare[: len(bare) - self._data_bytes], len(bare) - self._data_bytes)
        self._buffer = bytearray(full)
        data = np.frombuffer(self._buffer, self._wire, self.size, self._full[1])
        self._shaped = data.reshape(codec.shape)  # where each message's values are copied to

    @property
    def _data_bytes(self) -> int:
        return self.size * self._wire.itemsize

    def _serialized(self, dims: list[Any]) -> bytes:
        layout = cdr.Fields(dim=dims, data_offset=0)
        message = cdr.Fields(layout=layout, data=np.zeros(self.size, self._wire))
        return cdr.write(message, self._fields)

    def to_bytes(self, value: Any) -> bytes:
        """The serialized message holding ``value`` (a NumPy array or torch tensor of the
        port's dtype and shape, any strides).

        Raises:
            MessageError: the value's shape or dtype is not the port's.
        """
        if not isinstance(value, np.ndarray):
            value = _tensor_array(value, self._codec.dtype)
        if value.dtype not in self._port_numpy or value.shape != self._codec.shape:
            self._codec.to_message(value)  # raises the typed path's error
        self._shaped[...] = value  # widens float16 / bfloat16 to float32, bool to 0/1
        return bytes(self._buffer)

    def from_bytes(self, payload: bytes, copy: bool = True) -> Any:
        """The port's array in ``payload``: a writable array of its own, or with ``copy``
        False a read-only view of the payload where no cast is needed (for a consumer that
        never writes into its inputs, such as ONNX Runtime, which copies them into its
        bound buffers).

        Raises:
            UnsupportedEncodingError: the payload is not plain CDR (read it the typed way).
            MessageError: as :meth:`PortCodec.from_message`, or malformed CDR.
        """
        for prefix, at in (self._full, self._bare):
            if payload.startswith(prefix) and len(payload) >= at + self._data_bytes:
                values = np.frombuffer(payload, self._wire, self.size, at)
                break
        else:
            values = self._parsed(payload)
        if self._codec.shape != (self.size,):
            values = values.reshape(self._codec.shape)
        if self._bfloat16:  # torch warns of (and never writes to) a read-only array
            values = values.copy()
        value = self._codec.port_value(values)
        return value.copy() if copy and value is values else value

    def _parsed(self, payload: bytes) -> np.ndarray:
        message = cdr.read(payload, self._fields)
        layout = message.layout
        self._codec.check_layout(len(message.data), layout.data_offset, layout.dim)
        data = message.data
        if data.dtype.byteorder == ">":  # a big-endian sender: native order for the model
            data = data.astype(data.dtype.newbyteorder("="))
        if data.dtype != self._codec.wire_dtype:
            raise MessageError(f"expected {self._codec.wire_dtype} data, got {data.dtype}")
        return data

    def __repr__(self) -> str:
        return f"RawArrayCodec({self._codec!r})"
