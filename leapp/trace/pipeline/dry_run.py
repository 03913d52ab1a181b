"""A dry run (``leapp.start(..., dry_run=True)``): the pipeline's shape, with nothing traced.

NVIDIA LEAPP's dry run finds the nodes, their ports and the edges between them while the
annotated code runs exactly as in production: every annotation hands back the caller's own
objects (never a ``TracedTensor``), nothing is recorded, and ``compile_graph`` writes the spec
(and the picture, with ``visualize=True``) with every node's ``model_path`` and ``backend``
null. It answers "what will the export look like" in the time one tick takes.

A :class:`DryRecording` takes the place of a :class:`~leapp.trace.pipeline.recording.Recording`
for the annotations; each node run is a :class:`DryRun`, shaped like a
:class:`~leapp.trace.tensors.node_trace.NodeTrace` where ``compile_graph`` and
:func:`leapp.graph.edges.classify_inputs` read one (ports, examples, sources, states). Without
values to follow, an edge is a published output handed to another node as the same object or
as a view of the same memory (``.detach()``, ``.view(...)``, ``np.asarray``); a copy
(``.clone()``) arrives as an external input. A published torch output is tagged
``leapp_tag = "<node>/<port>"``, as LEAPP tags it. ``annotate.module`` notes the module's
buffers; one the forward pass reassigned or wrote in place is a state of the node.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch

from leapp.errors import GraphError, PortTypeError
from leapp.trace.location import user_location
from leapp.trace.pipeline import states
from leapp.trace.pipeline.buffers import module_buffers
from leapp.trace.pipeline.runs import SessionRuns, check_name
from leapp.trace.tensors.node_trace import PortSource

__all__ = ["DryRecording", "DryRun"]

logger = logging.getLogger(__name__)


class DryRun:
    """One run of one node in a dry run: its ports, their first values and their sources."""

    def __init__(self, node: str, run: int, location: str):
        self.node, self.run, self.location = node, run, location
        self.closed = False
        self.export_with: Any = None
        self.backend_params: dict[str, Any] = {}
        self.inputs: dict[str, None] = {}  # port names in order (no graph: no placeholders)
        self.input_examples: dict[str, torch.Tensor] = {}
        self.input_sources: dict[str, PortSource | None] = {}
        self.outputs: dict[str, None] = {}
        self.output_examples: dict[str, torch.Tensor] = {}
        self.output_values: dict[str, Any] = {}
        self.state_ports: list[str] = []
        self.state_updates: dict[str, tuple[None, Any]] = {}
        self.input_semantics: dict[str, dict[str, Any]] = {}
        self.output_semantics: dict[str, dict[str, Any]] = {}
        # annotate.module's buffers: (port, owner, attribute, buffer, version, value then)
        self.modules: list[tuple[str, Any, str, Any, int, torch.Tensor]] = []


class DryRecording(SessionRuns):
    """The dry run of pipeline ``name``, from ``leapp.start`` to ``leapp.compile_graph``."""

    dry_run = True
    numpy_crossing = False  # nothing is traced: no NumPy crossing, no Warp segments
    freeze_python_values = False

    def __init__(
        self,
        name: str,
        save_path: str | os.PathLike,
        *,
        verbose: bool = False,
        max_cached_io: int | None = None,
        non_traced: Iterable[str] = (),
    ):
        super().__init__(
            name,
            save_path,
            DryRun,
            verbose=verbose,
            max_cached_io=max_cached_io,
            non_traced=non_traced,
        )
        self._published: dict[Any, tuple[Any, PortSource]] = {}  # memory key -> (value, port)

    # ------------------------------------------------------------------------ node runs
    def abandon(self, node: str) -> None:
        self.open.pop(node, None)

    def input_tensors(
        self,
        node: str,
        tensors: Mapping[str, Any],
        *,
        state: bool = False,
        semantics: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> tuple:
        """Note the inputs; hand back the very objects given."""
        run = self._open_run("state_tensors", node) if state else self.open.get(node)
        run = run or self.open_node(node)
        for port, value in tensors.items():
            check_name(f"input of node {node!r}", port)
            if port in run.inputs:
                raise GraphError(f"node {node!r}: input {port!r} is declared twice.")
            run.inputs[port] = None
            run.input_examples[port] = _example(node, port, value)
            run.input_sources[port] = self._source(value)
            if semantics and port in semantics:
                run.input_semantics[port] = dict(semantics[port])
            if state:
                run.state_ports.append(port)
        return tuple(tensors.values())

    def update_state(self, node: str, tensors: Mapping[str, Any], semantics=None) -> None:
        run = self._open_run("update_state", node)
        for port, value in tensors.items():
            if port not in run.state_ports:
                raise GraphError(
                    f"node {node!r}: update_state at {user_location()} names {port!r}, which "
                    f"is not a state of the node (declared states: {run.state_ports})."
                )
            run.state_updates[port] = (None, value)
            if semantics and port in semantics:
                run.output_semantics[port] = dict(semantics[port])

    def register_buffer(self, node: str, tensors: Mapping[str, Any] | list) -> tuple:
        self._open_run("register_buffer", node)
        return tuple(tensors.values() if isinstance(tensors, Mapping) else tensors)

    def track_module(self, node: str, model: Any, buffer_names: Any) -> None:
        """Remember ``model``'s buffers; those changed when the node closes are states."""
        run = self._open_run("module", node)
        for port, (_, owner, attr, buffer) in module_buffers(run, model, buffer_names).items():
            first = _example(node, port, buffer)  # its value now: the state's initial value
            run.modules.append((port, owner, attr, buffer, buffer._version, first))

    def output_tensors(
        self,
        node: str,
        tensors: Mapping[str, Any],
        export_with: Any,
        static_outputs: Any,
        backend_params: Mapping[str, Any] | None = None,
        *,
        semantics: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Close the node: its outputs (then updated states, then constants) are published."""
        run = self._open_run("output_tensors", node)
        changed = {}
        for port, owner, attr, buffer, version, first in run.modules:
            now = getattr(owner, attr)
            if now is not buffer or buffer._version != version:  # reassigned or written
                self.input_tensors(node, {port: first}, state=True)
                changed[port] = now
        if changed:
            self.update_state(node, changed)
        states.unupdated_as_inputs(run)  # never updated: regular inputs, as recorded
        constants = dict(static_outputs) if isinstance(static_outputs, Mapping) else {}
        updated = {port: value for port, (_, value) in run.state_updates.items()}
        for port, value in [*tensors.items(), *updated.items(), *constants.items()]:
            check_name(f"output of node {node!r}", port)
            if port in run.outputs:
                raise GraphError(f"node {node!r}: output {port!r} is declared twice.")
            run.outputs[port] = None
            run.output_examples[port] = _example(node, port, value)
            run.output_values[port] = value
        if not run.outputs:
            raise GraphError(f"node {node!r} at {user_location()} declares no outputs.")
        for port, fields in (semantics or {}).items():
            run.output_semantics[port] = dict(fields)
        run.export_with, run.backend_params = export_with, dict(backend_params or {})
        run.closed = True
        self._closed(node, run)
        for port, value in run.output_values.items():
            self._publish(value, PortSource(node, port, run.run))

    # ------------------------------------------------------------------------- edges
    def _publish(self, value: Any, source: PortSource) -> None:
        self._published[_memory_key(value)] = (value, source)
        if isinstance(value, torch.Tensor):
            with contextlib.suppress(AttributeError, RuntimeError):
                value.leapp_tag = source.key  # as LEAPP tags a published tensor

    def mirror(self, source: Any, target: Any) -> Any:
        """``annotate.mirror_leapp_tags`` in a dry run: ``target`` stands for the published
        output ``source`` is, if it is one."""
        values = (torch.Tensor, np.ndarray)
        published = self._source(source) if isinstance(source, values) else None
        if published is not None and isinstance(target, values):
            self._publish(target, published)
        return target

    def _source(self, value: Any) -> PortSource | None:
        entry = self._published.get(_memory_key(value))
        return None if entry is None else entry[1]

    # ------------------------------------------------------------------------ the end
    def stop(self) -> None:
        unclosed = self._unclosed()
        self.discard()
        if unclosed is not None:
            raise unclosed

    def discard(self) -> None:
        self.active = False
        self.open.clear()


def _example(node: str, port: str, value: Any) -> torch.Tensor:
    """A plain copy of ``value`` (its dtype and shape go into the spec)."""
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.array(value, copy=True))
    if isinstance(value, torch.Tensor):
        with torch._C.DisableTorchFunctionSubclass():
            return value.detach().as_subclass(torch.Tensor).clone()
    raise PortTypeError(
        f"node {node!r}: port {port!r} at {user_location()} is a {type(value).__name__}, not a "
        "torch.Tensor or np.ndarray; convert it with torch.as_tensor(...) or np.asarray(...)."
    )


def _memory_key(value: Any) -> Any:
    """What ``value`` and every view of the same memory, shape and dtype have in common (a
    NumPy array and ``torch.from_numpy`` of it too): device, address, shape, strides in
    elements, dtype name."""
    if isinstance(value, np.ndarray) and value.size == 0:
        return ("object", id(value))
    if isinstance(value, np.ndarray):
        address = value.__array_interface__["data"][0]
        strides = tuple(s // value.itemsize for s in value.strides) if value.itemsize else ()
        return ("cpu", address, tuple(value.shape), strides, str(value.dtype))
    with torch._C.DisableTorchFunctionSubclass():
        plain = value.as_subclass(torch.Tensor)
        if plain.numel() == 0:  # no memory to tell two empty tensors apart
            return ("object", id(value))
        dtype = str(plain.dtype).removeprefix("torch.")
        return (str(plain.device), plain.data_ptr(), tuple(plain.shape), plain.stride(), dtype)
