"""From a recorded node trace to the graph that gets exported.

- :func:`recorded_graph` is the graph as recorded (dead code pruned when that is safe), for
  people to read: it prints like the listing in the seed document
  (:func:`leapp.graph.listing.format_graph`).
- :func:`export_graph` is what the exporters receive: a pure GraphModule (in-place operations
  functionalized), dead code pruned, unused inputs dropped, placeholders named after the ports.
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass

import torch
import torch.fx as fx

from leapp.trace.tensors.node_trace import NodeTrace

logger = logging.getLogger(__name__)

__all__ = ["ExportGraph", "export_graph", "recorded_graph"]


@dataclass(frozen=True)
class ExportGraph:
    """A node's graph ready for an exporter, with the ports it kept."""

    module: fx.GraphModule
    inputs: tuple[str, ...]
    dropped_inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    example_inputs: tuple[torch.Tensor, ...]


def recorded_graph(trace: NodeTrace) -> fx.GraphModule:
    """The recorded graph, with code that feeds no output removed (when nothing mutates)."""
    module = trace.graph_module()
    if not trace.mutates:
        module.graph.eliminate_dead_code()
        module.recompile()
    return module


def export_graph(trace: NodeTrace) -> ExportGraph:
    """A pure, pruned GraphModule for ``trace`` and the input ports it still uses."""
    module = trace.graph_module()
    examples = tuple(trace.input_examples[name] for name in trace.inputs)
    if trace.mutates:
        module = _functionalize(module, examples, list(trace.inputs), trace.node)
    graph = module.graph
    _canonicalize(graph)
    graph.eliminate_dead_code()
    kept, dropped = [], []
    for node in list(graph.nodes):
        if node.op != "placeholder":
            continue
        if node.users:
            kept.append(node.target)
        else:
            dropped.append(node.target)
            graph.erase_node(node)
    for name in dropped:
        logger.info(
            "node %r: input %r does not contribute to any output; it is dropped from the export",
            trace.node,
            name,
        )
    graph.lint()
    module = fx.GraphModule(module, graph, class_name=module.__class__.__name__)
    return ExportGraph(
        module=module,
        inputs=tuple(kept),
        dropped_inputs=tuple(dropped),
        outputs=tuple(trace.outputs),
        example_inputs=tuple(trace.input_examples[name] for name in kept),
    )


def _functionalize(
    module: fx.GraphModule, examples: tuple[torch.Tensor, ...], names: list[str], node: str
) -> fx.GraphModule:
    """Rewrite in-place operations and writes through views as pure aten operations.

    Constants are lifted to inputs while functionalizing (a write into a copy of a constant
    must be functionalized like any other) and turned back into constants afterwards. Kernels
    that read their inputs' values are traced through data-free equivalents where one exists
    (``one_hot`` with ``num_classes``); otherwise the ExportError names the operation and line.
    """
    from torch.func import functionalize

    from leapp.graph.aten_graph import aten_graph

    lifted, constants = _lift_constants(module)
    arguments = [e.clone() for e in examples] + [c.clone() for c in constants]
    pure = aten_graph(
        lifted,
        arguments,
        node=node,
        purpose="functionalization (rewriting in-place operations as pure ones)",
        decompositions=_scatter_decompositions(),
        wrap=lambda run: functionalize(run, remove="mutations"),
    )
    graph = pure.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for node in list(graph.nodes):
        # functionalize writes mutated inputs back with copy_; artifacts never mutate inputs.
        copies_back = node.target is torch.ops.aten.copy_.default
        if copies_back and node.args[0] in placeholders and not node.users:
            graph.erase_node(node)
    for node, name in zip(placeholders, names, strict=False):
        node.target = name
        node.name = name
    for index, (node, value) in enumerate(zip(placeholders[len(names) :], constants, strict=True)):
        attribute = f"_lifted_constant{index}"
        pure.register_buffer(attribute, value)
        with graph.inserting_before(node):
            constant = graph.get_attr(attribute)
        node.replace_all_uses_with(constant)
        graph.erase_node(node)
    for node in graph.nodes:
        if node.op == "get_attr" and node.target not in dict(pure.named_buffers()):
            # Constants make_fx created (torch.tensor inside a decomposition) become buffers,
            # which every exporter stores as plain constants.
            value = getattr(pure, node.target)
            delattr(pure, node.target)
            pure.register_buffer(node.target, value.detach().clone())
        # Scripting understands overload packets (aten.sub), not overloads (aten.sub.Tensor).
        if isinstance(node.target, torch._ops.OpOverload):
            node.target = node.target.overloadpacket
    pure.recompile()
    return pure


def _scatter_decompositions() -> dict:
    """Writes through views functionalize to ``*_scatter`` ops, which the TorchScript-based ONNX
    exporter does not know. They are rewritten as a gather and a ``where`` with constant
    positions, which every backend knows and which compute exactly the same values."""
    aten = torch.ops.aten
    return {
        aten.slice_scatter.default: _slice_scatter,
        aten.select_scatter.default: _select_scatter,
    }


def _slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    dim = dim % input.dim()
    size = input.shape[dim]
    positions = range(size)[slice(start, end, step)]
    if len(positions) == 0:
        return input.clone()
    # Built from Python lists, so they enter the graph as constants, not as recorded ops.
    where = {position: index for index, position in enumerate(positions)}
    inside = torch.tensor([p in where for p in range(size)], dtype=torch.bool)
    source_index = torch.tensor([where.get(p, 0) for p in range(size)], dtype=torch.long)
    gathered = torch.index_select(src, dim, source_index)
    shape = [1] * input.dim()
    shape[dim] = size
    return torch.where(inside.reshape(shape), gathered, input)


def _select_scatter(input, src, dim, index):
    dim = dim % input.dim()
    index = index % input.shape[dim]
    return _slice_scatter(input, src.unsqueeze(dim), dim, index, index + 1, 1)


def _canonicalize(graph: fx.Graph) -> None:
    """Rewrite calls that some exporters get wrong into exact equivalents every exporter knows.

    - floor division (``torch.floor_divide``, ``//``) is ``torch.div(..., rounding_mode="floor")``
      in PyTorch; the TorchScript-based ONNX exporter truncates instead of flooring it;
    - functionalized writes (``aten.copy``, ``aten.fill.Tensor``) become ``type_as`` +
      ``expand_as``; ``aten.lift_fresh_copy`` and ``detach`` of a value are the value itself
      (the graph computes no gradients).
    """
    aten = torch.ops.aten
    for node in list(graph.nodes):
        target = node.target
        if target in (torch.floor_divide, operator.floordiv, aten.floor_divide):
            node.target = torch.div
            node.kwargs = {**node.kwargs, "rounding_mode": "floor"}
        elif target in (aten.lift_fresh_copy, aten.detach_, aten.detach):
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
        elif target in (aten.copy, aten.fill) and isinstance(node.args[1], fx.Node):
            destination, source = node.args[0], node.args[1]
            with graph.inserting_before(node):
                typed = graph.call_method("type_as", (source, destination))
                expanded = graph.call_method("expand_as", (typed, destination))
                value = graph.call_method("clone", (expanded,))
            node.replace_all_uses_with(value)
            graph.erase_node(node)


def _lift_constants(module: fx.GraphModule) -> tuple[fx.GraphModule, list[torch.Tensor]]:
    """A copy of ``module`` whose get_attr constants are trailing inputs, and their values."""
    graph = fx.Graph()
    graph.output(graph.graph_copy(module.graph, {}))
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    constants = []
    for node in [n for n in graph.nodes if n.op == "get_attr"]:
        with graph.inserting_after(placeholders[-1]):
            lifted = graph.placeholder(f"_lifted_{len(constants)}")
        placeholders.append(lifted)
        constants.append(getattr(module, node.target))
        node.replace_all_uses_with(lifted)
        graph.erase_node(node)
    return fx.GraphModule(torch.nn.Module(), graph), constants
