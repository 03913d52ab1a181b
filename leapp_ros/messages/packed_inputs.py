"""The packed input of a node: every external MultiArray input of one instant in one message.

A node with two or more external MultiArray inputs (the seed's ``preprocess``: ``state`` and
``velocity``) also subscribes to ``<node>/packed_inputs`` (:class:`~leapp_ros.plan.pipeline.
PackedPlan`). One message there is one set: the node takes every packed port's value from it
at once, so the values of one instant are always used together, whatever the load, the
executor or the middleware do. The message is the ``std_msgs`` MultiArray of the ports'
common dtype (float64 when they differ and a float64 holds each exactly)::

    layout:
      dim:                      # one per packed port, in the node's input order
      - {label: "state@42", size: 6, stride: 6}    # the port's name; "@42": the tick
      - {label: "velocity", size: 3, stride: 3}
      data_offset: 0
    data: [s0, s1, s2, s3, s4, s5, v0, v1, v2]     # each port's elements, row-major, in turn

Each dimension is one port: its label is the port's name and its size the port's element count
(its stride the same, or 0). The optional tick after an ``@`` in the first label
(:mod:`leapp_ros.messages.tick_label`) names the instant; the node carries it on to every output
computed from the set. An empty layout takes the ports in this order (``ros2 topic pub ...
"{data: [...]}"``). A message whose labels, sizes or length are not these is dropped and
counted like any malformed input (``dropped``), naming what was expected.

:class:`PackedInput` reads such messages (typed, or as CDR bytes on the raw data path, with the
fast paths of :class:`~leapp_ros.messages.raw_multiarray.RawArrayCodec`) and writes them for a
client (:meth:`PackedInput.to_message`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from leapp_ros.messages.cdr import UnsupportedEncodingError
from leapp_ros.messages.multiarray import MessageError, PortCodec, codec, numpy_dtype
from leapp_ros.messages.raw_multiarray import RawArrayCodec
from leapp_ros.messages.tick_label import label_tick, tick_label
from leapp_ros.plan.pipeline import InputPlan, NodePlan

__all__ = ["PackedInput", "PackedLayout"]


class PackedLayout(PortCodec):
    """The packed message as one flat array of its dtype, its layout one dimension per port
    (what :class:`~leapp_ros.messages.raw_multiarray.RawArrayCodec` writes and recognizes)."""

    __slots__ = ("names",)

    def __init__(self, dtype: str, names: Sequence[str], sizes: Sequence[int]):
        super().__init__(dtype, (int(sum(sizes)),), ())
        self.names = tuple(names)
        self._labelled = tuple((name, size, size) for name, size in zip(names, sizes, strict=True))
        self._dims = [(size, size) for size in sizes]

    def array_from_message(self, message: Any) -> Any:
        dims = message.layout.dim
        if len(dims):
            self.check_layout(len(message.data), message.layout.data_offset, dims)
        return super().array_from_message(message)

    def check_layout(self, count: int, data_offset: int, dims: Sequence[Any]) -> None:
        """Raise MessageError unless ``dims`` are the packed ports (labels, sizes) or empty,
        and ``count`` elements at ``data_offset`` 0 are all of them."""
        expected = ", ".join(f"{name} ({size})" for name, size, _ in self._labelled)
        if data_offset != 0:
            raise MessageError(f"expected data_offset 0, got {data_offset}")
        if len(dims):
            labels = [dims[0].label.rsplit("@", 1)[0], *(dim.label for dim in dims[1:])]
            fits = len(dims) == len(self._labelled) and all(
                (label, dim.size) == (name, size) and dim.stride in (size, 0)
                for label, dim, (name, size, _) in zip(labels, dims, self._labelled, strict=False)
            )
            if not fits:
                raise MessageError(
                    f"expected one layout dim per packed port, labelled and sized {expected} "
                    f"(or an empty layout), got {[(dim.label, dim.size) for dim in dims]}"
                )
        if count != self.size:
            raise MessageError(
                f"expected {self.size} {self.dtype} element(s): {expected}; got {count}"
            )


class PackedInput:
    """The packed input of one node (see the module documentation), read as a subscription
    reads a topic (``indices``, ``read``, ``read_raw``, ``tick``: the interface of
    :class:`~leapp_ros.messages.topic_io.TopicReader`) and written for a client.

    Args:
        node: the node's plan; it must have a packed input (``node.packed``).
        copy: :meth:`read_raw` gives arrays of their own (False: read-only views of the
            payload where no cast is needed).
    """

    stamped = False  # no header: the tick says which instant
    ticked = True

    def __init__(self, node: NodePlan, copy: bool = True):
        packed = node.packed
        if packed is None:
            raise MessageError(f"node {node.name!r} has no packed input")
        self.indices = [node.inputs.index(node.input(port)) for port in packed.ports]
        ports: list[InputPlan] = [node.inputs[index] for index in self.indices]
        self.topic = self.resolved = packed.topic
        self.message_type = packed.message_type
        sizes = [codec(port).size for port in ports]
        self.layout = PackedLayout(packed.dtype, packed.ports, sizes)
        self.message_class = self.layout.message_class
        self._raw = RawArrayCodec(self.layout)
        self._copy = copy
        wire = self.layout.wire_dtype
        self._parts = []
        offset = 0
        for port, size in zip(ports, sizes, strict=True):
            port_codec = codec(port)
            cast = None if port_codec.wire_dtype == wire else port_codec.wire_dtype
            self._parts.append((offset, offset + size, port_codec, cast))
            offset += size

    def _split(self, flat: np.ndarray) -> list[Any]:
        values = []
        for start, end, port_codec, cast in self._parts:
            part = flat[start:end]
            if cast is not None:
                part = part.astype(cast)
            values.append(port_codec.port_value(part.reshape(port_codec.shape)))
        return values

    def read(self, message: Any) -> list[Any]:
        """One value per packed port (``indices``), from an rclpy message.

        Raises:
            MessageError: the message is not the packed layout (labels, sizes, length).
        """
        return self._split(self.layout.array_from_message(message))

    def read_raw(self, payload: bytes) -> list[Any]:
        """:meth:`read` for the serialized message ``payload``."""
        try:
            flat = self._raw.from_bytes(payload, self._copy)
        except UnsupportedEncodingError:  # XCDR2 or another encoding: rclpy reads it
            from rclpy.serialization import deserialize_message

            return self.read(deserialize_message(payload, self.message_class))
        return self._split(flat)

    def tick(self, message: Any) -> int | None:
        """The tick of a packed message or its CDR bytes (None: it carries none)."""
        if isinstance(message, bytes):
            return self._raw.tick_of(message)
        dims = message.layout.dim
        return label_tick(dims[0].label) if len(dims) else None

    def stamp_ns(self, message: Any) -> None:
        return None

    def to_message(self, values: Sequence[Any], tick: int | None = None) -> Any:
        """The packed message of ``values`` (one array or tensor per packed port, in order),
        carrying ``tick`` when given: what a client publishes for one instant.

        Raises:
            MessageError: a value that does not fit its port.
        """
        if len(values) != len(self._parts):
            raise MessageError(
                f"expected {len(self._parts)} values ({', '.join(self.layout.names)}), "
                f"got {len(values)}"
            )
        flat = np.empty(self.layout.size, numpy_dtype(self.layout.dtype))
        for value, (start, end, port_codec, _) in zip(values, self._parts, strict=True):
            wire = np.frombuffer(port_codec.to_message(value).data, port_codec.wire_dtype)
            flat[start:end] = wire
        message = self.layout.to_message(flat)
        if tick is not None:
            message.layout.dim[0].label = tick_label(self.layout.names[0], tick)
        return message
