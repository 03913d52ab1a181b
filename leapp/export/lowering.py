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
   end in;
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
) -> fx.GraphModule:
    """``graph_module`` as ATen operations, with every operation the TorchScript-based ONNX
    exporter has no translation for at ``opset`` decomposed where a decomposition exists.

    The result computes the same values on every input (decompositions are exact up to
    floating-point rounding); the caller validates the artifact on the traced examples.

    Raises:
        ExportError: re-tracing failed (an operation reads its inputs' values, ...).
    """
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
            pre_dispatch=True,
        )
        unknown = onnx_unknown_operations(lowered, opset) - set(table)
        added = {op: fn for op in unknown if (fn := _decomposition(op, ONNX_DECOMPOSITIONS))}
        if not added:
            break
        logger.debug("node %s: decomposing %s for ONNX", node, sorted(map(str, added)))
        table.update(added)
    _clean(lowered)
    logger.debug("node %s: lowered for ONNX in %.3f s", node, time.perf_counter() - started)
    return lowered


def onnx_unknown_operations(module: fx.GraphModule, opset: int) -> set[torch._ops.OpOverload]:
    """The ATen operations of ``module`` the TorchScript-based exporter cannot translate."""
    return {
        fx_node.target
        for fx_node in module.graph.nodes
        if fx_node.op == "call_function"
        and isinstance(fx_node.target, torch._ops.OpOverload)
        and not _onnx_knows(fx_node.target, opset)
    }


def _onnx_knows(op: torch._ops.OpOverload, opset: int) -> bool:
    from torch.onnx._internal.torchscript_exporter import registration

    if op.namespace != "aten":
        return False
    return registration.registry.is_registered_op(op._schema.name, opset)


def _decomposition(
    op: torch._ops.OpOverload, own: dict[Any, Callable[..., Any]]
) -> Callable[..., Any] | None:
    if op in own:
        return own[op]
    if op.overloadpacket in own:
        return own[op.overloadpacket]
    if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd"):
        return op.decompose
    from torch._decomp import decomposition_table

    return decomposition_table.get(op)


def _clean(module: fx.GraphModule) -> None:
    """Constants ``make_fx`` created become buffers, which the exporter stores as initializers;
    operations whose results are unused go."""
    graph = module.graph
    buffers = dict(module.named_buffers())
    for fx_node in graph.nodes:
        if fx_node.op == "get_attr" and fx_node.target not in buffers:
            value = getattr(module, fx_node.target)
            if isinstance(value, torch.Tensor):
                delattr(module, fx_node.target)
                module.register_buffer(fx_node.target, value.detach().clone())
    graph.eliminate_dead_code()
    module.recompile()
