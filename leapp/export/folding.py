"""Folding: what a node's graph computes from inputs without elements, as constants.

An empty tensor has no values, so with fixed shapes nothing computed from empty inputs alone
depends on what is fed: :func:`fold_empty_inputs` computes it once and stores the results as
constants. The ONNX exporter then never translates operations on empty tensors (torch 2.13's
exporter kills the process with SIGFPE on ``unfold`` of an empty batch); the empty input stays
a port of the model, declared unused.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.fx

__all__ = ["fold_empty_inputs"]


def fold_empty_inputs(
    graph_module: torch.fx.GraphModule, example_inputs: tuple[torch.Tensor, ...]
) -> torch.fx.GraphModule:
    """A copy of ``graph_module`` in which everything computed from an input without elements
    is a constant.

    An empty tensor has no values, so with fixed shapes nothing computed from it alone depends
    on what is fed: it is computed here once, and the input is declared unused. The exporter
    would otherwise translate operations on empty tensors, and some of them crash the process
    (``unfold`` of an empty batch raises SIGFPE in torch 2.13's exporter)."""
    if all(example.numel() for example in example_inputs):
        return graph_module
    module = torch.fx.GraphModule(graph_module, copy.deepcopy(graph_module.graph))
    graph = module.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    known: dict[torch.fx.Node, Any] = {}  # node -> its constant value
    for placeholder, example in zip(placeholders, example_inputs, strict=True):
        if not example.numel():
            known[placeholder] = torch.empty(example.shape, dtype=example.dtype)
    for fx_node in graph.nodes:
        inputs = fx_node.all_input_nodes
        if fx_node.op == "get_attr":
            known[fx_node] = _fetch(module, fx_node.target)
        elif (
            fx_node.op in ("call_function", "call_method")
            and inputs
            and set(inputs) <= known.keys()
        ):
            known[fx_node] = _evaluate(fx_node, known)
    for index, fx_node in enumerate(list(known)):
        value = known[fx_node]
        outside = [user for user in fx_node.users if user not in known or user.op == "output"]
        if fx_node.op == "get_attr" or not outside or not isinstance(value, torch.Tensor):
            continue
        name = f"_folded{index}"
        module.register_buffer(name, value.detach().clone())
        with graph.inserting_before(fx_node if fx_node.op != "placeholder" else outside[0]):
            constant = graph.get_attr(name)
        fx_node.replace_all_uses_with(constant)
    graph.eliminate_dead_code()
    module.recompile()
    return module


def _fetch(module: torch.nn.Module, target: str) -> Any:
    value: Any = module
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _evaluate(fx_node: torch.fx.Node, known: dict[torch.fx.Node, Any]) -> Any:
    args = torch.fx.node.map_arg(fx_node.args, known.__getitem__)
    kwargs = torch.fx.node.map_arg(fx_node.kwargs, known.__getitem__)
    with torch.no_grad():
        if fx_node.op == "call_method":
            return getattr(args[0], fx_node.target)(*args[1:], **kwargs)
        return fx_node.target(*args, **kwargs)
