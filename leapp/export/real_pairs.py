"""Real pairs: the complex values of a node's graph as (real, imaginary) pairs for ONNX.

ONNX Runtime computes no complex numbers. A complex output of a node is written as a real
tensor with a last dimension of 2 (``torch.view_as_real``'s layout, the one torch's own ONNX
exporter uses); leapp's runner turns it back into the complex port the spec lists.

:func:`complex_outputs_as_pairs` appends ``view_as_real`` to every complex output of the
recorded graph; after lowering (where transforms and conversions are built from real parts by
``torch.complex``), :func:`fold_pairs` cancels each ``view_as_real`` / ``real`` / ``imag``
against the ``complex`` / ``view_as_complex`` / conversion that made the value, so no complex
tensor is left for the exporter.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
import torch.fx as fx

__all__ = ["complex_outputs_as_pairs", "fold_pairs"]

aten = torch.ops.aten


def complex_outputs_as_pairs(
    graph_module: fx.GraphModule, example_inputs: Sequence[torch.Tensor]
) -> fx.GraphModule:
    """``graph_module`` with each complex output replaced by its real pairs (or itself)."""
    with torch.no_grad():
        results = graph_module(*[example.clone() for example in example_inputs])
    single = isinstance(results, torch.Tensor)
    flags = [r.is_complex() for r in ([results] if single else results)]
    if not any(flags):
        return graph_module
    module = fx.GraphModule(graph_module, copy.deepcopy(graph_module.graph))
    output = next(n for n in module.graph.nodes if n.op == "output")
    values = [output.args[0]] if single else list(output.args[0])
    with module.graph.inserting_before(output):
        values = [
            module.graph.call_function(
                torch.view_as_real, (module.graph.call_function(torch.resolve_conj, (value,)),)
            )
            if flag
            else value
            for value, flag in zip(values, flags, strict=True)
        ]
    output.args = (values[0] if single else tuple(values),)
    module.recompile()
    return module


def _is(node: object, *packets) -> bool:
    return (
        isinstance(node, fx.Node)
        and isinstance(node.target, torch._ops.OpOverload)
        and node.target.overloadpacket in packets
    )


def _complex_conversion(node: object) -> bool:
    """``x.to(complex dtype)`` of a real ``x`` (as lowering writes it)."""
    if not isinstance(node, fx.Node):
        return False
    dtype = node.kwargs.get("dtype", node.args[1] if len(node.args) > 1 else None)
    conversion = (node.op == "call_method" and node.target == "to") or _is(
        node, aten.to, aten._to_copy
    )
    return conversion and isinstance(dtype, torch.dtype) and dtype.is_complex


def fold_pairs(module: fx.GraphModule) -> fx.GraphModule:
    """Cancel pair extractions against the complex constructions they read (in place)."""
    graph = module.graph
    for node in list(graph.nodes):
        source = node.args[0] if node.args else None
        if _is(source, aten.resolve_conj) and _is(node, aten.view_as_real):
            source = source.args[0]  # a materialized conjugation holds the same values
        replacement = None
        with graph.inserting_before(node):
            if _is(node, aten.view_as_real) and _is(source, aten.complex):
                replacement = graph.call_function(torch.stack, (list(source.args), -1))
            elif _is(node, aten.view_as_real) and _is(source, aten.view_as_complex):
                replacement = source.args[0]
            elif _is(node, aten.view_as_real) and _complex_conversion(source):
                dtype = source.kwargs.get(
                    "dtype", source.args[1] if len(source.args) > 1 else None
                )
                part = torch.float64 if dtype == torch.complex128 else torch.float32
                real = graph.call_method("to", (source.args[0], part))
                zeros = graph.call_function(torch.zeros_like, (real,))
                replacement = graph.call_function(torch.stack, ([real, zeros], -1))
            elif _is(node, aten.real, aten.imag) and _is(source, aten.complex):
                replacement = source.args[0 if _is(node, aten.real) else 1]
        if replacement is not None:
            node.replace_all_uses_with(replacement)
            graph.erase_node(node)
    graph.eliminate_dead_code()
    module.recompile()
    return module
