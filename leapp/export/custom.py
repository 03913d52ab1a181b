"""The user's own artifact: ``export_with="path/to/policy.onnx"`` copies that file.

The file is copied into the export folder as ``<node><suffix>`` and its backend follows from
the suffix: ``.pt`` is TorchScript (``jit``), ``.onnx`` is ONNX, ``.pt2`` is ``torch.export``.
The tracer's graph of the node is then only used to check the artifact (``validate_export``):
the user's file is what gets deployed, so its inputs and outputs must be the node's ports in
order.
"""

from __future__ import annotations

import logging
import shutil
import zipfile
from pathlib import Path

from leapp.errors import ExportError
from leapp.export.artifact import BACKENDS, Artifact
from leapp.export.failure import summarize_error

logger = logging.getLogger(__name__)


def export(source: Path, *, node: str, directory: Path) -> Artifact:
    """Copy ``source`` to ``<directory>/<node><suffix>`` and describe it as an Artifact."""
    backend = backend_of(source, node)
    if not source.is_file():
        raise ExportError(
            f"node {node!r}: artifact file {str(source)!r} does not exist; pass the path of an "
            "existing .pt, .onnx or .pt2 file, or a backend name such as 'onnx'"
        )
    file_name = f"{node}{source.suffix.lower()}"
    target = directory / file_name
    if backend == "jit":
        _check_torchscript(source, node)
    opset_version = _opset_version(source, node) if backend == "onnx" else None
    torch_version = _torch_version() if backend == "pt2" else None
    if not (target.exists() and target.samefile(source)):
        try:
            shutil.copyfile(source, target)
        except OSError as e:
            raise ExportError(
                f"node {node!r}: cannot copy {str(source)!r} to {str(target)!r}: {e}"
            ) from e
    logger.debug("node %s: copied the user's artifact %s to %s", node, source, target)
    return Artifact(
        model_path=file_name,
        backend=backend,
        opset_version=opset_version,
        torch_version=torch_version,
    )


def backend_of(source: Path, node: str) -> str:
    """The backend an artifact file belongs to, from its suffix."""
    suffix = source.suffix.lower()
    for backend, backend_suffix in BACKENDS.items():
        if suffix == backend_suffix:
            return backend
    kinds = ", ".join(f"{suffix_} ({name})" for name, suffix_ in BACKENDS.items())
    raise ExportError(
        f"node {node!r}: artifact file {str(source)!r} is of unknown kind {suffix or '(none)'!r}; "
        f"leapp deploys {kinds}. Convert the model to one of those, or pass a backend name"
    )


def _check_torchscript(source: Path, node: str) -> None:
    """A ``.pt`` must be a TorchScript archive, not a pickled model from ``torch.save``."""
    try:
        with zipfile.ZipFile(source) as archive:
            has_code = any("/code/" in name for name in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        has_code = False
    if not has_code:
        raise ExportError(
            f"node {node!r}: {str(source)!r} is not a TorchScript archive (a file from "
            "torch.save?); write it with torch.jit.save(torch.jit.script(model), path)"
        )


def _opset_version(source: Path, node: str) -> int | None:
    import onnx

    try:
        model = onnx.load(str(source), load_external_data=False)
    except Exception as e:
        raise ExportError(
            f"node {node!r}: {str(source)!r} is not a readable ONNX model: {summarize_error(e)}"
        ) from e
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            return int(opset.version)
    return None


def _torch_version() -> str:
    """The torch that will load the artifact: the one running now (the file does not say)."""
    import torch

    return torch.__version__
