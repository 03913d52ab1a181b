"""Lowering: a node's graph as ATen operations the TorchScript-based ONNX exporter can write.

The TorchScript-based exporter (:mod:`leapp.export.onnx`) has no ONNX translation for many ATen
operations (``sinh``, ``expm1``, ``logaddexp``, ``ravel``, ``index_add``, ``block_diag``, ...),
most of which are a short decomposition away from operations it knows. :func:`onnx_lowered`
re-traces the graph with ``make_fx`` above autograd (``pre_dispatch``: ``linear``,
``layer_norm``, ``softmax`` stay whole, so they still become single ONNX operators) and
decomposes exactly the operations the exporter does not know, in rounds until none is left that
can be decomposed:

1. leapp's own decompositions (:mod:`leapp.export.decompositions`), written for ONNX: short,
   numerically careful, and without the ``prims`` operations torch's reference decompositions
   end in (a "full" lowering also applies them to operations the exporter knows but writes
   wrongly for some arguments);
2. the operation's composite kernel (``CompositeImplicitAutograd``: ``bilinear``, ``inner``,
   ``ravel``, ``kron``, ... are defined by other ATen calls);
3. torch's decomposition table (``torch._decomp``), for the rest.

An operation left without translation makes the export fail as before, with the same clear
:class:`~leapp.errors.ExportError`. Lowering runs only for graphs the exporter refused as they
were, so the common case costs nothing; when it runs it takes one ``make_fx`` trace per round
(tens of milliseconds for a small graph).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx as fx

from leapp.graph.aten_graph import aten_graph

__all__ = ["onnx_lowered", "onnx_unknown_operations"]

logger = logging.getLogger(__name__)

_ROUNDS = 4


def onnx_lowered(
    graph_module: fx.GraphModule,
    example_inputs: Sequence[torch.Tensor],
    *,
    node: str,
    opset: int,
    fully: bool = False,
) -> fx.GraphModule:
    """``graph_module`` as ATen operations, with every operation the TorchScript-based ONNX
    exporter has no translation for at ``opset`` decomposed where a decomposition exists;
    with ``fully``, also every operation it translates that has a leapp decomposition (the
    exporter writes some of them wrongly for some arguments: ``index_select`` with a 0-d
    index, ``softplus`` ignoring its threshold, ``any`` of floats), traced below autograd
    (every composite operation decomposed) and functionalized (composite kernels write in
    place).

    The result computes the same values on every input (decompositions are exact up to
    floating-point rounding); the caller validates the artifact on the traced examples.

    Raises:
        ExportError: re-tracing failed (an operation reads its inputs' values, ...).
    """
    from torch.func import functionalize

    from leapp.export.decompositions import ONNX_DECOMPOSITIONS

    started = time.perf_counter()
    table: dict[Any, Callable[..., Any]] = {}
    lowered = graph_module
    for _ in range(_ROUNDS):
        lowered = aten_graph(
            graph_module,
            example_inputs,
            node=node,
            purpose="lowering for ONNX",
            decompositions=table,
            pre_dispatch=not fully,
            wrap=(lambda run: functionalize(run, remove="mutations")) if fully else None,
        )
        unknown = onnx_unknown_operations(lowered, opset) - _REWRITTEN - _PAIRED
        if fully:
            unknown |= {op for op in _operations(lowered) if _own(op, ONNX_DECOMPOSITIONS)}
        unknown -= set(table)
        added = {op: fn for op in unknown if (fn := _decomposition(op, ONNX_DECOMPOSITIONS))}
        if not added:
            break
        logger.debug("node %s: decomposing %s for ONNX", node, sorted(map(str, added)))
        table.update(added)
    _clean(lowered)
    logger.debug("node %s: lowered for ONNX in %.3f s", node, time.perf_counter() - started)
    return lowered


def _aten(name: str) -> set[torch._ops.OpOverload]:
    packet = getattr(torch.ops.aten, name)
    return {getattr(packet, overload) for overload in packet.overloads()}


# Written as plain calls by _clean instead of being decomposed.
_REWRITTEN = _aten("_to_copy") | _aten("lift_fresh_copy") | _aten("lift_fresh")
# Left for leapp.export.real_pairs to cancel against each other.
_PAIRED = set().union(
    *map(_aten, ("complex", "real", "imag", "view_as_real", "view_as_complex", "resolve_conj"))
)


def onnx_unknown_operations(module: fx.GraphModule, opset: int) -> set[torch._ops.OpOverload]:
    """The ATen operations of ``module`` the TorchScript-based exporter cannot translate."""
    return {op for op in _operations(module) if not _onnx_knows(op, opset)}


def _operations(module: fx.GraphModule) -> set[torch._ops.OpOverload]:
    return {
        fx_node.target
        for fx_node in module.graph.nodes
        if fx_node.op == "call_function" and isinstance(fx_node.target, torch._ops.OpOverload)
    }


def _own(op: torch._ops.OpOverload, own: dict[Any, Callable[..., Any]]) -> bool:
    return op in own or op.overloadpacket in own


def _onnx_knows(op: torch._ops.OpOverload, opset: int) -> bool:
    from torch.onnx._internal.torchscript_exporter import registration

    if op.namespace != "aten":
        return False
    return registration.registry.is_registered_op(op._schema.name, opset)


def _decomposition(
    op: torch._ops.OpOverload, own: dict[Any, Callable[..., Any]]
) -> Callable[..., Any] | None:
    if _own(op, own):
        return own.get(op) or own[op.overloadpacket]
    if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd"):
        return op.decompose
    from torch._decomp import decomposition_table

    return decomposition_table.get(op)


def _clean(module: fx.GraphModule) -> None:
    """Constants ``make_fx`` created become buffers, which the exporter stores as initializers;
    ``index_put`` index lists are spelled out (:mod:`leapp.export.index_lists`); operations
    whose results are unused go."""
    from leapp.export.index_lists import spell_out_index_lists

    graph = module.graph
    buffers = dict(module.named_buffers())
    for fx_node in graph.nodes:
        if fx_node.op == "get_attr" and fx_node.target not in buffers:
            value = getattr(module, fx_node.target)
            if isinstance(value, torch.Tensor):
                delattr(module, fx_node.target)
                module.register_buffer(fx_node.target, value.detach().clone())
    spell_out_index_lists(module)
    for fx_node in list(graph.nodes):
        _non_negative_dims(fx_node)
        if fx_node.target in _REWRITTEN:
            _rewrite(graph, fx_node)
    graph.eliminate_dead_code()
    module.recompile()


def _rewrite(graph: fx.Graph, fx_node: fx.Node) -> None:
    """``_to_copy`` (dtype conversion) as ``Tensor.to``; ``lift_fresh_copy`` (a constant made
    by ``torch.tensor``) as the constant itself."""
    source = fx_node.args[0]
    if fx_node.target.overloadpacket is torch.ops.aten._to_copy:
        dtype = fx_node.kwargs.get("dtype")
        with graph.inserting_before(fx_node):
            value = (
                graph.call_method("to", (source, dtype))
                if dtype is not None
                else graph.call_method("clone", (source,))
            )
        value.meta = dict(fx_node.meta)
    else:
        value = source
    fx_node.replace_all_uses_with(value)
    graph.erase_node(fx_node)


_DIM_ARGUMENTS = {"permute": (1,), "transpose": (1, 2), "movedim": (1, 2)}


def _non_negative_dims(fx_node: fx.Node) -> None:
    """Write the dimension arguments of permute/transpose/movedim as non-negative numbers: the
    exporter copies negative ones into a Transpose's ``perm``, which ONNX forbids."""
    target = fx_node.target
    if not isinstance(target, torch._ops.OpOverload):
        return
    positions = _DIM_ARGUMENTS.get(target.overloadpacket.__name__)
    source = fx_node.args[0] if fx_node.args else None
    value = source.meta.get("val") if isinstance(source, fx.Node) else None
    if positions is None or not isinstance(value, torch.Tensor):
        return
    rank = max(value.dim(), 1)
    args = list(fx_node.args)
    for position in positions:
        if position < len(args):
            dims = args[position]
            if isinstance(dims, int):
                args[position] = dims % rank
            elif isinstance(dims, (list, tuple)):
                args[position] = type(dims)(d % rank for d in dims)
    fx_node.args = tuple(args)
