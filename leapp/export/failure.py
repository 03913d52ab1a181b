"""An exporter's failure in the user's terms: its message in one sentence, and the recorded
operation it names (with the user's file and line), for the :class:`~leapp.errors.ExportError`
each backend raises."""

from __future__ import annotations

import re

import torch.fx

from leapp.graph.aten_graph import describe_node, operation_name


def summarize_error(error: BaseException, lines: int = 3) -> str:
    """The first few non-empty lines of ``error``'s message, for one-sentence error reports."""
    text = [line.strip() for line in str(error).splitlines() if line.strip()]
    return " ".join(text[:lines]) if text else type(error).__name__


def failing_operation(graph_module: torch.fx.GraphModule, error: BaseException) -> str:
    """``" at <operation> (<file>:<line>)"`` for the recorded operation an exporter's ``error``
    names (``Exporting the operator 'aten::sinh'``, ``While executing %sinh``), or ``""``."""
    text = str(error)
    executing = re.search(r"While executing %(\w+)", text)
    operator = re.search(r"operator '(?:aten|prim)::(\w+)'", text)
    candidates = []
    for fx_node in graph_module.graph.nodes:
        if fx_node.op not in ("call_function", "call_method", "call_module"):
            continue
        if executing and fx_node.name == executing.group(1):
            return f" at {describe_node(fx_node)}"
        if operator:
            name = operation_name(fx_node).rsplit(".", 1)[-1].removesuffix("_")
            wanted = operator.group(1).removeprefix("linalg_").removeprefix("special_")
            if name == operator.group(1) or name == wanted:
                candidates.append(fx_node)
    if not candidates:
        return ""
    return " at " + "; ".join(describe_node(fx_node) for fx_node in candidates[:3])
