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
  same rules, same :class:`~leapp_ros.messages.multiarray.MessageError` texts;
- a serializer may leave the padding after a label (or before 8-byte data) as it finds it in
  memory (rclpy's does): a message that differs from a known layout only there is recognized
  too, by comparing the bytes between the paddings;
- a tick (:mod:`leapp_ros.messages.tick_label`: ``dim0@42``) changes the length of the first
  label, so a message with one is written from, and recognized by, a buffer laid out for its
  label's length (one per length, made when first needed); :meth:`RawArrayCodec.tick_of` reads
  it (the last message recognized is remembered: a node reads its values, then its tick).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from leapp_ros.messages import cdr
from leapp_ros.messages.multiarray import MessageError, PortCodec, _tensor_array
from leapp_ros.messages.tick_label import MARK, label_tick

__all__ = ["RawArrayCodec"]

_LABEL_AT = 12  # the first label's text: after the header, the dim count and its length
_MAX_DIGITS = 20  # the longest tick a buffer is kept for (2**64 - 1)


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
        "_full_pieces",
        "_last",
        "_port_numpy",
        "_shaped",
        "_tick_prefix",
        "_ticked",
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
        labels = [label for label, _, _ in codec.layout_dims]
        self._full_pieces = _pieces(labels, self._wire.itemsize, self._full[1])
        # per length of a ticked first label: its buffer, where its data starts, its data,
        # the bytes of its layout that are not padding
        self._ticked: dict[int, tuple[bytearray, int, np.ndarray, tuple]] = {}
        first = labels[0] if labels else None
        self._tick_prefix = None if first is None else (first + MARK).encode()
        self._last: tuple[bytes, np.ndarray, int] | None = None  # the last ticked message

    @property
    def _data_bytes(self) -> int:
        return self.size * self._wire.itemsize

    def _serialized(self, dims: list[Any]) -> bytes:
        layout = cdr.Fields(dim=dims, data_offset=0)
        message = cdr.Fields(layout=layout, data=np.zeros(self.size, self._wire))
        return cdr.write(message, self._fields)

    def to_bytes(self, value: Any, tick: int | None = None) -> bytes:
        """The serialized message holding ``value`` (a NumPy array or torch tensor of the
        port's dtype and shape, any strides), with ``tick`` in its first label when given
        (ignored for a port without axes).

        Raises:
            MessageError: the value's shape or dtype is not the port's.
        """
        if not isinstance(value, np.ndarray):
            value = _tensor_array(value, self._codec.dtype)
        if value.dtype not in self._port_numpy or value.shape != self._codec.shape:
            self._codec.to_message(value)  # raises the typed path's error
        if tick is None or self._tick_prefix is None:
            self._shaped[...] = value  # widens float16 / bfloat16 to float32, bool to 0/1
            return bytes(self._buffer)
        text = self._tick_prefix + str(tick).encode()
        buffer, _, shaped, _ = self._ticked_layout(len(text))
        buffer[_LABEL_AT : _LABEL_AT + len(text)] = text
        shaped[...] = value
        return bytes(buffer)

    def _untagged_at(self, payload: bytes) -> int | None:
        """Where the data of ``payload`` starts when it is laid out as this port's messages
        without a tick (the full layout or an empty one), else None."""
        enough = len(payload) >= self._full[1] + self._data_bytes
        if payload.startswith(self._full[0]) and enough:
            return self._full[1]
        if payload.startswith(self._bare[0]) and len(payload) >= self._bare[1] + self._data_bytes:
            return self._bare[1]
        pieces = self._full_pieces
        if enough and pieces and all(payload[a:b] == self._full[0][a:b] for a, b in pieces):
            return self._full[1]  # the full layout, other bytes in its padding
        return None

    def tick_of(self, payload: bytes) -> int | None:
        """The tick in the first label of ``payload`` (None: it carries none)."""
        if self._untagged_at(payload) is not None:
            return None
        found = self._ticked_data(payload)
        if found is not None:
            return found[1]
        try:
            dims = cdr.read(payload, self._fields).layout.dim
        except MessageError:
            return None
        return label_tick(dims[0].label) if len(dims) else None

    def _ticked_layout(self, length: int) -> tuple[bytearray, int, np.ndarray, tuple]:
        """The buffer of a message whose first label has ``length`` bytes (a tick's digits
        written as zeros), where its data starts, its data as an array of the port, and the
        byte ranges of its layout that are not padding."""
        entry = self._ticked.get(length)
        if entry is None:
            first = self._tick_prefix.decode() + "0" * (length - len(self._tick_prefix))
            dims = [cdr.Fields(label=a, size=b, stride=c) for a, b, c in self._codec.layout_dims]
            dims[0].label = first
            full = self._serialized(dims)
            at = len(full) - self._data_bytes
            buffer = bytearray(full)
            shaped = np.frombuffer(buffer, self._wire, self.size, at).reshape(self._codec.shape)
            labels = [dim.label for dim in dims]
            pieces = _pieces(labels, self._wire.itemsize, at) or ((0, at),)
            entry = self._ticked[length] = (buffer, at, shaped, pieces)
        return entry

    def _ticked_data(self, payload: bytes) -> tuple[np.ndarray, int] | None:
        """The data and the tick of a ``payload`` laid out as this codec writes a ticked
        message, padding aside (None: it is not)."""
        last = self._last
        if last is not None and last[0] is payload:
            return last[1], last[2]
        prefix = self._tick_prefix
        if prefix is None or payload[:8] != self._full[0][:8]:
            return None
        length = int.from_bytes(payload[8:_LABEL_AT], "little") - 1  # less its NUL
        digits = length - len(prefix)
        if not 0 < digits <= _MAX_DIGITS or not payload.startswith(prefix, _LABEL_AT):
            return None
        end = _LABEL_AT + length
        tick = payload[end - digits : end]
        if not tick.isdigit():
            return None
        buffer, at, _, pieces = self._ticked_layout(length)
        if len(payload) < at + self._data_bytes:
            return None
        for start, stop in pieces:  # the layout after the label's text
            start = max(start, end)
            if start < stop and payload[start:stop] != buffer[start:stop]:
                return None
        values = np.frombuffer(payload, self._wire, self.size, at)
        self._last = (payload, values, int(tick))
        return values, self._last[2]

    def from_bytes(self, payload: bytes, copy: bool = True) -> Any:
        """The port's array in ``payload``: a writable array of its own, or with ``copy``
        False a read-only view of the payload where no cast is needed (for a consumer that
        never writes into its inputs, such as ONNX Runtime, which copies them into its
        bound buffers).

        Raises:
            UnsupportedEncodingError: the payload is not plain CDR (read it the typed way).
            MessageError: as :meth:`PortCodec.from_message`, or malformed CDR.
        """
        at = self._untagged_at(payload)
        if at is not None:
            values = np.frombuffer(payload, self._wire, self.size, at)
        else:
            ticked = self._ticked_data(payload)
            values = self._parsed(payload) if ticked is None else ticked[0]
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


def _pieces(labels: list[str], itemsize: int, at: int) -> tuple[tuple[int, int], ...]:
    """The byte ranges of a serialized MultiArray with dims labelled ``labels``, up to its
    data at ``at``, that are not padding (a serializer may leave padding as it finds it);
    empty when the walk does not end at ``at`` (a layout this does not know)."""
    pieces, start, position = [], 0, 8  # the encapsulation header and the dim count

    def align(size: int) -> None:
        nonlocal start, position
        aligned = 4 + -(-(position - 4) // size) * size  # alignment counts from byte 4
        if aligned != position:
            pieces.append((start, position))
            start = position = aligned

    for label in labels:
        position += 4 + len(label.encode()) + 1  # its length, its bytes and a NUL
        align(4)
        position += 8  # size, stride
    position += 8  # data_offset, the element count
    align(max(itemsize, 1))
    pieces.append((start, position))
    return tuple(pieces) if position == at else ()
