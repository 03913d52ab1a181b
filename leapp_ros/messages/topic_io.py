"""A node's topics as readers and writers of NumPy arrays: one :class:`TopicReader` per
subscription, one :class:`OutputWriter` per publisher, and the non-finite check.

A reader decodes each message once into the values of every input port its topic feeds: the
dtype's ``std_msgs`` MultiArray (:class:`~leapp_ros.messages.multiarray.PortCodec`), or a
standard robot message (:class:`~leapp_ros.messages.robot_codecs.InputDecoder`: a JointState
feeding position and
velocity ports is one subscription and one decode). A writer turns one output array into its
message: the MultiArray (refilling one message per output), or the bound robot message
(:class:`~leapp_ros.messages.robot_codecs.OutputEncoder`). A MultiArray's tick (the instant its
values belong to, :mod:`leapp_ros.messages.tick_label`) is read with :meth:`TopicReader.tick`
and written by ``OutputWriter.write(value, stamp, tick)``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from math import isfinite
from typing import Any, NamedTuple

import numpy as np

from leapp_ros.messages import cdr
from leapp_ros.messages.multiarray import PortCodec, codec
from leapp_ros.messages.raw_multiarray import RawArrayCodec
from leapp_ros.messages.robot_codecs import InputDecoder, OutputEncoder
from leapp_ros.messages.tick_label import label_tick, tick_label
from leapp_ros.plan.pipeline import InputPlan, OutputPlan

__all__ = [
    "RAW_RMWS",
    "OutputWriter",
    "TopicReader",
    "WallStamp",
    "float_ports",
    "nonfinite",
    "now_stamp",
    "raw_path",
    "stamp_ns",
    "topic_readers",
]

#: rmw implementations that take and publish serialized messages as plain CDR
RAW_RMWS = frozenset(
    {
        "rmw_fastrtps_cpp",
        "rmw_fastrtps_dynamic_cpp",
        "rmw_cyclonedds_cpp",
        "rmw_connextdds",
        "rmw_zenoh_cpp",
    }
)

_add = np.add.reduce
_SUMMED = 4096  # elements up to which nonfinite sums first (larger: min and max are faster)
_LISTED = 64  # elements up to which the sum is Python's, of the values as floats


class TopicReader:
    """The values one topic carries for the input ports ``indices`` of a node.

    :meth:`read` takes rclpy messages, :meth:`read_raw` their CDR bytes (a ``raw=True``
    subscription): a MultiArray is viewed in place (:mod:`leapp_ros.messages.raw_multiarray`),
    a robot message read into :class:`~leapp_ros.messages.cdr.Fields` and decoded as a typed
    one would be; a payload that is not plain CDR is deserialized the typed way.

    Args:
        ports: the input plans of the whole node.
        indices: the ports (positions in ``ports``) fed by this topic.
        copy: :meth:`read_raw` gives arrays of their own (False: read-only views of the
            payload where possible, for consumers that never write into their inputs).
    """

    def __init__(self, ports: Sequence[InputPlan], indices: Sequence[int], copy: bool = True):
        self.indices = list(indices)
        first = ports[self.indices[0]]
        self.topic = first.topic
        self.resolved = first.topic  # the node sets the full name once it subscribed
        self.message_type = first.message_type
        bound = [ports[i] for i in self.indices if ports[i].binding is not None]
        self._decoder: InputDecoder | None = None
        self._codec: PortCodec | None = None
        if bound:
            self._decoder = InputDecoder(
                first.message_type, [(p.binding, p.dtype, p.shape) for p in bound], copy
            )
            self.message_class = self._decoder.message_class
        else:
            self._codec = codec(first)
            self.message_class = self._codec.message_class
            self._raw = RawArrayCodec(self._codec)
        self._fields = cdr.layout(self.message_class)
        self._copy = copy
        self.stamped = self._fields[0][0] == "header" and self._fields[0][1] == "message"

    def read_raw(self, payload: bytes) -> list[Any]:
        """:meth:`read` for the serialized message ``payload``."""
        try:
            if self._decoder is not None:
                return self._decoder.decode(cdr.read(payload, self._fields))
            value = self._raw.from_bytes(payload, self._copy)
        except cdr.UnsupportedEncodingError:  # XCDR2 or another encoding: rclpy reads it
            from rclpy.serialization import deserialize_message

            return self.read(deserialize_message(payload, self.message_class))
        return [value] * len(self.indices)

    def stamp_ns(self, message: Any) -> int | None:
        """The header stamp of a message or its CDR bytes (None: the message has none)."""
        return stamp_ns(message) if self.stamped else None

    @property
    def ticked(self) -> bool:
        """Whether this topic's messages can carry a tick (MultiArrays with axes)."""
        return self._codec is not None and bool(self._codec.shape)

    def tick(self, message: Any) -> int | None:
        """The tick of a MultiArray message or its CDR bytes (None: it carries none)."""
        if isinstance(message, bytes):
            return self._raw.tick_of(message)
        dims = message.layout.dim
        return label_tick(dims[0].label) if len(dims) else None

    def read(self, message: Any) -> list[Any]:
        """One value per port of ``indices``, in that order.

        Raises:
            MessageError: the message does not fit (length, layout, joint names).
        """
        if self._decoder is not None:
            return self._decoder.decode(message)
        value = self._codec.array_from_message(message)  # type: ignore[union-attr]
        return [value] * len(self.indices)


def stamp_ns(message: Any) -> int | None:
    """``message.header.stamp`` in nanoseconds, of an rclpy message or its CDR bytes (None
    for a message without a header, as far as the message can tell)."""
    if isinstance(message, bytes):
        return cdr.header_stamp_ns(message)
    header = getattr(message, "header", None)
    if header is None:
        return None
    try:
        return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)
    except (AttributeError, TypeError, ValueError):
        return None


def topic_readers(ports: Sequence[InputPlan], copy: bool = True) -> list[TopicReader]:
    """One reader per subscribed topic of a node's inputs (ports sharing a topic share it)."""
    topics: dict[str, list[int]] = {}
    for index, port in enumerate(ports):
        if port.topic is not None:
            topics.setdefault(port.topic, []).append(index)
    return [TopicReader(ports, indices, copy) for indices in topics.values()]


class OutputWriter:
    """Messages of one output port: ``write(value, stamp, tick)`` gives what to publish, an
    rclpy message, or with ``raw`` its CDR bytes (``stamped``: whether it wants a stamp, for a
    message with a header; ``tick``: the instant of a MultiArray's values, None for none)."""

    def __init__(self, port: OutputPlan, raw: bool = False):
        self.port = port
        self.raw = raw
        if port.binding is not None:
            self._encoder: OutputEncoder | None = OutputEncoder(
                port.binding, port.dtype, port.shape, port.labels
            )
            self.message_class = self._encoder.message_class
            self._message = None
            self.stamped = hasattr(self.message_class(), "header")
            self._encode = self._encoder.encode_raw if raw else self._encoder.encode
            self.write = self._write_encoded
        else:
            self._encoder = None
            self._codec = codec(port)
            self.message_class = self._codec.message_class
            self._message = self._codec.new_message()
            self.stamped = False
            self._raw = RawArrayCodec(self._codec)
            self.write = self._write_raw if raw else self._write_typed
            dims = self._codec.layout_dims
            self._first_label = dims[0][0] if dims else None
            self._ticked = False  # the reused message's first label carries a tick

    def _write_encoded(self, value: Any, stamp: Any = None, tick: int | None = None) -> Any:
        return self._encode(value, stamp)  # a robot message: its header stamp says when

    def _write_typed(self, value: Any, stamp: Any = None, tick: int | None = None) -> Any:
        message = self._codec.to_message(value, self._message)  # reused: publish at once
        if self._first_label is not None and (tick is not None or self._ticked):
            message.layout.dim[0].label = tick_label(self._first_label, tick)
            self._ticked = tick is not None
        return message

    def _write_raw(self, value: Any, stamp: Any = None, tick: int | None = None) -> bytes:
        return self._raw.to_bytes(value, tick)


def float_ports(ports: Sequence[Any]) -> tuple[int, ...]:
    """The positions of the ports whose values can be NaN or infinite (floating dtypes)."""
    return tuple(i for i, port in enumerate(ports) if port.dtype.startswith(("float", "bfloat")))


def nonfinite(values: Sequence[Any], positions: Sequence[int]) -> list[int]:
    """The ``positions`` whose value holds a NaN or an infinity.

    A small array is summed first: a finite sum means every element is finite (a NaN or an
    infinity makes the sum NaN or infinite), one reduction instead of ``isfinite`` and ``all``;
    only a sum that is not finite (a NaN or infinity, or finite values overflowing) is checked
    element by element. Up to ``_LISTED`` elements Python sums them (as floats, from
    ``tolist``): about a third of what NumPy's reduction costs, in a loop and, more so, in a
    node's tick after the CPU idled (the reduction's code is cold then). A larger array (a
    camera frame) is checked by its minimum and maximum (NaN propagates to both, an infinity
    is one of them): two vectorized passes that write nothing, where ``isfinite`` writes a
    boolean array as large as a frame's pixels and ``all`` reads it again.
    """
    bad = []
    for position in positions:
        value = values[position]
        if value is None:
            continue
        if not isinstance(value, np.ndarray):  # a torch tensor
            try:
                value = value.numpy()  # a view; NumPy checks a small array ~3x faster
            except (RuntimeError, TypeError):  # bfloat16, on a GPU, or requiring grad
                if not bool(value.isfinite().all()):
                    bad.append(position)
                continue
        size = value.size
        if size <= _LISTED:
            if isfinite(sum(value.tolist() if value.ndim == 1 else value.reshape(-1).tolist())):
                continue
        elif size <= _SUMMED:
            if isfinite(_add(value, axis=None)):
                continue
        elif isfinite(value.min()) and isfinite(value.max()):
            continue  # a NaN makes both NaN, an infinity is one of them
        if not np.isfinite(value).all():
            bad.append(position)
    return bad


class WallStamp(NamedTuple):
    """A header stamp for the raw writers (they read ``sec`` and ``nanosec`` only)."""

    sec: int
    nanosec: int


def now_stamp(clock: Any, raw: bool) -> Any:
    """The header stamp of a message published now by a node whose ROS clock is ``clock``.

    With ROS time inactive (no ``use_sim_time``), a ROS clock reads the system clock, as
    ``time.time_ns`` does: for the raw writers that is a :class:`WallStamp`, a quarter of the
    cost of ``clock.now().to_msg()``. With simulated time active, or for rclpy messages, the
    clock's own ``builtin_interfaces/Time``.
    """
    if raw and not clock.ros_time_is_active:
        ns = time.time_ns()
        return WallStamp(ns // 1_000_000_000, ns % 1_000_000_000)
    return clock.now().to_msg()


def raw_path(requested: bool, logger: Any) -> bool:
    """Whether a node's data topics go as CDR bytes: ``requested`` (parameter
    ``raw_messages``) and the rmw in use is one of :data:`RAW_RMWS`; otherwise, when
    requested, one line on ``logger`` says why rclpy's messages are used."""
    if not requested:
        return False
    from rclpy.utilities import get_rmw_implementation_identifier

    rmw = get_rmw_implementation_identifier()
    if rmw in RAW_RMWS:
        return True
    logger.info(
        f"rmw {rmw} is not known to hand out serialized messages; the data topics use rclpy "
        f"messages (raw CDR needs one of {', '.join(sorted(RAW_RMWS))})"
    )
    return False
