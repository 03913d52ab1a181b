"""A node's topics as readers and writers of NumPy arrays: one :class:`TopicReader` per
subscription, one :class:`OutputWriter` per publisher, and the non-finite check.

A reader decodes each message once into the values of every input port its topic feeds: the
dtype's ``std_msgs`` MultiArray (:class:`~leapp_ros.messages.multiarray.PortCodec`), or a
standard robot message (:class:`~leapp_ros.messages.robot_codecs.InputDecoder`: a JointState
feeding position and
velocity ports is one subscription and one decode). A writer turns one output array into its
message: the MultiArray (refilling one message per output), or the bound robot message
(:class:`~leapp_ros.messages.robot_codecs.OutputEncoder`).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import isfinite
from typing import Any

import numpy as np

from leapp_ros.messages.multiarray import PortCodec, codec
from leapp_ros.messages.robot_codecs import InputDecoder, OutputEncoder
from leapp_ros.plan.pipeline import InputPlan, OutputPlan

__all__ = ["OutputWriter", "TopicReader", "float_ports", "nonfinite", "topic_readers"]

_add = np.add.reduce
_SUMMED = 4096  # elements up to which nonfinite sums first (larger: isfinite is faster)


class TopicReader:
    """The values one topic carries for the input ports ``indices`` of a node.

    Args:
        ports: the input plans of the whole node.
        indices: the ports (positions in ``ports``) fed by this topic.
    """

    def __init__(self, ports: Sequence[InputPlan], indices: Sequence[int]):
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
                first.message_type, [(p.binding, p.dtype, p.shape) for p in bound]
            )
            self.message_class = self._decoder.message_class
        else:
            self._codec = codec(first)
            self.message_class = self._codec.message_class

    def read(self, message: Any) -> list[Any]:
        """One value per port of ``indices``, in that order.

        Raises:
            MessageError: the message does not fit (length, layout, joint names).
        """
        if self._decoder is not None:
            return self._decoder.decode(message)
        value = self._codec.array_from_message(message)  # type: ignore[union-attr]
        return [value] * len(self.indices)


def topic_readers(ports: Sequence[InputPlan]) -> list[TopicReader]:
    """One reader per subscribed topic of a node's inputs (ports sharing a topic share it)."""
    topics: dict[str, list[int]] = {}
    for index, port in enumerate(ports):
        if port.topic is not None:
            topics.setdefault(port.topic, []).append(index)
    return [TopicReader(ports, indices) for indices in topics.values()]


class OutputWriter:
    """Messages of one output port; ``stamp()`` gives the time for stamped messages."""

    def __init__(self, port: OutputPlan):
        self.port = port
        if port.binding is not None:
            self._encoder: OutputEncoder | None = OutputEncoder(
                port.binding, port.dtype, port.shape, port.labels
            )
            self.message_class = self._encoder.message_class
            self._message = None
            self.stamped = hasattr(self.message_class(), "header")
        else:
            self._encoder = None
            self._codec = codec(port)
            self.message_class = self._codec.message_class
            self._message = self._codec.new_message()
            self.stamped = False  # whether write() wants a stamp (a message with a header)

    def write(self, value: Any, stamp: Any = None) -> Any:
        """The message for ``value`` (reused between calls for MultiArrays: publish at once)."""
        if self._encoder is not None:
            return self._encoder.encode(value, stamp)
        return self._codec.to_message(value, self._message)


def float_ports(ports: Sequence[Any]) -> tuple[int, ...]:
    """The positions of the ports whose values can be NaN or infinite (floating dtypes)."""
    return tuple(i for i, port in enumerate(ports) if port.dtype.startswith(("float", "bfloat")))


def nonfinite(values: Sequence[Any], positions: Sequence[int]) -> list[int]:
    """The ``positions`` whose value holds a NaN or an infinity.

    A small array is summed first: a finite sum means every element is finite (a NaN or an
    infinity makes the sum NaN or infinite), one reduction instead of ``isfinite`` and ``all``;
    only a sum that is not finite (a NaN or infinity, or finite values overflowing) is checked
    element by element.
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
        if value.size <= _SUMMED and isfinite(_add(value, axis=None)):
            continue
        if not np.isfinite(value).all():
            bad.append(position)
    return bad
