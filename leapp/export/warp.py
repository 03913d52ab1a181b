"""The Warp archive of a node: its Warp segments captured with APIC, next to its artifact.

A node whose graph holds Warp segments (``torch.ops.leapp.warp_segment`` calls, see
:mod:`leapp.trace.segments.warp_op`) exports to ``jit`` or ``pt2`` as any other node, plus one file
``<node>.warp`` in the export folder: a zip archive with, for each segment,

- ``segment<i>.wrp``: the segment's calls recorded with Warp's APIC capture
  (``wp.capture_begin(device, apic=True)`` ... ``wp.capture_save``), replayed on fresh arrays from
  the trace-time record (:class:`~leapp.trace.segments.warp_segment.Replay`); its inputs are named
  ``in<i>`` and its outputs ``out<i>``;
- ``segment<i>_modules/``: the compiled Warp modules it launches (CPU objects or CUDA
  binaries), so that loading needs no compiler;
- ``manifest.json``: the Warp version, and per segment its key, device and the shapes and
  dtypes of its inputs and outputs.

Each segment gets a new key (a hash of its capture) and the artifact calls the operator with
that key; :mod:`leapp.run.warp_runtime` loads the archive before the artifact. CPU modules are
compiled for a generic x86-64 CPU (``cpu_compiler_flags=""``: portable to any x86-64 machine)
unless the kernel's Warp module sets its own ``cpu_compiler_flags`` (``wp.set_module_options``),
which is kept. An archive runs with the Warp version that wrote it (APIC archives are tied to it).

ONNX cannot hold a Warp segment that ONNX Runtime could run on the CPU, so a node with Warp
segments exported as ``onnx`` is refused with an :class:`~leapp.errors.ExportError`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch.fx

from leapp.errors import ExportError
from leapp.trace.segments import warp_op
from leapp.trace.segments.warp_segment import Replay, SegmentRecord

__all__ = ["ARCHIVE_FORMAT", "WarpArchive", "export_segments", "segment_nodes"]

logger = logging.getLogger(__name__)

ARCHIVE_FORMAT = "leapp-warp/1"
_BACKENDS = ("jit", "pt2")
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed, so the same capture gives the same file


@dataclass(frozen=True)
class WarpArchive:
    """The archive written for one node: its file name (in the export folder) and how many
    segments it holds."""

    file_name: str
    segments: int


def segment_nodes(graph_module: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The Warp segment calls of ``graph_module``, in graph order."""
    return [n for n in graph_module.graph.nodes if warp_op.is_segment(n)]


def export_segments(
    graph_module: torch.fx.GraphModule, *, node: str, backend: str, directory: Path
) -> WarpArchive | None:
    """Capture every Warp segment of ``graph_module`` into ``<directory>/<node>.warp`` and make
    the graph call them by their new keys (``graph_module`` is changed in place). Returns None
    for a graph without Warp segments.

    Raises:
        ExportError: the backend cannot hold Warp segments, a segment was not recorded in
            this process, or Warp failed to capture or save it.
    """
    nodes = segment_nodes(graph_module)
    if not nodes:
        return None
    if backend not in _BACKENDS:
        where = nodes[0].meta.get("leapp_location", "?")
        raise ExportError(
            f"node {node!r} holds {len(nodes)} Warp segment(s) (the first at {where}), which "
            f"only the {' and '.join(_BACKENDS)} backends can hold: ONNX Runtime has no Warp "
            "operator. Export the node with export_with='jit' or 'pt2', or move the Warp calls "
            "into a node of their own exported with one of those."
        )
    import warp

    started = time.perf_counter()
    files: dict[str, bytes] = {}
    segments = []
    for index, fx_node in enumerate(nodes):
        record = _record(fx_node, node)
        captured = _capture(record, node)
        digest = hashlib.sha256()
        for name in sorted(captured):
            digest.update(name.encode() + b"\0" + captured[name])
        key = f"w{digest.hexdigest()[:32]}"
        prefix = f"segment{index}"
        files[f"{prefix}.wrp"] = captured.pop("segment.wrp")
        modules = {}
        for name, data in captured.items():
            files[f"{prefix}_modules/{name}"] = data
            modules[name] = f"{prefix}_modules/{name}"
        segments.append(_manifest_entry(record, key, f"{prefix}.wrp", modules))
        fx_node.args = (key, *fx_node.args[1:])
        specs = tuple(record.output_specs())
        warp_op.register(key, warp_op.SegmentEntry(outputs=lambda s=specs: s, run=None))
    graph_module.recompile()
    manifest = {"format": ARCHIVE_FORMAT, "warp_version": warp.config.version, "node": node}
    manifest["segments"] = segments
    file_name = f"{node}.warp"
    _write_zip(directory / file_name, {"manifest.json": _json(manifest), **files}, node)
    logger.info(
        "node %r: %d Warp segment(s) captured into %s in %.2f s",
        node,
        len(nodes),
        file_name,
        time.perf_counter() - started,
    )
    return WarpArchive(file_name=file_name, segments=len(nodes))


def _record(fx_node: torch.fx.Node, node: str) -> SegmentRecord:
    key = warp_op.segment_key(fx_node)
    entry = warp_op.entry(key)
    record = entry.source if entry is not None else None
    if not isinstance(record, SegmentRecord):
        raise ExportError(
            f"node {node!r}: Warp segment {key!r} was not recorded in this process, so its "
            "Warp calls are unknown; trace the node again (leapp.start ... leapp.stop) and "
            "export in the same process."
        )
    return record


def _capture(record: SegmentRecord, node: str) -> dict[str, bytes]:
    """APIC capture of ``record``: ``{"segment.wrp": ..., <module file>: ...}``."""
    import warp

    portable = _use_portable_flags(record) if record.device == "cpu" else []
    try:
        with tempfile.TemporaryDirectory(prefix="leapp_warp_") as folder:
            try:
                Replay(record).capture(str(Path(folder) / "segment"))
            except Exception as e:
                raise ExportError(
                    f"node {node!r}: Warp could not capture the segment recorded at "
                    f"{record.location} on {record.device}: {type(e).__name__}: {e}. Check that "
                    "its kernels run outside leapp; Warp calls other than launches, copies and "
                    "fills cannot be captured"
                ) from e
            root = Path(folder)
            captured = {"segment.wrp": (root / "segment.wrp").read_bytes()}
            for path in sorted((root / "segment_modules").glob("*")):
                captured[path.name] = path.read_bytes()
            return captured
    finally:
        for module in portable:
            warp.set_module_options({"cpu_compiler_flags": None}, module)


def _use_portable_flags(record: SegmentRecord) -> list[Any]:
    """Compile the record's modules for a generic x86-64 CPU unless a module sets its own
    flags; returns the modules changed (to restore after the capture)."""
    import warp

    if warp.config.cpu_compiler_flags == "":
        return []
    changed = [m for m in record.modules() if m.options.get("cpu_compiler_flags") is None]
    for module in changed:
        logger.info("Warp module %s: compiling for a generic x86-64 CPU (portable)", module.name)
        warp.set_module_options({"cpu_compiler_flags": ""}, module)
    return changed


def _manifest_entry(record: SegmentRecord, key: str, wrp: str, modules: dict) -> dict:
    def ports(indices: list[int], prefix: str) -> list[dict[str, Any]]:
        return [
            {
                "name": f"{prefix}{position}",
                "dtype": str(record.buffers[i].tensor_dtype).removeprefix("torch."),
                "shape": list(record.buffers[i].tensor_shape),
            }
            for position, i in enumerate(indices)
        ]

    return {
        "key": key,
        "device": record.device,
        "wrp": wrp,
        "modules": modules,
        "inputs": ports(record.inputs, "in"),
        "outputs": ports(record.outputs, "out"),
        "location": record.location,
    }


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=1, sort_keys=True).encode()


def _write_zip(path: Path, files: dict[str, bytes], node: str) -> None:
    try:
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, data in files.items():
                info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, data)
    except OSError as e:
        raise ExportError(
            f"node {node!r}: cannot write {path}: {e}; check the export folder"
        ) from e
