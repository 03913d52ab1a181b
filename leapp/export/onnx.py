"""ONNX backend: export the node's graph to ``<node>.onnx`` (opset 20).

Exporter choice: the TorchScript-based exporter (``torch.onnx.export(..., dynamo=False)``)
pays its setup (registering its op table, importing onnx) once per process and is quick for
every later graph; the ``torch.export``-based exporter needs the onnxscript package (not a
dependency of leapp) and is much slower for the same graph (figures: docs, explanation,
performance). Our graphs are static and already pure, which is exactly what the
TorchScript-based exporter handles well, so it is used.
Its highest supported opset is 20 (the version NVIDIA's LEAPP writes as well); higher requests
fall back to 20 with a warning, so 20 is asked for explicitly.

The exporter's deprecation warning is silenced here and logged at debug level. ``onnx.checker``
is not run (it costs time and the exporter's output is valid); ``validate_export`` re-runs every
artifact in ONNX Runtime on the traced samples instead, which is the stronger check.

A complex output is written as real pairs, a last dimension of 2 (:mod:`leapp.export.real_pairs`);
leapp's runner reads it back as the complex port the spec lists.

ONNX forbids a graph input and output with the same name. When a port is both an input and an
output of the node (state such as ``h`` fed back on the next tick), the ONNX names are
``<port>_in`` and ``<port>_out``, as NVIDIA's LEAPP writes them (:mod:`leapp.graph.port_names`;
``compile_graph`` names the spec's ports so too).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import torch.fx

from leapp.errors import ExportError
from leapp.export.agreement import onnx_agreement
from leapp.export.artifact import Artifact
from leapp.export.exporter_scope import onnx_exporter_scope
from leapp.export.failure import failing_operation, summarize_error
from leapp.export.phase_times import PhaseTimes
from leapp.graph.port_names import onnx_port_names

logger = logging.getLogger(__name__)

OPSET_VERSION = 20
"""The opset every ONNX artifact is written with (the TorchScript-based exporter's maximum)."""


def export(
    graph_module: torch.fx.GraphModule,
    example_inputs: tuple[torch.Tensor, ...],
    *,
    node: str,
    input_names: tuple[str, ...],
    output_names: tuple[str, ...],
    directory: Path,
) -> Artifact:
    """Export ``graph_module`` run on ``example_inputs`` as ``<directory>/<node>.onnx``.

    Graph inputs and outputs are named after the ports (see the module docstring for the one
    exception). Shapes are static: those of ``example_inputs``. A graph the exporter refuses
    as it is gets lowered (:func:`leapp.export.lowering.onnx_lowered`) and exported again.
    Every input port is an input of the model, also one whose values no output depends on.
    """
    path = directory / f"{node}.onnx"
    onnx_inputs, onnx_outputs = onnx_port_names(input_names, output_names)
    timings = PhaseTimes()
    with timings("prepare"):
        graph_module = _prepared(graph_module, example_inputs, node)
    refusal: _RefusedError | ExportError | None = None
    first_disagreement = None
    for how, build in _attempts(graph_module, example_inputs, node):
        try:
            with timings("lowering") if how != "as recorded" else contextlib.nullcontext():
                module = build()
            with timings("torch.onnx.export"):
                _write(module, example_inputs, path, onnx_inputs, onnx_outputs, node)
        except Exception as e:  # a refused or failed attempt: try the next one, never crash
            refused = e if isinstance(e, (_RefusedError, ExportError)) else _RefusedError(e)
            logger.debug("node %s: no ONNX model %s: %s", node, how, refused)
            if refusal is None or isinstance(refused, ExportError):
                refusal = refused
            continue
        with timings("agreement"):
            agreement = onnx_agreement(path, graph_module, example_inputs, onnx_inputs)
        if agreement.problem is None:
            break
        logger.debug(
            "node %s: the ONNX model written %s is wrong: %s", node, how, agreement.problem
        )
        first_disagreement = first_disagreement or (how, module, agreement.problem)
    else:
        if first_disagreement is None:
            if isinstance(refusal, ExportError):
                raise refusal
            raise _export_error(graph_module, node, input_names, refusal)
        path.unlink(missing_ok=True)  # never leave a model that is known to be wrong
        raise _wrong_model_error(node, *first_disagreement, example_inputs)
    with timings("inputs"):
        _declare_inputs(path, onnx_inputs, example_inputs, agreement.inputs)
    logger.debug("node %s: ONNX model written %s (%s)", node, how, timings)
    return Artifact(
        model_path=path.name,
        backend="onnx",
        opset_version=OPSET_VERSION,
        timings=timings.seconds,
    )


def _prepared(
    graph_module: torch.fx.GraphModule, example_inputs: tuple[torch.Tensor, ...], node: str
) -> torch.fx.GraphModule:
    """Inputs without elements folded to constants, complex outputs as real pairs (each left
    out, with a debug note, where it fails: the exporter then reports the problem)."""
    from leapp.export.folding import fold_empty_inputs
    from leapp.export.real_pairs import complex_outputs_as_pairs

    for transform in (fold_empty_inputs, complex_outputs_as_pairs):
        try:
            graph_module = transform(graph_module, example_inputs)
        except Exception as e:
            logger.debug("node %s: %s not applied: %s", node, transform.__name__, e)
    return graph_module


def _attempts(
    graph_module: torch.fx.GraphModule, example_inputs: tuple[torch.Tensor, ...], node: str
) -> list[tuple[str, Callable[[], torch.fx.GraphModule]]]:
    """The graphs to try in turn, each built only when tried: as recorded; lowered with the
    operations the exporter does not know decomposed; lowered with every operation decomposed
    that can be (the exporter writes some that it knows wrongly for some arguments)."""

    def lowered(fully: bool) -> Callable[[], torch.fx.GraphModule]:
        def build() -> torch.fx.GraphModule:  # the lowering modules only when lowering
            from leapp.export.lowering import onnx_lowered
            from leapp.export.real_pairs import fold_pairs

            return fold_pairs(
                onnx_lowered(
                    graph_module, example_inputs, node=node, opset=OPSET_VERSION, fully=fully
                )
            )

        return build

    wrong = _written_wrongly(graph_module)
    if wrong:  # the traced examples may not show it: go straight to the decomposition
        logger.debug("node %s: %s; lowering it fully for ONNX", node, wrong)
        return [("fully lowered", lowered(True))]
    return [
        ("as recorded", lambda: graph_module),
        ("lowered", lowered(False)),
        ("fully lowered", lowered(True)),
    ]


_SOFTPLUS = {torch._C._nn.softplus, torch.nn.functional.softplus, torch.ops.aten.softplus.default}


def _written_wrongly(graph_module: torch.fx.GraphModule) -> str | None:
    """Why the exporter would write a call of ``graph_module`` wrongly for some inputs while
    agreeing on others (the traced examples), or None: ONNX's Softplus has no threshold, so a
    ``softplus`` whose threshold is low enough to matter becomes ``log1p(exp(beta x)) / beta``
    everywhere."""
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target in _SOFTPLUS:
            threshold = node.kwargs.get("threshold", node.args[2] if len(node.args) > 2 else 20)
            if not isinstance(threshold, (int, float)) or threshold < 20:
                return f"softplus with threshold {threshold} (ONNX's Softplus has none)"
    return None


class _RefusedError(Exception):
    """The exporter raised ``error`` for this graph."""

    def __init__(self, error: Exception):
        super().__init__(summarize_error(error))
        self.error = error


def _write(
    module: torch.fx.GraphModule,
    example_inputs: tuple[torch.Tensor, ...],
    path: Path,
    onnx_inputs: tuple[str, ...],
    onnx_outputs: tuple[str, ...],
    node: str,
) -> None:
    with warnings.catch_warnings(record=True) as caught, onnx_exporter_scope(logger):
        warnings.simplefilter("always")
        try:
            torch.onnx.export(
                module,
                example_inputs,
                str(path),
                input_names=list(onnx_inputs),
                output_names=list(onnx_outputs),
                opset_version=OPSET_VERSION,
                do_constant_folding=True,
                dynamo=False,
            )
        except OSError as e:
            raise ExportError(
                f"node {node!r}: cannot write {path}: {e}; check the export folder"
            ) from e
        except Exception as e:
            raise _RefusedError(e) from e
    for warning in caught:
        logger.debug("node %s: torch.onnx.export warned: %s", node, warning.message)


def _wrong_model_error(
    node: str,
    how: str,
    module: torch.fx.GraphModule,
    problem: str,
    example_inputs: tuple[torch.Tensor, ...],
) -> ExportError:
    """No ONNX model of the node reproduces its traced outputs: say which operation breaks."""
    from leapp.export.breakage import first_broken_operation
    from leapp.graph.aten_graph import describe_node

    broken = first_broken_operation(module, example_inputs)
    where = (
        f"; the first operation that goes wrong is {describe_node(broken)}"
        if broken is not None
        else "; no single operation could be singled out"
    )
    return ExportError(
        f"node {node!r}: no ONNX model of it reproduces its traced outputs (the first, "
        f"written {how}: {problem}){where}. Export this node with export_with='jit' or "
        "'pt2' instead (both run the graph as traced), or compute that operation another way"
    )


def _export_error(
    graph_module: torch.fx.GraphModule,
    node: str,
    input_names: tuple[str, ...],
    refusal: _RefusedError | None,
) -> ExportError:
    where = failing_operation(graph_module, refusal.error)
    return ExportError(
        f"node {node!r} (inputs {list(input_names)}) cannot be exported to ONNX{where}: "
        f"{refusal}. Export this node with export_with='jit' or 'pt2' instead, or compute "
        "that operation another way"
    )


# ONNX element types of the dtypes a port can have.
_ELEMENT_TYPES = {
    torch.float32: 1,
    torch.uint8: 2,
    torch.int8: 3,
    torch.uint16: 4,
    torch.int16: 5,
    torch.int32: 6,
    torch.int64: 7,
    torch.bool: 9,
    torch.float16: 10,
    torch.float64: 11,
    torch.uint32: 12,
    torch.uint64: 13,
    torch.bfloat16: 16,
}


def _declare_inputs(
    path: Path,
    onnx_inputs: tuple[str, ...],
    example_inputs: tuple[torch.Tensor, ...],
    listed: tuple[str, ...] | None,
) -> None:
    """Give the model every input port, in port order.

    The exporter drops an input no output reads values from (``x.new_zeros(...)`` only reads
    ``x``'s shape), but the spec's ports are the artifact's contract: such an input is declared
    again, unused, with its dtype and shape (ONNX Runtime accepts and ignores it). ``listed``
    are the model's inputs as ONNX Runtime listed them, when known: with every port among them
    the file is not even read.
    """
    if listed is not None and all(name in listed for name in onnx_inputs):
        return
    import onnx

    model = onnx.load(str(path))
    present = {value.name: value for value in model.graph.input}
    if all(name in present for name in onnx_inputs):
        return
    declared = []
    for name, example in zip(onnx_inputs, example_inputs, strict=True):
        if name in present:
            declared.append(present.pop(name))
            continue
        logger.debug("%s: input %r is unused; declared", path.name, name)
        declared.append(
            onnx.helper.make_tensor_value_info(
                name, _ELEMENT_TYPES.get(example.dtype, 0), list(example.shape)
            )
        )
    declared.extend(present.values())
    del model.graph.input[:]
    model.graph.input.extend(declared)
    onnx.save(model, str(path))
