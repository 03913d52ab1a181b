"""One node's export: :func:`export_node` checks its arguments, picks the backend (built-in,
NVIDIA LEAPP's alias, or the user's own file) and returns the :class:`Artifact` it wrote.

The backend modules import only :mod:`leapp.export.artifact` and the other shared pieces, never
this module, so the package's modules form no import circle. Each backend imports its exporter
(``torch.export``, the ``onnx`` package) when a node asks for it, so exporting a pipeline
without pt2 nodes never pays for ``torch.export``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch
import torch.fx

from leapp.errors import ExportError
from leapp.export import custom, jit, onnx, pt2
from leapp.export.artifact import ALIASES, BACKENDS, Artifact
from leapp.export.plain_graph import plain_tensor, prepare_graph_module
from leapp.export.warp import export_segments

logger = logging.getLogger(__name__)

# The module writing each built-in backend's artifact: ``module.export(graph_module, inputs,
# node=..., input_names=..., output_names=..., directory=..., [mode=...])``.
_WRITERS = {"jit": jit, "onnx": onnx, "pt2": pt2}


def export_node(
    graph_module: torch.fx.GraphModule,
    example_inputs: Sequence[torch.Tensor],
    *,
    node: str,
    input_names: Sequence[str],
    output_names: Sequence[str],
    backend: str | os.PathLike[str] | None,
    directory: str | os.PathLike[str],
) -> Artifact:
    """Write the artifact of one pipeline node into ``directory`` and describe it.

    Args:
        graph_module: the node's pure graph: its placeholders are the inputs in port order, its
            output is one tensor (one output port) or a tuple of tensors (several ports).
        example_inputs: one tensor per input port, used by the tracing backends (onnx, pt2).
        node: the node's name; the artifact is written as ``<node><suffix>``.
        input_names: the input port names, in order; they become the artifact's input names.
        output_names: the output port names, in order; they become the artifact's output names.
        backend: ``"jit"``, ``"onnx"``, ``"pt2"``, one of :data:`ALIASES`, None (no artifact),
            or the path of an artifact the user made (``.pt``, ``.onnx``, ``.pt2``) to copy
            into the folder.
        directory: the export folder (created if missing).

    Returns:
        The :class:`Artifact` to record in the spec.

    Raises:
        ExportError: unknown backend, inconsistent arguments, or the backend failed; the
            message names the node and what to do next.
    """
    _check_node_name(node)
    if backend is None:
        logger.debug("node %s: backend None, no artifact written", node)
        return Artifact(model_path=None, backend=None)
    folder = Path(directory)
    started = time.perf_counter()
    if isinstance(backend, str) and (backend in BACKENDS or backend in ALIASES):
        artifact = _export_builtin(
            graph_module, example_inputs, node, input_names, output_names, backend, folder
        )
    elif _looks_like_path(backend):
        folder.mkdir(parents=True, exist_ok=True)
        artifact = custom.export(Path(backend), node=node, directory=folder)
    else:
        choices = ", ".join(repr(name) for name in BACKENDS)
        aliases = ", ".join(repr(name) for name in ALIASES)
        raise ExportError(
            f"node {node!r}: unknown backend {backend!r}; choose one of {choices}, None (no "
            f"artifact), NVIDIA LEAPP's {aliases}, or the path of your own .pt, .onnx or .pt2 "
            "file"
        )
    logger.debug(
        "node %s: exported as %s in %.3f s", node, artifact.backend, time.perf_counter() - started
    )
    return artifact


def _export_builtin(
    graph_module: torch.fx.GraphModule,
    example_inputs: Sequence[torch.Tensor],
    node: str,
    input_names: Sequence[str],
    output_names: Sequence[str],
    backend: str,
    folder: Path,
) -> Artifact:
    prepared = prepare_graph_module(graph_module, node, input_names, output_names)
    inputs = tuple(plain_tensor(value) for value in example_inputs)
    if len(inputs) != len(input_names):
        raise ExportError(
            f"node {node!r}: {len(inputs)} example inputs for {len(input_names)} input ports "
            f"{list(input_names)}; pass one tensor per port"
        )
    folder.mkdir(parents=True, exist_ok=True)
    backend, mode = ALIASES.get(backend, (backend, None))
    options = {"mode": mode} if mode else {}
    warp = export_segments(prepared, node=node, backend=backend, directory=folder)
    artifact = _WRITERS[backend].export(
        prepared,
        inputs,
        node=node,
        input_names=tuple(input_names),
        output_names=tuple(output_names),
        directory=folder,
        **options,
    )
    if warp is None:
        return artifact
    return replace(artifact, warp_segments=warp.segments, warp_archive=warp.file_name)


def _looks_like_path(backend: object) -> bool:
    if isinstance(backend, os.PathLike):
        return True
    if not isinstance(backend, str):
        return False
    return "/" in backend or os.sep in backend or bool(Path(backend).suffix)


def _check_node_name(node: str) -> None:
    if (
        not isinstance(node, str)
        or not node
        or node in (".", "..")
        or "/" in node
        or (os.sep in node)
    ):
        raise ExportError(
            f"node name {node!r} cannot name an artifact file; use a non-empty name without "
            "'/' (for example 'policy')"
        )
