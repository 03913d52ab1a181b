"""NodeTrace: the recording of one run of one pipeline node into a ``torch.fx`` graph.

One :class:`NodeTrace` opens at ``annotate.input_tensors`` and closes at
``annotate.output_tensors``. It declares the node's input ports (each one a placeholder and the
:class:`~leapp.trace.tensors.tensor.TracedTensor` standing for it), freezes tensors that were
never traced as ``get_attr`` constants, appends the calls the recorder
(:mod:`leapp.trace.tensors.recorder`) hands it, and declares the outputs. It belongs to a
:class:`~leapp.trace.pipeline.recording.Recording` (:class:`RecordingFlags`: whether it is
still recording, whether Python values may be frozen). Before freezing a plain tensor it asks
the tracers above this package whether one of them wrote it (:data:`CONSTANT_HOOKS`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from leapp.errors import TraceError
from leapp.trace.location import user_location
from leapp.trace.tensors.operation import Operation
from leapp.trace.tensors.tensor import TracedTensor, adopt, plain_again, wrap

__all__ = [
    "CONSTANT_HOOKS",
    "ConstantHooks",
    "NodeTrace",
    "PortSource",
    "RecordingFlags",
    "example_of",
    "trace_of",
]


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


@dataclass
class ConstantHooks:
    """What a NodeTrace asks the tracers above this package before it freezes a plain tensor;
    an entry nobody set freezes it.

    ``written_value``: the graph value a Warp segment of the node wrote into the memory of the
    tensor (None: freeze it), set by :mod:`leapp.trace.segments.warp_region` when imported.
    """

    written_value: Callable[[NodeTrace, torch.Tensor], fx.Node | None] | None = None


CONSTANT_HOOKS = ConstantHooks()


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
        placeholder.meta["example_value"] = example_of(value)
        self.inputs[name] = placeholder
        self.input_examples[name] = _snapshot(value)
        self.input_sources[name] = source
        return wrap(_plain(value), self, placeholder)

    def constant(self, value: torch.Tensor) -> fx.Node:
        """The get_attr node that freezes ``value`` (a tensor that was never traced)."""
        if CONSTANT_HOOKS.written_value is not None:  # a view of a Warp array the node wrote
            written = CONSTANT_HOOKS.written_value(self, value)
            if written is not None:
                return written
        key = (id(value), value._version)
        if key in self._constants:
            return self._constants[key][1]
        name = f"_tensor_constant{len(self._constants)}"
        setattr(self.root, name, _snapshot(value))
        node = self.graph.get_attr(name)
        node.meta["example_value"] = example_of(value)
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


def trace_of(value: Any) -> NodeTrace | None:
    """The trace that owns ``value``, or None for anything that is not a TracedTensor."""
    if isinstance(value, TracedTensor):
        return getattr(value, "_leapp_trace", None)
    return None


def _plain(value: torch.Tensor) -> torch.Tensor:
    if isinstance(value, TracedTensor):
        with torch._C.DisableTorchFunctionSubclass():
            return value.as_subclass(torch.Tensor)
    return value


def _snapshot(value: torch.Tensor) -> torch.Tensor:
    with torch._C.DisableTorchFunctionSubclass():
        return value.detach().as_subclass(torch.Tensor).clone()


def example_of(value: Any) -> Any:
    """Shape and dtype of a result, kept in ``node.meta`` for checks and printing."""
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.dtype)
    return None


def _class_name(node: str) -> str:
    return "".join(part.capitalize() for part in node.replace("-", "_").split("_")) or "Node"
