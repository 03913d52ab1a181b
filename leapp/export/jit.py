"""TorchScript backend: ``torch.jit.script`` the node's graph and save ``<node>.pt``.

The artifact is loaded with plain ``torch.jit.load(path)`` (no leapp needed) and called with the
input tensors in port order; its ``forward`` arguments carry the port names.

The plain scripted module is saved: ``torch.jit.freeze`` and ``optimize_for_inference`` give
identical results and load and run no faster (figures: docs, explanation, performance), and a
frozen module no longer exposes its parameters to users who inspect it (the runtime freezes
its own copy for the static runtime: :mod:`leapp.run.static_runtime`). Scripting skips its
attempt to script the module's ``torch.fx.Graph`` (:func:`_script`).
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import torch
import torch.fx

from leapp.errors import ExportError
from leapp.export.artifact import Artifact
from leapp.export.failure import failing_operation, summarize_error
from leapp.export.phase_times import PhaseTimes

logger = logging.getLogger(__name__)

# Scripting any GraphModule triggers this warning from TorchScript's attribute checker; it is
# about GraphModule.__init__, not about the user's graph, so it is dropped. Other warnings
# (TorchScript's deprecation notice among them) are logged at debug level.
_GRAPH_MODULE_WARNING = "The TorchScript type system doesn't support instance-level annotations"


def export(
    graph_module: torch.fx.GraphModule,
    example_inputs: tuple[torch.Tensor, ...],
    *,
    node: str,
    input_names: tuple[str, ...],
    output_names: tuple[str, ...],
    directory: Path,
    mode: str = "auto",
) -> Artifact:
    """Compile ``graph_module`` to TorchScript and save it as ``<directory>/<node>.pt``.

    ``mode`` ``"script"`` only scripts and ``"trace"`` only traces (NVIDIA LEAPP's
    ``"jit-script"`` / ``"jit-trace"``); ``"auto"`` (``"jit"``) scripts with a trace fallback:
    ``torch.jit.script`` is tried first. Some Python-level torch functions that fx records
    under their own name cannot be scripted (``torch.functional.norm(x, p="fro", dim=1)`` has
    no TorchScript overload taking ``p="fro"``); the graph is then traced with
    ``example_inputs`` instead. Tracing is exact here: the fx graph is straight-line code with
    static shapes, so the trace records every one of its operations (as the ATen ops they
    dispatch to). ``graph_module`` comes from
    :func:`leapp.export.plain_graph.prepare_graph_module`, so its arguments are already named
    after the input ports; both paths keep those names.
    """
    del output_names
    timings = PhaseTimes()
    file_name = f"{node}.pt"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", message=_GRAPH_MODULE_WARNING)
        with timings("torch.jit"):
            compiled, how = _compile(graph_module, example_inputs, node, input_names, mode)
        try:
            with timings("save"):
                torch.jit.save(compiled, str(directory / file_name))
        except OSError as e:
            raise ExportError(
                f"node {node!r}: cannot write {directory / file_name}: {e}; check the export "
                "folder"
            ) from e
    for warning in caught:
        logger.debug("node %s: TorchScript warned: %s", node, warning.message)
    logger.debug("node %s: torch.jit.%s (%s)", node, how, timings)
    return Artifact(model_path=file_name, backend="jit", timings=timings.seconds)


def _compile(
    graph_module: torch.fx.GraphModule,
    example_inputs: tuple[torch.Tensor, ...],
    node: str,
    input_names: tuple[str, ...],
    mode: str,
) -> tuple[torch.jit.ScriptModule, str]:
    script_error = None
    if mode != "trace":
        try:
            return _script(graph_module), "script"
        except Exception as e:
            if mode == "script":
                raise ExportError(
                    f"node {node!r} (inputs {list(input_names)}) cannot be scripted with "
                    f"torch.jit.script: {summarize_error(e)}. Export it with "
                    "export_with='jit-trace' or 'jit' (script, falling back to tracing), or "
                    "'onnx'"
                ) from e
            script_error = e
        logger.debug("node %s: torch.jit.script failed (%s); tracing", node, script_error)
    try:
        traced = torch.jit.trace(graph_module, example_inputs, check_trace=False)
    except Exception as e:
        scripted = (
            ""
            if script_error is None
            else (f"scripting failed ({summarize_error(script_error)}) and so did ")
        )
        raise ExportError(
            f"node {node!r} (inputs {list(input_names)}) cannot be compiled to TorchScript"
            f"{failing_operation(graph_module, e)}: {scripted}tracing failed "
            f"({summarize_error(e)}). Export this node with export_with='onnx' or 'pt2' instead"
        ) from e
    return traced, "trace"


def _script(graph_module: torch.fx.GraphModule) -> torch.jit.ScriptModule:
    """``torch.jit.script(graph_module)`` without its attempt to compile the module's
    ``torch.fx.Graph`` (the ``_graph`` attribute) as a TorchScript class: that attempt reads
    the source of every method of ``Graph``, costs most of the scripting of a small node, and
    always fails, which leaves the attribute out of the scripted module.
    Declared ignored for this one call, it is left out without the attempt."""
    ignored = list(getattr(graph_module, "__jit_ignored_attributes__", ()))
    if isinstance(getattr(graph_module, "_graph", None), torch.fx.Graph):
        ignored.append("_graph")
    graph_module.__jit_ignored_attributes__ = ignored  # on the instance: no other module sees it
    try:
        return torch.jit.script(graph_module)
    finally:
        del graph_module.__jit_ignored_attributes__
