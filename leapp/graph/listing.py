"""How graphs are printed: one node per line, aligned, as in the seed document's listing."""

from __future__ import annotations

import operator
from typing import Any

import torch.fx as fx

from leapp.trace.tensors.operation import qualified_name

__all__ = ["format_graph"]


def format_graph(graph: fx.Graph | fx.GraphModule) -> str:
    """Print ``graph`` one node per line, aligned, as in the seed document's listing."""
    if isinstance(graph, fx.GraphModule):
        graph = graph.graph
    nodes = list(graph.nodes)
    width = max((len(n.name) + 1 for n in nodes if n.op != "output"), default=0)
    lines = []
    for node in nodes:
        if node.op == "output":
            lines.append(f"return {_format_arg(node.args[0], bare=True)}")
            continue
        left = f"%{node.name}".ljust(width)
        target = node.target if isinstance(node.target, str) else qualified_name(node.target)
        line = f"{left} = {node.op}[target={target}]"
        if node.op in ("call_function", "call_method", "call_module"):
            line += f"(args = {_format_arg(tuple(node.args))}"
            if node.kwargs:
                line += f", kwargs = {_format_arg(dict(node.kwargs))}"
            line += ")"
        lines.append(line)
    return "\n".join(lines)


def _format_arg(value: Any, bare: bool = False) -> str:
    if isinstance(value, fx.Node):
        return value.name if bare else f"%{value.name}"
    if isinstance(value, tuple):
        items = [_format_arg(v, bare) for v in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if isinstance(value, list):
        return f"[{', '.join(_format_arg(v, bare) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_format_arg(v, bare)}" for k, v in value.items()) + "}"
    if value is operator.getitem:
        return "operator.getitem"
    return repr(value)
