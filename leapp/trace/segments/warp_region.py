"""Warp calls inside a node become Warp segments: one operator call each in the node's graph.

While a session records, :mod:`leapp.trace.segments.warp_calls` hands every Warp call that touches
a node's values to the :class:`WarpTracker` of the session. The tracker knows which Warp arrays
hold traced values (made by ``wp.from_torch`` / ``wp.from_numpy`` from traced values, or used by a
segment) and groups each maximal run of Warp calls of one node, on one device, with no torch
operation in between, into one segment:

- the segment is one ``torch.ops.leapp.warp_segment(key, [inputs])`` node in the node's graph
  (:mod:`leapp.trace.segments.warp_op`), placed where its first Warp call ran; its inputs are the
  graph values of the arrays it reads that hold traced values; every other array it reads is a
  constant (its contents when the segment first used it);
- its outputs are the arrays the node uses afterwards: ``wp.to_torch`` results, arrays a later
  segment reads (a ``getitem`` node each, added when first asked for);
- a Warp write into the memory of a traced tensor (``wp.from_torch`` shares it) is recorded
  as ``tensor.copy_(<segment output>)``, so torch code after it sees the written values;
- the calls themselves go into the segment's
  :class:`~leapp.trace.segments.warp_segment.SegmentRecord`, which the exporter captures with APIC.

A segment closes (is *sealed*) when the node's graph grows by anything else (a torch
operation), when a call runs on another device, or at the end of an ``annotate.warp_op`` block;
the next Warp call opens a new one. Everything runs eagerly as well: tracing changes no value.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import threading
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch.fx as fx

from leapp.trace.location import user_location
from leapp.trace.segments import warp_op
from leapp.trace.segments.warp_segment import Buffer, Replay, SegmentRecord, replaying
from leapp.trace.tensors.node_trace import CONSTANT_HOOKS
from leapp.trace.tensors.recorder import Refusals, owning_trace

if TYPE_CHECKING:
    from leapp.trace.tensors.node_trace import NodeTrace
    from leapp.trace.tensors.tensor import TracedTensor

logger = logging.getLogger(__name__)

__all__ = [
    "ArrayState",
    "Segment",
    "WarpTracker",
    "aliased_value",
    "recording",
    "start_tracking",
    "stop_tracking",
    "tracking",
    "unchecked",
]

_tracker: WarpTracker | None = None
_inside = threading.local()  # leapp itself calling Warp: nothing is recorded or checked


def start_tracking() -> WarpTracker:
    """A fresh tracker for a new session."""
    global _tracker
    _tracker = WarpTracker()
    return _tracker


def stop_tracking() -> None:
    global _tracker
    _tracker = None


def tracking() -> WarpTracker | None:
    """The session's tracker (None when no session records)."""
    return _tracker


def aliased_value(trace: NodeTrace, tensor: Any) -> fx.Node | None:
    """The graph value of a Warp array a segment of ``trace`` wrote, when ``tensor`` is a plain
    torch view of it (``wp.to_torch`` called before the session, the tick or the launch):
    what the node's graph uses instead of freezing the tensor as a constant."""
    if _tracker is None or not _tracker.written:
        return None
    return _tracker.aliased(trace, tensor)


def recording() -> WarpTracker | None:
    """The tracker, when a Warp call made now is to be recorded (a session records, and the
    call comes from user code, not from leapp or a replay)."""
    if _tracker is None or replaying() or getattr(_inside, "depth", 0):
        return None
    return _tracker


@contextlib.contextmanager
def unchecked() -> Iterator[None]:
    """Warp calls leapp makes itself: not recorded, not checked."""
    _inside.depth = getattr(_inside, "depth", 0) + 1
    try:
        yield
    finally:
        _inside.depth -= 1


class ArrayState:
    """What leapp knows about one Warp array of a recording.

    ``trace`` is the node run whose values it holds (None for an array no segment used yet);
    ``alias`` the traced tensor whose memory it shares (``wp.from_torch``); ``source`` the graph
    value it was copied from (``wp.from_numpy``); ``writer`` the segment that wrote it last.
    """

    __slots__ = ("alias", "array", "source", "trace", "writer")

    def __init__(self, array: Any, trace: NodeTrace | None, alias=None, source=None):
        self.array = array  # kept alive, so that its id() stays unique
        self.trace = trace
        self.alias: TracedTensor | None = alias
        self.source: fx.Node | None = source
        self.writer: Segment | None = None

    def value(self) -> fx.Node | None:
        """The graph value this array holds now, or None for a constant."""
        if self.alias is not None:
            return self.alias._leapp_node  # Warp writes were copied into it
        if self.writer is not None:
            return self.writer.output(self)
        return self.source


class Segment:
    """One segment of one node run: its graph node and its record."""

    def __init__(self, trace: NodeTrace, device: str, location: str):
        key = f"w{uuid.uuid4().hex}"
        self.trace = trace
        self.record = SegmentRecord(key=key, node=trace.node, location=location, device=device)
        self.node = trace.graph.call_function(warp_op.packet(), (key, []))
        self.node.meta["leapp_location"] = location
        self.last = self.node  # the last graph node of the segment (outputs go after it)
        self.sealed = False
        self.local: dict[int, int] = {}  # id(ArrayState) -> buffer index
        self.outputs: dict[int, fx.Node] = {}  # buffer index -> getitem node
        self.copied_back: set[int] = set()
        warp_op.register(
            key,
            warp_op.SegmentEntry(
                outputs=self.record.output_specs, run=_LazyReplay(self.record), source=self.record
            ),
        )

    def is_tail(self) -> bool:
        """Whether nothing was added to the node's graph since this segment's last call."""
        return self.last is next(iter(reversed(self.trace.graph.nodes)))

    def use(self, state: ArrayState, tensor_view: Any, snapshot: Any) -> int:
        """The buffer index of ``state`` in this segment (added on first use: an input when it
        holds a traced value, else a constant with the contents ``snapshot()`` returns)."""
        key = id(state)
        if key in self.local:
            return self.local[key]
        value = state.value()
        array = state.array
        tensor = tensor_view(array)
        self.record.buffers.append(
            Buffer(
                dtype=array.dtype,
                shape=tuple(array.shape),
                tensor_shape=tuple(tensor.shape),
                tensor_dtype=tensor.dtype,
                constant=None if value is not None else snapshot(array),
            )
        )
        index = len(self.record.buffers) - 1
        if value is not None:
            self.record.inputs.append(index)
            key_arg, inputs = self.node.args
            self.node.args = (key_arg, [*inputs, value])
        self.local[key] = index
        return index

    def output(self, state: ArrayState) -> fx.Node:
        """The getitem node of this segment's output holding ``state``'s final value."""
        index = self.local[id(state)]
        node = self.outputs.get(index)
        if node is None:
            position = len(self.record.outputs)
            self.record.outputs.append(index)
            graph = self.trace.graph
            with graph.inserting_after(self.last):
                node = graph.call_function(operator.getitem, (self.node, position))
            buffer = self.record.buffers[index]
            node.meta["example_value"] = (buffer.tensor_shape, buffer.tensor_dtype)
            node.meta["leapp_location"] = self.record.location
            self.outputs[index] = node
            self.last = node
        return node

    def wrote(self, state: ArrayState) -> None:
        """A call of this segment wrote ``state``'s array."""
        index = self.local[id(state)]
        self.record.written.add(index)
        state.writer = self
        state.trace = self.trace  # holds this node's values from now on
        if state.alias is None or index in self.copied_back:
            return
        # The memory is a traced tensor's: torch code after the segment sees the new values.
        self.copied_back.add(index)
        result = self.output(state)
        graph = self.trace.graph
        with graph.inserting_after(self.last):
            copy = graph.call_method("copy_", (state.alias._leapp_node, result))
        copy.meta["leapp_location"] = self.record.location
        self.last = copy
        self.trace.mutates = True


class WarpTracker:
    """The Warp arrays and segments of one recording."""

    def __init__(self) -> None:
        self.states: dict[int, ArrayState] = {}
        self.current: dict[int, Segment] = {}  # id(trace) -> its newest segment
        self.explicit: list[NodeTrace] = []  # annotate.warp_op blocks, innermost last
        self.written: dict[tuple[int, int], ArrayState] = {}  # (id(trace), data address)

    def wrote(self, segment: Segment, state: ArrayState) -> None:
        """A call of ``segment`` wrote ``state``'s array."""
        segment.wrote(state)
        if state.array.ptr:
            self.written[(id(segment.trace), state.array.ptr)] = state

    def aliased(self, trace: NodeTrace, tensor: Any) -> fx.Node | None:
        try:
            state = self.written.get((id(trace), tensor.data_ptr()))
        except RuntimeError:  # a tensor without data (meta, sparse)
            return None
        writer = state.writer if state is not None else None
        if writer is None or writer.trace is not trace or state.alias is not None:
            return None
        buffer = writer.record.buffers[writer.local[id(state)]]
        if tuple(tensor.shape) != buffer.tensor_shape or tensor.dtype != buffer.tensor_dtype:
            return None
        return state.value()

    def forget_earlier_runs(self, states: list[ArrayState]) -> None:
        """Arrays a closed run of a node holds, used again while a later run of the same node is
        open (buffers allocated once, reused every tick), are plain arrays again: each run
        records them afresh (a constant: their contents when the run first uses them)."""
        for state in states:
            trace = state.trace
            if trace is None or not trace.closed or not trace.recording.active:
                continue
            if trace.recording.open.get(trace.node) is not None:
                state.trace, state.writer, state.alias, state.source = None, None, None, None

    def state(self, array: Any) -> ArrayState | None:
        return self.states.get(id(array))

    def add(self, array: Any, trace: NodeTrace | None, alias=None, source=None) -> ArrayState:
        state = ArrayState(array, trace, alias, source)
        self.states[id(array)] = state
        return state

    def state_for(self, array: Any) -> ArrayState:
        return self.states.get(id(array)) or self.add(array, None)

    def owner(self, what: str, states: list[ArrayState]) -> NodeTrace | None:
        """The open node run the arrays of a call belong to; None when no node records it.

        Arrays of two open node runs, or of a closed node inside another, cannot be in one
        call: values cross nodes only as published outputs.
        """
        self.forget_earlier_runs(states)
        traces = {id(s.trace): s.trace for s in states if s.trace is not None}
        explicit = self.explicit[-1] if self.explicit else None
        return owning_trace(what, list(traces.values()), _ARRAYS_OF_TWO_NODES, also_open=explicit)

    def segment(self, trace: NodeTrace, device: str) -> Segment:
        """The open segment of ``trace`` a call on ``device`` joins (a new one if needed)."""
        current = self.current.get(id(trace))
        if current is not None and not current.sealed:
            if current.is_tail() and current.record.device == device:
                return current
            current.sealed = True
        segment = Segment(trace, device, user_location())
        self.current[id(trace)] = segment
        logger.debug(
            "node %r: Warp segment %s opened at %s",
            trace.node,
            segment.record.key,
            segment.record.location,
        )
        return segment

    def seal(self, trace: NodeTrace) -> None:
        """End ``trace``'s open segment: the next Warp call starts a new one."""
        current = self.current.get(id(trace))
        if current is not None:
            current.sealed = True


_ARRAYS_OF_TWO_NODES = Refusals(
    two_open=(
        "{what} at {where} uses Warp arrays of the nodes {a!r} and {b!r} in one call. Arrays "
        "cross nodes only as published outputs: convert the array of {a!r} with wp.to_torch, "
        "publish it with annotate.output_tensors({a!r}, ...), pass it to "
        "annotate.input_tensors({b!r}, ...) and call wp.from_torch on the result."
    ),
    closed_inside=(
        "{what} at {where} uses a Warp array of node {a!r} (already closed) inside node {b!r}. "
        "Pass its value through annotate.input_tensors({b!r}, {{...}}) (as a tensor: "
        "wp.to_torch) and call wp.from_torch on the traced result, so the edge is recorded; a "
        "scratch array both nodes write ties them together: give each node arrays of its own."
    ),
)


class _LazyReplay:
    """The trace-time meaning of a segment's operator: its record replayed (made on first
    call, so that tracing allocates nothing for segments nobody runs)."""

    def __init__(self, record: SegmentRecord):
        self.record = record
        self._replay: Replay | None = None
        self._buffers = 0

    def __call__(self, inputs: list[Any]) -> list[Any]:
        if self._replay is None or self._buffers != len(self.record.buffers):
            self._replay = Replay(self.record)
            self._buffers = len(self.record.buffers)
        return self._replay(inputs)


# A node asks this module before it freezes a plain tensor as a constant.
CONSTANT_HOOKS.written_value = aliased_value
