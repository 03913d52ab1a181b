"""Breakage: the first recorded operation an ONNX model of a node gets wrong.

When no ONNX model of a node reproduces its traced outputs (ONNX Runtime refuses to load the
written file, or computes other values), the ONNX backend fails with an ``ExportError`` that
names the operation to change or the backend to use instead. :func:`first_broken_operation`
finds it by bisection over the node's operations: a graph returning the values of the first
``m`` operations is exported and run in ONNX Runtime against the graph run eagerly; the
smallest ``m`` that goes wrong ends with the culprit. It costs a handful of exports of prefixes
of the graph (milliseconds each for a policy), and only runs on the way to that error.
"""

from __future__ import annotations

import logging
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.fx as fx

__all__ = ["first_broken_operation"]

logger = logging.getLogger(__name__)

_OPERATIONS = ("call_function", "call_method", "call_module")


def first_broken_operation(
    module: fx.GraphModule, example_inputs: Sequence[torch.Tensor]
) -> fx.Node | None:
    """The first operation of ``module`` whose value an ONNX model of the graph up to it does
    not reproduce on ``example_inputs``, or None when every prefix exports correctly."""
    values = _eager_values(module, example_inputs)
    if values is None:
        return None
    candidates = [n for n in module.graph.nodes if n.op in _OPERATIONS and _checkable(values[n])]
    if not candidates:
        return None
    with tempfile.TemporaryDirectory(prefix="leapp-breakage-") as folder:
        path = Path(folder) / "prefix.onnx"
        if _prefix_agrees(module, candidates, example_inputs, values, path):
            return None  # only the whole graph goes wrong (an exporter choice): not located
        low, high = 0, len(candidates)  # prefix low agrees (0: nothing), prefix high does not
        while high - low > 1:
            middle = (low + high) // 2
            if _prefix_agrees(module, candidates[:middle], example_inputs, values, path):
                low = middle
            else:
                high = middle
    return candidates[high - 1]


def _eager_values(module: fx.GraphModule, example_inputs) -> dict[fx.Node, object] | None:
    values: dict[fx.Node, object] = {}

    class Recorder(fx.Interpreter):
        def run_node(self, n: fx.Node) -> object:
            result = super().run_node(n)
            values[n] = result
            return result

    try:
        with torch.no_grad():
            Recorder(module).run(*[example.clone() for example in example_inputs])
    except Exception as e:
        logger.debug("breakage: the graph does not run eagerly: %s", e)
        return None
    return values


def _checkable(value: object) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and not value.is_complex()
        and value.dtype != torch.bfloat16
        and value.numel() > 0
    )


def _prefix_agrees(module, nodes, example_inputs, values, path: Path) -> bool:
    """Whether an ONNX model returning the values of ``nodes`` reproduces them."""
    from leapp.export.agreement import onnx_agreement
    from leapp.export.exporter_scope import onnx_exporter_scope

    graph = fx.Graph()
    mapping: dict[fx.Node, fx.Node] = {}
    last = nodes[-1] if nodes else None
    for n in module.graph.nodes:
        if n.op == "output":
            break
        mapping[n] = graph.node_copy(n, lambda x: mapping[x])
        if n is last:
            break
    if not nodes:
        return True
    graph.output(tuple(mapping[n] for n in nodes))
    prefix = fx.GraphModule(module, graph)
    names = [f"input{i}" for i in range(len(example_inputs))]
    try:
        with warnings.catch_warnings(), onnx_exporter_scope(logger):
            warnings.simplefilter("ignore")
            torch.onnx.export(
                prefix,
                tuple(example_inputs),
                str(path),
                input_names=names,
                opset_version=20,
                do_constant_folding=True,
                dynamo=False,
            )
    except Exception as e:
        logger.debug("breakage: a prefix of %d operations does not export: %s", len(nodes), e)
        return False
    return onnx_agreement(path, prefix, example_inputs, names).problem is None
