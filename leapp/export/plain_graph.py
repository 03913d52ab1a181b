"""The node's graph as every backend can compile it: :func:`prepare_graph_module` copies a
recorded graph with plain tensor constants, usable argument names and one output per port."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx

from leapp.errors import ExportError

logger = logging.getLogger(__name__)


def prepare_graph_module(
    graph_module: torch.fx.GraphModule,
    node: str,
    input_names: Sequence[str],
    output_names: Sequence[str],
) -> torch.fx.GraphModule:
    """A plain copy of ``graph_module`` that every backend can compile.

    The copy holds only plain ``torch.Tensor`` constants (no tensor subclasses, so no leapp
    class ends up in an artifact), its placeholders are valid Python argument names, and its
    output is one node or a tuple of nodes, matching ``output_names``. The caller's module is
    left untouched.
    """
    old_placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    if len(old_placeholders) != len(input_names):
        raise ExportError(
            f"node {node!r}: the graph has {len(old_placeholders)} inputs but "
            f"{len(input_names)} input ports {list(input_names)} were given; they must match "
            "one to one"
        )
    graph = torch.fx.Graph()
    value_map = {
        old: _copy_placeholder(graph, old, port)
        for old, port in zip(old_placeholders, input_names, strict=True)
    }
    output = graph.graph_copy(graph_module.graph, value_map)
    results = _output_nodes(output, node, output_names)
    graph.output(results[0] if len(results) == 1 else tuple(results))
    root: dict[str, Any] = {}
    for fx_node in graph.nodes:
        if fx_node.op in ("get_attr", "call_module"):
            root[fx_node.target] = _plain_attribute(_fetch(graph_module, fx_node.target))
    return torch.fx.GraphModule(root, graph)


def plain_tensor(value: torch.Tensor) -> torch.Tensor:
    """``value`` as a plain ``torch.Tensor`` sharing its storage (drops tensor subclasses)."""
    if type(value) is torch.Tensor:
        return value
    with torch._C.DisableTorchFunctionSubclass():
        return value.as_subclass(torch.Tensor).detach()


def _output_nodes(output: Any, node: str, output_names: Sequence[str]) -> list[torch.fx.Node]:
    values = list(output) if isinstance(output, (tuple, list)) else [output]
    if len(values) != len(output_names):
        raise ExportError(
            f"node {node!r}: the graph returns {len(values)} values but {len(output_names)} "
            f"output ports {list(output_names)} were given; they must match one to one"
        )
    for name, value in zip(output_names, values, strict=True):
        if not isinstance(value, torch.fx.Node):
            raise ExportError(
                f"node {node!r}: output {name!r} is the Python value {value!r}, not a tensor; "
                "publish tensors only (wrap constants with torch.tensor(...))"
            )
    return values


def _copy_placeholder(graph: torch.fx.Graph, old: torch.fx.Node, port: str) -> torch.fx.Node:
    """Copy placeholder ``old`` into ``graph`` as the argument named after input ``port``.

    fx writes ``def forward(self, <target>, ...)``, so a port name that is not an identifier, is
    a keyword, shadows a global of the generated code (``torch``) or is ``self`` would break the
    module. The port name is kept whenever it is usable; otherwise fx's safe unique node name
    (``class_1``, ``joint_pos`` for ``joint-pos``) becomes the argument name.
    """
    candidate = "self_" if port == "self" else port
    new = graph.placeholder(candidate, type_expr=old.type)
    new.meta = dict(old.meta)
    if new.name != candidate:
        logger.debug("input %r is named %r inside the artifact", port, new.name)
        new.target = new.name
    return new


def _fetch(module: torch.nn.Module, qualified_name: str) -> Any:
    value: Any = module
    for part in str(qualified_name).split("."):
        value = getattr(value, part)
    return value


def _plain_attribute(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
        return plain_tensor(value)
    return value
