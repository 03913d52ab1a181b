"""The recording of one pipeline: which nodes ran, in which order, with which inputs and outputs.

A :class:`Recording` is what ``leapp.start`` creates and the annotations write into (through
:mod:`leapp.session`, which holds the active one): each node run becomes a
:class:`~leapp.trace.tensors.node_trace.NodeTrace`, and each input that a published output fed is
noted as its :class:`~leapp.trace.tensors.node_trace.PortSource`, from which the pipeline's edges
follow. ``leapp.stop`` ends it (:meth:`Recording.stop`); ``leapp.compile_graph`` turns it into an
export folder. Every traced value reaches its recording through its trace, to ask whether it is
still ``active`` and whether Python values may be frozen.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from leapp.errors import ExportError, GraphError, PortTypeError, SessionError, TraceError
from leapp.trace.arrays import crossing
from leapp.trace.arrays.array import is_live, port_tensor, port_tensors, traced_input
from leapp.trace.location import user_location
from leapp.trace.pipeline import buffers, reruns, sources, states
from leapp.trace.pipeline.runs import SessionRuns, check_name
from leapp.trace.scripts import script_calls
from leapp.trace.tensors.node_trace import NodeTrace
from leapp.trace.tensors.tensor import TracedTensor, plain_again

__all__ = ["Recording"]

logger = logging.getLogger(__name__)

# Ours, then NVIDIA LEAPP's names for them (leapp.export.ALIASES says what each one writes).
BACKENDS = (
    "jit",
    "onnx",
    "pt2",
    None,
    "jit-script",
    "jit-trace",
    "onnx-torchscript",
    "onnx-dynamo",
    "exported-program",
    "torch",
)


class Recording(SessionRuns):
    """One recording of pipeline ``name``, from ``leapp.start`` to ``leapp.compile_graph``.

    ``active`` is true until :meth:`stop`; ``freeze_python_values`` lets ``.item()`` and friends
    on traced values freeze them as constants (with a ``FrozenValueWarning``) instead of raising.
    """

    def __init__(
        self,
        name: str,
        save_path: str | os.PathLike,
        freeze_python_values: bool,
        *,
        verbose: bool = False,
        max_cached_io: int | None = None,
        non_traced: Iterable[str] = (),
        numpy_crossing: bool = True,
    ):
        super().__init__(
            name,
            save_path,
            lambda node, run, where: NodeTrace(self, node, run, where),
            verbose=verbose,
            max_cached_io=max_cached_io,
            non_traced=non_traced,
        )
        self.freeze_python_values = freeze_python_values
        # False (leapp.start(global_patching=False)): tensor.numpy()/np.asarray(tensor) give
        # plain arrays, NumPy code is not recorded.
        self.numpy_crossing = numpy_crossing
        self.plain_outputs: dict[int, Any] = {}  # published buffers, plain again (sources)
        script_calls.activate()  # ScriptFunction calls on traced values are recorded

    def abandon(self, node: str) -> None:
        """Forget the open run of ``node`` (its code raised); it records nothing."""
        trace = self.open.pop(node, None)
        if trace is not None:
            trace.release_adopted()

    # ------------------------------------------------------------------------ buffers
    def register_buffer(self, node: str, tensors: Mapping[str, Any] | list) -> tuple:
        """Trace buffers of the open run of ``node`` (a list is named ``buffer_<i>``)."""
        trace = self._open_run("register_buffer", node)
        if not isinstance(tensors, Mapping):
            start = len(trace.registered)
            tensors = {f"buffer_{start + i}": value for i, value in enumerate(tensors)}
        for name in tensors:
            check_name(f"buffer of node {node!r}", name)
        return tuple(buffers.register(trace, name, value) for name, value in tensors.items())

    def track_module(self, node: str, model: Any, buffer_names: Any) -> None:
        """Declare ``model``'s buffers as states of the open run of ``node`` (annotate.module)."""
        trace = self._open_run("module", node)
        tracked = buffers.module_buffers(trace, model, buffer_names)
        if tracked:
            ports = {port: entry[3] for port, entry in tracked.items()}
            buffers.inject(trace, tracked, self.input_tensors(node, ports, state=True))

    # ------------------------------------------------------------------------- inputs
    def input_tensors(
        self,
        node: str,
        tensors: Mapping[str, Any],
        *,
        state: bool = False,
        semantics: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> tuple[TracedTensor, ...]:
        """Declare inputs (``semantics``: spec fields of the ports given TensorSemantics)."""
        trace = self.open.get(node)
        if trace is None and state:
            raise SessionError(
                f"annotate.state_tensors({node!r}) at {user_location()}: node {node!r} has no "
                f"open run. Call annotate.input_tensors({node!r}, {{...}}) first; states belong "
                "to a run of the node."
            )
        trace = trace or self.open_node(node)
        traced = []
        for port, value in tensors.items():
            check_name(f"input of node {node!r}", port)
            if port in trace.inputs:
                raise GraphError(
                    f"node {node!r}: input {port!r} is declared twice (again at "
                    f"{user_location()}); give each input of a node its own name."
                )
            if not isinstance(value, (torch.Tensor, np.ndarray)):
                raise PortTypeError(
                    f"node {node!r}: input {port!r} at {user_location()} is a "
                    f"{type(value).__name__}, not a torch.Tensor or np.ndarray; convert it with "
                    "torch.as_tensor(...) or np.asarray(...) before annotate.input_tensors."
                )
            source = sources.source_of(trace, port, value, port_tensor(value))
            if isinstance(value, np.ndarray):  # a TracedArray sharing its memory
                traced.append(traced_input(trace, port, value, source))
            else:
                traced.append(trace.add_input(port, value, source))
            sources.rebind_own(trace, value, traced[-1])
            if semantics and port in semantics:
                trace.input_semantics[port] = dict(semantics[port])
            if state:
                trace.state_ports.append(port)
        return tuple(traced)

    def update_state(
        self,
        node: str,
        tensors: Mapping[str, Any],
        semantics: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        tensors = port_tensors(tensors)  # traced NumPy arrays as their torch values
        trace = self.open.get(node)
        where = user_location()
        if trace is None:
            raise SessionError(
                f"annotate.update_state({node!r}) at {where}: node {node!r} is not open. Call "
                f"annotate.state_tensors({node!r}, {{...}}) first, and update_state before "
                "annotate.output_tensors closes the node."
            )
        for port, value in tensors.items():
            if port not in trace.state_ports:
                declared = trace.state_ports or "none declared yet"
                raise GraphError(
                    f"node {node!r}: update_state at {where} names {port!r}, which is not a "
                    f"state of the node (declared states: {declared}); declare it with "
                    f"annotate.state_tensors({node!r}, {{{port!r}: initial}}) first."
                )
            states.check_update(trace, port, value, where)
            if port in trace.state_updates:
                raise GraphError(
                    f"node {node!r}: state {port!r} is updated twice (again at {where})."
                )
            trace.state_updates[port] = (
                self._output_node(trace, port, value, False, where),
                value,
            )
            if semantics and port in semantics:
                trace.output_semantics[port] = dict(semantics[port])

    # ------------------------------------------------------------------------ outputs
    def output_tensors(
        self,
        node: str,
        tensors: Mapping[str, Any],
        export_with: Any,
        static_outputs: Mapping[str, torch.Tensor] | Iterable[str] | None,
        backend_params: Mapping[str, Any] | None = None,
        *,
        semantics: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Close the node (``semantics``: spec fields of the ports given TensorSemantics; a
        state's output port has its state's unless update_state gave it its own)."""
        tensors = port_tensors(tensors)  # traced NumPy arrays as their torch values
        trace = self.open.get(node)
        where = user_location()
        if trace is None:
            raise SessionError(
                f"annotate.output_tensors({node!r}) at {where}: node {node!r} is not open. "
                f"Call annotate.input_tensors({node!r}, {{...}}) first."
            )
        export_with = _check_backend(node, export_with)
        if node in self.non_traced and export_with is not None:
            logger.debug("node %r is in leapp.start(non_traced=...): no artifact", node)
            export_with = None
        constants, allowed_constant = _static(static_outputs)
        constants = port_tensors(constants)
        for port, value in constants.items():
            if isinstance(value, TracedTensor) and is_live(value):
                raise TraceError(
                    f"node {node!r}: static output {port!r} at {where} is a traced value (of "
                    f"node {value._leapp_trace.node!r}); a static output must be a constant. "
                    "Put it in the outputs dict instead."
                )
        changed = buffers.collect(trace)  # annotate.module's buffers: states or constants
        changed.update(script_calls.next_states(trace))  # tensors TorchScript code wrote
        if changed:
            self.update_state(node, changed)
        states.unupdated_as_inputs(trace)
        nodes: dict[str, Any] = {}
        values: dict[str, Any] = {}
        updated = {port: value for port, (_, value) in trace.state_updates.items()}
        # Ports in spec order: the outputs, then the updated states, then static outputs.
        for port, value in [*tensors.items(), *updated.items(), *constants.items()]:
            check_name(f"output of node {node!r}", port)
            if port in nodes:
                raise GraphError(
                    f"node {node!r}: output {port!r} is declared twice at {where}; give each "
                    "output of a node its own name."
                )
            if port in trace.state_updates:
                nodes[port] = trace.state_updates[port][0]
            else:
                allowed = port in allowed_constant
                nodes[port] = self._output_node(trace, port, value, allowed, where)
            values[port] = value
        if not nodes:
            raise GraphError(f"node {node!r} at {where} declares no outputs.")
        for port, fields in (semantics or {}).items():
            trace.output_semantics[port] = dict(fields)
        for port in trace.state_ports:
            if port in trace.input_semantics:
                trace.output_semantics.setdefault(port, trace.input_semantics[port])
        in_place = sources.in_place_outputs(trace, values)  # plain again after close
        trace.close(nodes, values, export_with)
        sources.remember_outputs(trace, in_place)
        trace.backend_params = dict(backend_params or {})
        if self.runs[node]:
            reruns.check_rerun(self.runs[node][0], trace)
        self._closed(node, trace)
        if self.max_cached_io is not None and trace.run >= self.max_cached_io:
            trace.input_examples, trace.output_examples = {}, {}  # beyond max_cached_io
        if self.verbose:
            logger.info(
                "node %r run %d recorded at %s: inputs %s, outputs %s, %d operations",
                node,
                trace.run,
                where,
                list(trace.inputs),
                list(trace.outputs),
                sum(1 for n in trace.graph.nodes if n.op.startswith("call_")),
            )

    def _output_node(self, trace, port, value, constant_allowed, where):
        if isinstance(value, TracedTensor) and value._leapp_trace is trace:
            return value._leapp_node
        if isinstance(value, TracedTensor) and value._leapp_trace is not None:
            raise TraceError(
                f"node {trace.node!r}: output {port!r} at {where} was traced by node "
                f"{value._leapp_trace.node!r}, not by {trace.node!r}. Pass it into "
                f"{trace.node!r} with annotate.input_tensors first."
            )
        if isinstance(value, torch.Tensor) and constant_allowed:
            return trace.constant(value)
        raise TraceError(
            f"node {trace.node!r}: output {port!r} at {where} was not computed from the "
            f"node's traced inputs (got a plain {type(value).__name__}). Compute it from the "
            "values annotate.input_tensors returned (values written into a plain buffer "
            "such as a preallocated NumPy obs are lost: register it first with "
            f"annotate.register_buffer({trace.node!r}, {{'obs': obs}})), or declare a "
            f"constant output with static_outputs={{{port!r}: tensor}}."
        )

    # ------------------------------------------------------------------------ the end
    def stop(self) -> None:
        """End recording: annotations are no-ops again, the crossing patches removed."""
        unclosed = self._unclosed()
        self.discard()
        for runs in self.runs.values():
            for trace in runs:
                for value in trace.output_values.values():
                    plain_again(value)
        unknown = sorted(self.non_traced - set(self.runs))
        if unknown:
            logger.warning("leapp.start(non_traced=%s): no node of that name ran", unknown)
        if unclosed is not None:
            raise unclosed

    def discard(self) -> None:
        """End recording and release every open run (its adopted tensors and module buffers);
        the closed runs stay, for ``compile_graph``."""
        self.active = False
        crossing.deactivate()
        script_calls.deactivate()
        for trace in self.open.values():
            trace.release_adopted()
        self.open.clear()


def _check_backend(node: str, export_with: Any) -> Any:
    if export_with in BACKENDS:
        return export_with
    if isinstance(export_with, (str, os.PathLike)) and Path(export_with).is_file():
        return Path(export_with).resolve()
    raise ExportError(
        f"node {node!r}: export_with={export_with!r} is neither a backend ('jit', 'onnx', "
        "'pt2', None, or LEAPP's 'jit-script', 'jit-trace', 'onnx-torchscript', 'onnx-dynamo', "
        "'exported-program', 'torch') nor the path of an "
        "existing artifact file. Pick one of those."
    )


def _static(static_outputs: Any) -> tuple[dict[str, torch.Tensor], set[str]]:
    if static_outputs is None:
        return {}, set()
    if isinstance(static_outputs, Mapping):
        return dict(static_outputs), set(static_outputs)
    return {}, set(static_outputs)
