"""Recording torch operations on TracedTensors into one node's ``torch.fx`` graph.

One :class:`NodeTrace` is one run of one pipeline node: it opens at ``annotate.input_tensors``
and closes at ``annotate.output_tensors``. :func:`dispatch` is what ``TracedTensor`` hands every
torch call to: it runs the call eagerly and records it, under its own torch name, into the trace
that owns the traced arguments (:func:`owning_trace`: values of two open nodes in one call are
refused). Each trace belongs to a :class:`~leapp.trace.pipeline.recording.Recording`, which says
whether it is still recording and whether Python values may be frozen
(:class:`FrozenValueWarning`). NumPy arrays, TorchScript calls and Warp segments are handed to
the tracers above this package through :mod:`leapp.trace.tensors.extensions`.
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from leapp.errors import TraceError
from leapp.trace.location import user_location
from leapp.trace.tensors.extensions import EXTENSIONS
from leapp.trace.tensors.handover import outside_nodes
from leapp.trace.tensors.operation import (
    NUMBER_HINT,
    Operation,
    describe,
    is_script_call,
    script_name,
)
from leapp.trace.tensors.tensor import TracedTensor, adopt, plain_again, trace_of, wrap

logger = logging.getLogger(__name__)

__all__ = [
    "VALUES_OF_TWO_NODES",
    "FrozenValueWarning",
    "NodeTrace",
    "PortSource",
    "RecordingFlags",
    "Refusals",
    "dispatch",
    "owning_trace",
    "python_value_of",
]


class FrozenValueWarning(UserWarning):
    """A traced value was turned into a Python constant because the session allows it."""


@dataclass(frozen=True)
class PortSource:
    """The published output a node input was fed from: ``<node>/<port>`` of a given run."""

    node: str
    port: str
    run: int

    @property
    def key(self) -> str:
        return f"{self.node}/{self.port}"


class RecordingFlags(Protocol):
    """What a node run asks of the recording it belongs to (a
    :class:`~leapp.trace.pipeline.recording.Recording`)."""

    active: bool  # still recording (until leapp.stop)
    freeze_python_values: bool  # .item() and friends freeze values instead of raising
    numpy_crossing: bool  # tensor.numpy() and np.asarray(tensor) keep the trace


class NodeTrace:
    """The recording of one run of one pipeline node."""

    def __init__(self, recording: RecordingFlags, node: str, run: int, location: str):
        self.recording = recording
        self.node = node
        self.run = run
        self.location = location
        self.graph = fx.Graph()
        self.root = torch.nn.Module()
        self.closed = False
        self.mutates = False  # an in-place operation was recorded: export must functionalize
        self.inputs: dict[str, fx.Node] = {}
        self.input_examples: dict[str, torch.Tensor] = {}
        self.input_sources: dict[str, PortSource | None] = {}
        self.outputs: dict[str, fx.Node] = {}
        self.output_examples: dict[str, torch.Tensor] = {}
        self.output_values: dict[str, torch.Tensor] = {}
        self.export_with: Any = None
        self.backend_params: dict[str, Any] = {}  # annotate.method(backend_params=...), stored
        self.state_ports: list[str] = []  # inputs declared with annotate.state_tensors
        self.state_updates: dict[str, tuple[fx.Node, torch.Tensor]] = {}
        # TensorSemantics given for a port: its spec fields (kind, element_names, ...)
        self.input_semantics: dict[str, dict[str, Any]] = {}
        self.output_semantics: dict[str, dict[str, Any]] = {}
        self._constants: dict[tuple[int, int], tuple[torch.Tensor, fx.Node]] = {}
        self._adopted: list[torch.Tensor] = []
        # leapp.trace.pipeline.buffers: annotate.register_buffer's buffers (name -> traced value),
        # annotate.module's tracked buffers, external inputs' memory (the alias check), and
        # what to undo when the run is released (module buffers handed back)
        self.registered: dict[str, Any] = {}
        self.tracked_buffers: list[Any] = []
        self.external_inputs: dict[str, Any] = {}
        self.releases: list[Any] = []
        # leapp.trace.scripts.script_calls: module tensors TorchScript code wrote, states
        # (port -> state)
        self.script_states: dict[str, Any] = {}

    # ----------------------------------------------------------------- inputs and constants
    def add_input(self, name: str, value: torch.Tensor, source: PortSource | None) -> TracedTensor:
        """Declare input port ``name`` and return the traced value that stands for it (an
        ``np.ndarray`` is declared by :func:`leapp.trace.arrays.array.traced_input`)."""
        first = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
        if first is None:
            placeholder = self.graph.placeholder(name)
        else:
            with self.graph.inserting_before(first):
                placeholder = self.graph.placeholder(name)
        placeholder.meta["leapp_port"] = name
        placeholder.meta["example_value"] = _example_of(value)
        self.inputs[name] = placeholder
        self.input_examples[name] = _snapshot(value)
        self.input_sources[name] = source
        return wrap(_plain(value), self, placeholder)

    def constant(self, value: torch.Tensor) -> fx.Node:
        """The get_attr node that freezes ``value`` (a tensor that was never traced)."""
        if EXTENSIONS.written_value is not None:  # a view of a Warp array the node wrote
            written = EXTENSIONS.written_value(self, value)
            if written is not None:
                return written
        key = (id(value), value._version)
        if key in self._constants:
            return self._constants[key][1]
        name = f"_tensor_constant{len(self._constants)}"
        setattr(self.root, name, _snapshot(value))
        node = self.graph.get_attr(name)
        node.meta["example_value"] = _example_of(value)
        self._constants[key] = (value, node)  # keep the object alive so its id stays unique
        return node

    def argument(self, value: Any) -> Any:
        """Map one (possibly nested) call argument to what the fx graph records for it."""

        def convert(leaf: Any) -> Any:
            if isinstance(leaf, TracedTensor):
                return leaf._leapp_node
            if isinstance(leaf, torch.Tensor):
                return self.constant(leaf)
            return leaf

        return pytree.tree_map(convert, value)

    # ----------------------------------------------------------------------- recording
    def record(self, op: Operation, args: tuple, kwargs: dict) -> fx.Node:
        """Append one call to the graph; ``args`` may hold tensors, traced or not."""
        if op.kind == "call_method":
            node = self.graph.call_method(op.target, self.argument(args), self.argument(kwargs))
        else:
            node = self.graph.call_function(op.target, self.argument(args), self.argument(kwargs))
        node.meta["leapp_location"] = user_location()
        if op.mutates:
            self.mutates = True
        return node

    def adopt_mutated(self, value: torch.Tensor) -> None:
        """``value`` is a plain tensor about to receive traced data in place: start tracing it."""
        if type(value) is not torch.Tensor:
            raise TraceError(
                f"node {self.node!r}: an in-place operation at {user_location()} writes traced "
                f"values into a {type(value).__name__} that was not traced. Register it "
                f"first with annotate.register_buffer({self.node!r}, {{'name': buffer}}) and "
                "write into the value it returns, use the out-of-place form (y = y + x), or "
                "build the tensor from a traced value."
            )
        copy = self.graph.call_function(torch.clone, (self.constant(value),))
        adopt(value, self, copy)
        self._adopted.append(value)

    def release_adopted(self) -> None:
        """Give tensors adopted by :meth:`adopt_mutated` back their plain class."""
        for value in self._adopted:
            plain_again(value)
        self._adopted.clear()
        for release in self.releases:
            release()
        self.releases.clear()
        self.registered.clear()
        self.external_inputs.clear()

    def wrap_result(self, result: Any, node: fx.Node, args: tuple) -> Any:
        """Wrap the tensors an eager call returned so later operations on them are recorded."""
        passthrough = {id(a) for a in args if isinstance(a, torch.Tensor)}
        if isinstance(result, torch.Tensor):
            if id(result) in passthrough and isinstance(result, TracedTensor):
                return result  # in-place operation: the same object, now holding the new value
            return wrap(result, self, node)
        if isinstance(result, (tuple, list)) and any(isinstance(r, torch.Tensor) for r in result):
            items = []
            for index, item in enumerate(result):
                if isinstance(item, torch.Tensor):
                    element = self.graph.call_function(operator.getitem, (node, index))
                    items.append(wrap(item, self, element))
                else:
                    items.append(item)
            if isinstance(result, list):
                return items
            return type(result)(items) if type(result) is not tuple else tuple(items)
        return result

    def close(
        self, outputs: dict[str, fx.Node], values: dict[str, torch.Tensor], export_with: Any
    ) -> None:
        """Declare the outputs (in order), end the recording and release adopted tensors."""
        used: set[fx.Node] = set()
        for port, node in outputs.items():
            if node in used or node.op == "placeholder":
                # An artifact output must be its own value: not an input, not another output.
                node = self.graph.call_function(torch.clone, (node,))
            used.add(node)
            node.meta.setdefault("leapp_outputs", []).append(port)
            self.outputs[port] = node
            self.output_examples[port] = _snapshot(values[port])
            self.output_values[port] = values[port]
        results = list(self.outputs.values())
        self.graph.output(results[0] if len(results) == 1 else tuple(results))
        self.export_with = export_with
        self.closed = True
        self.release_adopted()

    def graph_module(self) -> fx.GraphModule:
        """The recorded graph as a runnable GraphModule (constants included)."""
        return fx.GraphModule(self.root, self.graph, class_name=_class_name(self.node))


def dispatch(func: Any, types: tuple, args: tuple, kwargs: dict) -> Any:
    """Run one torch call eagerly and record it into the open node that owns its arguments."""
    leaves = pytree.tree_leaves((args, kwargs))
    to_tensor = EXTENSIONS.array_to_tensor  # NumPy arrays in a torch call: traced or constants
    if to_tensor is not None and any(isinstance(leaf, np.ndarray) for leaf in leaves):
        args, kwargs = pytree.tree_map_only(np.ndarray, to_tensor, (args, kwargs))
        leaves = pytree.tree_leaves((args, kwargs))
    traces = {id(t): t for t in map(trace_of, leaves) if t}
    trace = owning_trace(func, list(traces.values()))
    script_call = EXTENSIONS.script_call
    if trace is not None and script_call is not None and is_script_call(func):
        return script_call(trace, func, args, kwargs)  # inlined as its ATen operations
    op = describe(func, args, kwargs)
    if trace is not None and not trace.recording.numpy_crossing and _reads_into_numpy(func):
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)  # leapp.start(global_patching=False): plain NumPy
    if op.kind == "to_numpy" and EXTENSIONS.tensor_to_array is not None:
        return EXTENSIONS.tensor_to_array(func, args, kwargs)
    if trace is None and op.kind not in ("metadata", "to_numpy"):
        closed = [t for t in traces.values() if t.recording.active]
        if closed:  # published outputs between nodes
            return outside_nodes(func, op, args, kwargs, closed[0])
    if trace is None or op.kind in ("metadata", "to_numpy"):
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)
    if op.kind == "python_value":
        return python_value_of(trace, op, func, args, kwargs)
    if op.kind == "unsupported":
        raise TraceError(
            f"node {trace.node!r}: {op.name} at {user_location()} cannot be recorded: {op.hint}"
        )
    target = args[0] if args else None
    if op.mutates and isinstance(target, torch.Tensor) and not isinstance(target, TracedTensor):
        trace.adopt_mutated(target)
    record_args = op.rewrite_args(args) if op.rewrite_args else args
    with torch._C.DisableTorchFunctionSubclass():
        result = func(*args, **kwargs)
    if isinstance(result, (bool, int, float, complex)):
        data = Operation("python_value", func, f"{op.name}()", hint=NUMBER_HINT)
        return python_value_of(trace, data, func, args, kwargs, result)
    node = trace.record(op, record_args, kwargs)
    node.meta["example_value"] = _example_of(result)
    return trace.wrap_result(result, node, args)


@dataclass(frozen=True)
class Refusals:
    """The messages refusing a call on values of two node runs: ``two_open`` when both runs are
    open, ``closed_inside`` when a closed run's value is used inside an open one. Fields:
    ``{what}`` (the call), ``{where}`` (the user's line), ``{a}``, ``{b}`` (the two nodes)."""

    two_open: str
    closed_inside: str


VALUES_OF_TWO_NODES = Refusals(
    two_open=(
        "{what} at {where} mixes values of the open nodes {a!r} and {b!r}. Values cross nodes "
        "only as published outputs: close {a!r} with annotate.output_tensors and pass the "
        "value to annotate.input_tensors({b!r}, ...)."
    ),
    closed_inside=(
        "{what} at {where} uses a value of node {a!r} (already closed) inside node {b!r} "
        "without declaring it: pass it through annotate.input_tensors({b!r}, {{...}}) so the "
        "edge is recorded (a buffer the node writes into on every run: "
        "annotate.register_buffer({b!r}, {{...}}) on every run)."
    ),
)


def owning_trace(
    what: Any,
    traces: list[NodeTrace],
    refusals: Refusals = VALUES_OF_TWO_NODES,
    *,
    also_open: NodeTrace | None = None,
) -> NodeTrace | None:
    """The single open trace among ``traces`` (the owners of the values call ``what`` uses,
    and ``also_open`` when given: the node of an ``annotate.warp_op`` block); None when nothing
    is being recorded. Values of two open runs, or of a closed run inside an open one, are
    refused with the messages of ``refusals``."""
    live = [t for t in traces if t.recording.active]
    open_traces = [t for t in live if not t.closed]
    if also_open is not None and not any(t is also_open for t in open_traces):
        open_traces.append(also_open)
    closed = [t for t in live if t.closed]
    if len(open_traces) > 1:
        a, b = open_traces[0].node, open_traces[1].node
        message = refusals.two_open
    elif open_traces and closed:
        a, b = closed[0].node, open_traces[0].node
        message = refusals.closed_inside
    else:
        return open_traces[0] if open_traces else None
    raise TraceError(message.format(what=_call_name(what), where=user_location(), a=a, b=b))


def _call_name(func: Any) -> str:
    if isinstance(func, str):
        return func
    if is_script_call(func):
        return f"TorchScript {script_name(func)}"
    return getattr(func, "__name__", repr(func))


def _reads_into_numpy(func: Any) -> bool:
    return getattr(func, "__name__", None) in ("numpy", "__array__")


def python_value_of(trace, op, func, args, kwargs, result=None):
    """``.item()``, ``bool()``, ``float()``... on traced data: refuse, or freeze when allowed."""
    where = user_location()
    if not trace.recording.freeze_python_values:
        raise TraceError(
            f"node {trace.node!r}: {op.name} at {where} turns a traced tensor into a Python "
            "value, which the exported graph cannot follow (the branch or number taken now "
            f"would be baked in). {op.hint} To freeze the current value on purpose, start the "
            "session with leapp.start(..., freeze_python_values=True)."
        )
    if result is None:
        with torch._C.DisableTorchFunctionSubclass():
            result = func(*args, **kwargs)
    import warnings

    warnings.warn(
        f"node {trace.node!r}: {op.name} at {where} froze a traced value as the constant "
        f"{result!r}; the export will always use it.",
        FrozenValueWarning,
        stacklevel=2,
    )
    return result


def _plain(value: torch.Tensor) -> torch.Tensor:
    if isinstance(value, TracedTensor):
        with torch._C.DisableTorchFunctionSubclass():
            return value.as_subclass(torch.Tensor)
    return value


def _snapshot(value: torch.Tensor) -> torch.Tensor:
    with torch._C.DisableTorchFunctionSubclass():
        return value.detach().as_subclass(torch.Tensor).clone()


def _example_of(value: Any) -> Any:
    """Shape and dtype of a result, kept in ``node.meta`` for checks and printing."""
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.dtype)
    return None


def _class_name(node: str) -> str:
    return "".join(part.capitalize() for part in node.replace("-", "_").split("_")) or "Node"
