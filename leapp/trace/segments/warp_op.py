"""The torch operator that stands for one Warp segment in a node's graph.

A run of Warp calls inside a node is one call of ``torch.ops.leapp.warp_segment(key, inputs)``
in the node's ``torch.fx`` graph, between the torch operations around it::

    %warp_segment = call_function[target=leapp.warp_segment](args = (w1f0..., [%state]))
    %getitem = call_function[target=operator.getitem](args = (%warp_segment, 0))

``key`` names the segment; ``inputs`` are the tensors the segment reads; it returns one tensor
per value the node uses afterwards (``wp.to_torch`` results, arrays a later segment reads). The
operator is an ordinary ``torch.library`` operator, so TorchScript (``torch.jit``) and
``torch.export`` (pt2) store the call by name and call it again when the artifact runs.

What a call computes is looked up by key in a process-wide table (:func:`register`): while tracing,
the recorded Warp calls replayed on fresh arrays (:mod:`leapp.trace.segments.warp_segment`); when
an export runs, the APIC graph loaded from the export folder (:mod:`leapp.run.warp_runtime`). Keys
are unique per segment and export, so several pipelines can run in one process.

This module needs torch only; it does not import Warp. The operator is defined on first use
(:func:`packet`), so importing leapp defines nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

__all__ = [
    "NAME",
    "OutputSpec",
    "SegmentEntry",
    "entry",
    "is_segment",
    "packet",
    "register",
    "segment_key",
]

NAME = "leapp::warp_segment"
_SCHEMA = "warp_segment(str key, Tensor[] inputs) -> Tensor[]"

_lock = threading.Lock()
_library: torch.library.Library | None = None
_entries: dict[str, SegmentEntry] = {}


@dataclass(frozen=True)
class OutputSpec:
    """Shape, dtype and device of one tensor a segment returns."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    device: str = "cpu"


@dataclass(frozen=True)
class SegmentEntry:
    """What the operator does for one key.

    ``outputs`` gives the shapes and dtypes of the results (``torch.export`` needs them without
    running Warp); ``run`` computes them, or is None when only the shapes are known (an export
    written but not loaded yet). ``source`` is whatever produced the entry (the trace-time
    recording of the segment, for the exporter).
    """

    outputs: Callable[[], Sequence[OutputSpec]]
    run: Callable[[Sequence[torch.Tensor]], list[torch.Tensor]] | None
    source: Any = None


def packet() -> torch._ops.OpOverloadPacket:
    """``torch.ops.leapp.warp_segment``, defined on first use."""
    global _library
    with _lock:
        if _library is None:
            library = torch.library.Library("leapp", "FRAGMENT")
            library.define(_SCHEMA)
            library.impl("warp_segment", _run, "CompositeExplicitAutograd")
            torch.library.register_fake(NAME, _fake, lib=library)
            _library = library
    return torch.ops.leapp.warp_segment


def register(key: str, entry_: SegmentEntry) -> None:
    """Make the operator compute ``entry_`` for ``key`` (replacing an earlier entry)."""
    packet()
    with _lock:
        _entries[key] = entry_


def entry(key: str) -> SegmentEntry | None:
    """The entry registered for ``key``, or None."""
    return _entries.get(key)


def is_segment(node: fx.Node) -> bool:
    """Whether ``node`` calls the Warp segment operator (its packet or overload)."""
    if node.op != "call_function":
        return False
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        overloads = getattr(node.target, "_qualified_op_name", None)
        return overloads == NAME
    return schema.name == NAME


def segment_key(node: fx.Node) -> str:
    """The key argument of a segment call."""
    key = node.args[0] if node.args else node.kwargs.get("key")
    if not isinstance(key, str):
        raise TypeError(f"{node.name}: the Warp segment call has no key argument")
    return key


def _lookup(key: str) -> SegmentEntry:
    found = _entries.get(key)
    if found is None:
        raise RuntimeError(
            f"Warp segment {key!r} is not loaded in this process. Load the export with "
            "leapp.Pipeline.load / leapp.run.model.load_model (they load the node's .warp "
            "archive before its model), or leapp.run.warp_runtime.load_archive for the node."
        )
    return found


def _run(key: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    found = _lookup(key)
    if found.run is None:
        raise RuntimeError(
            f"Warp segment {key!r} was exported but not loaded: load the node through "
            "leapp.run.model.load_model, which loads its .warp archive."
        )
    return found.run(inputs)


def _fake(key: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return [
        torch.empty(o.shape, dtype=o.dtype, device=_torch_device(o.device))
        for o in _lookup(key).outputs()
    ]


def _torch_device(device: str) -> str:
    return "cuda" + device[4:] if device.startswith("cuda") else "cpu"
