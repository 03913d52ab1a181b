"""pt2 backend: ``torch.export.export`` the node's graph and save ``<node>.pt2``.

The artifact loads with ``torch.export.load(path).module()`` and needs a compatible torch, so
the torch version that wrote it is recorded as ``torch_version``. ``torch.export`` is slow to
warm up for its first graph in a process; the exporter modules are only imported when a pt2
node is exported.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch
import torch.fx

from leapp.errors import ExportError
from leapp.export.artifact import Artifact
from leapp.export.failure import failing_operation, summarize_error

logger = logging.getLogger(__name__)


def export(
    graph_module: torch.fx.GraphModule,
    example_inputs: tuple[torch.Tensor, ...],
    *,
    node: str,
    input_names: tuple[str, ...],
    output_names: tuple[str, ...],
    directory: Path,
) -> Artifact:
    """Export ``graph_module`` with ``example_inputs`` (static shapes) to ``<node>.pt2``."""
    del output_names
    from torch.export import export as export_program
    from torch.export import save as save_program

    file_name = f"{node}.pt2"
    started = time.perf_counter()
    try:
        # An inference artifact, traced with autograd off: with it on, a grad-mode switch
        # inside torch.export's own passes could be recorded as a set_grad_enabled region,
        # which torch.export.load then refuses (seen now and then in the op sweep's workers).
        with torch.no_grad():
            program = export_program(graph_module, example_inputs)
    except Exception as e:
        raise ExportError(
            f"node {node!r} (inputs {list(input_names)}) cannot be exported with torch.export"
            f"{failing_operation(graph_module, e)}: {summarize_error(e)}. Export this node with "
            "export_with='jit' or 'onnx' instead"
        ) from e
    exported_at = time.perf_counter()
    try:
        save_program(program, str(directory / file_name))
    except OSError as e:
        raise ExportError(
            f"node {node!r}: cannot write {directory / file_name}: {e}; check the export folder"
        ) from e
    logger.debug(
        "node %s: torch.export.export %.3f s, save %.3f s",
        node,
        exported_at - started,
        time.perf_counter() - exported_at,
    )
    return Artifact(model_path=file_name, backend="pt2", torch_version=torch.__version__)
