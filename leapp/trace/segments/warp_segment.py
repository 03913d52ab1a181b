"""One Warp segment as recorded, and its replays on fresh arrays.

A :class:`SegmentRecord` is what :mod:`leapp.trace.segments.warp_region` writes down while a node's
Warp calls run eagerly: the arrays they work on (:class:`Buffer`: Warp dtype and shape, how torch
sees them, and the contents of those that are constants) and the calls in order (:class:`Launch`,
:class:`Copy`, :class:`Fill`), with array arguments as buffer indices. Some buffers are the
segment's inputs (arrays made from traced tensors, or written by an earlier segment), some its
outputs (arrays the node reads afterwards).

A :class:`Replay` allocates fresh arrays for a record and runs its calls on them: called with
input tensors it computes the outputs (the trace-time meaning of the segment's operator, used
when a graph with Warp segments is functionalized or run), and :meth:`Replay.capture` records
the same calls with Warp's APIC capture and saves them (the exporter's job). Each run first
restores the constant buffers the segment writes to, so every run starts as the traced one
did (a ``wp.zeros`` accumulator is zero again).

Warp is imported only when a replay is made.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from leapp.trace.segments.warp_op import OutputSpec

__all__ = [
    "Buffer",
    "Copy",
    "Fill",
    "Launch",
    "Ref",
    "Replay",
    "SegmentRecord",
    "replaying",
]

_state = threading.local()


@dataclass(frozen=True)
class Buffer:
    """One array a segment works on: its Warp type and shape, and how torch sees it.

    ``constant`` holds the contents for an array that is no input of the segment (a gain table,
    a ``wp.zeros`` scratch array): taken when the segment first used it.
    """

    dtype: Any
    shape: tuple[int, ...]
    tensor_shape: tuple[int, ...]
    tensor_dtype: torch.dtype
    constant: np.ndarray | None = None


@dataclass(frozen=True)
class Ref:
    """A launch argument that is buffer ``index``."""

    index: int


@dataclass(frozen=True)
class Launch:
    kernel: Any
    dim: Any
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...]
    options: Mapping[str, Any]
    location: str


@dataclass(frozen=True)
class Copy:
    dest: int
    src: int
    dest_offset: int = 0
    src_offset: int = 0
    count: int = 0


@dataclass(frozen=True)
class Fill:
    """``array.zero_()`` (``value`` None) or ``array.fill_(value)``."""

    target: int
    value: Any = None


@dataclass
class SegmentRecord:
    """The Warp calls of one segment of one node run, in order."""

    key: str
    node: str
    location: str
    device: str
    buffers: list[Buffer] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    written: set[int] = field(default_factory=set)
    calls: list[Launch | Copy | Fill] = field(default_factory=list)

    def output_specs(self) -> list[OutputSpec]:
        return [
            OutputSpec(self.buffers[i].tensor_shape, self.buffers[i].tensor_dtype, self.device)
            for i in self.outputs
        ]

    def modules(self) -> list[Any]:
        """The Warp modules of the kernels launched, in first-launch order."""
        found: dict[int, Any] = {}
        for call in self.calls:
            if isinstance(call, Launch):
                found.setdefault(id(call.kernel.module), call.kernel.module)
        return list(found.values())


def replaying() -> bool:
    """Whether the calling thread is inside a replay (leapp's Warp patches stand aside)."""
    return getattr(_state, "depth", 0) > 0


@contextlib.contextmanager
def _replay_scope() -> Iterator[None]:
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1


class Replay:
    """Fresh arrays for ``record`` on ``device`` (the record's own by default), and its calls."""

    def __init__(self, record: SegmentRecord, device: str | None = None):
        import warp as wp

        self.record = record
        self.device = device or record.device
        self._wp = wp
        self.arrays: list[Any] = []
        self._pristine: dict[int, Any] = {}
        with _replay_scope():
            for index, buffer in enumerate(record.buffers):
                if buffer.constant is None:
                    array = wp.zeros(buffer.shape, dtype=buffer.dtype, device=self.device)
                else:
                    array = wp.array(buffer.constant, dtype=buffer.dtype, device=self.device)
                    if index in record.written:
                        self._pristine[index] = (
                            None if not buffer.constant.any() else wp.clone(array)
                        )
                self.arrays.append(array)

    def run_calls(self) -> None:
        """Restore the written constants, then run the recorded calls in order."""
        wp, arrays = self._wp, self.arrays
        with _replay_scope():
            for index, pristine in self._pristine.items():
                if pristine is None:
                    arrays[index].zero_()
                else:
                    wp.copy(arrays[index], pristine)
            for call in self.record.calls:
                if isinstance(call, Launch):
                    wp.launch(
                        call.kernel,
                        call.dim,
                        inputs=[self._argument(a) for a in call.inputs],
                        outputs=[self._argument(a) for a in call.outputs],
                        device=self.device,
                        **call.options,
                    )
                elif isinstance(call, Copy):
                    wp.copy(
                        arrays[call.dest],
                        arrays[call.src],
                        dest_offset=call.dest_offset,
                        src_offset=call.src_offset,
                        count=call.count,
                    )
                elif call.value is None:
                    arrays[call.target].zero_()
                else:
                    arrays[call.target].fill_(call.value)

    def tensors(self, indices: Sequence[int]) -> list[torch.Tensor]:
        """Torch views (same memory) of the buffers ``indices``, shaped as torch saw them."""
        views = []
        with _replay_scope():
            for index in indices:
                buffer = self.record.buffers[index]
                tensor = self._wp.to_torch(self.arrays[index], requires_grad=False)
                views.append(tensor.view(buffer.tensor_dtype).reshape(buffer.tensor_shape))
        return views

    def __call__(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The segment's outputs for ``inputs`` (one tensor per input buffer, in order)."""
        for view, value in zip(self.tensors(self.record.inputs), inputs, strict=True):
            view.copy_(value)
        self.run_calls()
        if self.device != "cpu":
            self._wp.synchronize_device(self.device)
        return [view.clone() for view in self.tensors(self.record.outputs)]

    def capture(self, path: str) -> None:
        """Record the calls with APIC on this replay's device and save ``<path>.wrp`` and
        ``<path>_modules/`` (inputs named ``in<i>``, outputs ``out<i>``)."""
        wp = self._wp
        with _replay_scope():
            for module in self.record.modules():
                wp.load_module(module, device=self.device)
            wp.capture_begin(device=self.device, apic=True)
            try:
                self.run_calls()
            finally:
                graph = wp.capture_end(device=self.device)
            wp.capture_save(
                graph,
                path,
                inputs={f"in{i}": self.arrays[b] for i, b in enumerate(self.record.inputs)},
                outputs={f"out{i}": self.arrays[b] for i, b in enumerate(self.record.outputs)},
            )

    def _argument(self, value: Any) -> Any:
        return self.arrays[value.index] if isinstance(value, Ref) else value
