"""Loading a node's Warp archive: each segment's APIC graph, run as the segment operator.

A node exported with Warp segments (:mod:`leapp.export.warp`) has ``<node>.warp`` next to its
artifact. :func:`load_archive` reads it, loads every segment with
``wp.capture_load_from_bytes`` (the compiled modules come from the archive: no compiler, no
kernel cache needed) and registers it under its key, so that the artifact's calls of
``torch.ops.leapp.warp_segment`` run it. :func:`leapp.run.model.load_model` calls it before it
loads a node with ``warp_segments`` > 0.

A call of a loaded segment copies the input tensors into the graph's input regions, replays
the graph (Warp's C++ replay on the CPU, a CUDA graph launch on the GPU, on torch's current
stream) and returns copies of the output regions: a few microseconds besides the kernels. The
regions belong to the loaded graph, so one segment must not be called from two threads at once
(leapp_ros nodes call their models from one executor thread).
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import zipfile
from collections.abc import Sequence
from typing import Any

import torch

from leapp.errors import PipelineError
from leapp.spec import ModelSpec, Spec
from leapp.trace.segments import warp_op

__all__ = ["SegmentRunner", "load_archive"]

logger = logging.getLogger(__name__)

_FORMAT = "leapp-warp/1"


class SegmentRunner:
    """One loaded segment: ``runner(inputs)`` returns its outputs as new tensors."""

    def __init__(self, graph: Any, segment: dict[str, Any], wp: Any):
        self._graph = graph
        self._wp = wp
        self._keep: list[Any] = []  # the Warp arrays the views below are made from
        self.device = str(segment["device"])
        self.inputs = [self._view(port) for port in segment["inputs"]]
        self.outputs = [self._view(port) for port in segment["outputs"]]

    def __call__(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        for view, value in zip(self.inputs, inputs, strict=True):
            view.copy_(value)
        if self.device == "cpu":
            self._wp.capture_launch(self._graph)
        else:
            stream = self._wp.stream_from_torch(torch.cuda.current_stream(self.device))
            self._wp.capture_launch(self._graph, stream=stream)
        return [view.clone() for view in self.outputs]

    def _view(self, port: dict[str, Any]) -> torch.Tensor:
        """A torch tensor on the graph's parameter region ``port["name"]`` (same memory)."""
        wp, graph = self._wp, self._graph
        name = port["name"]
        dtype = getattr(torch, port["dtype"])
        shape = tuple(port["shape"])
        size = graph.params.get(name, {}).get("size")
        expected = torch.Size(shape).numel() * dtype.itemsize
        if size != expected:
            raise PipelineError(
                f"Warp segment parameter {name!r} holds {size} bytes, its manifest says "
                f"{port['dtype']} {list(shape)} ({expected} bytes); re-export the node"
            )
        if size == 0:
            return torch.empty(shape, dtype=dtype)
        raw = wp.array(
            ptr=graph.get_param_ptr(name), dtype=wp.uint8, shape=(size,), device=graph.device
        )
        self._keep.append(raw)
        return wp.to_torch(raw, requires_grad=False).view(dtype).reshape(shape)


def load_archive(spec: Spec, model: ModelSpec) -> list[str]:
    """Load the Warp archive of ``model`` (a node of ``spec``) and register its segments;
    returns their keys.

    Raises:
        PipelineError: no archive named in the spec (an export from another tool), Warp not
            installed or of another version than the one that wrote the archive, a segment
            captured on a device this machine lacks, or an archive Warp cannot load.
    """
    node = model.name
    name = model.parameters.extra.get("warp_archive")
    if not isinstance(name, str):
        raise PipelineError(
            f"node {node!r} has {model.parameters.warp_segments} Warp segment(s) but its spec "
            "names no warp_archive: it was not exported by leapp (NVIDIA LEAPP's Warp nodes "
            "need its CUDA runtime). Re-export the pipeline with leapp."
        )
    path = spec.directory / name
    try:
        with zipfile.ZipFile(path) as archive:
            files = {info.filename: archive.read(info) for info in archive.infolist()}
        manifest = json.loads(files["manifest.json"])
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as e:
        raise PipelineError(f"node {node!r}: cannot read the Warp archive {path}: {e}") from e
    if manifest.get("format") != _FORMAT:
        raise PipelineError(
            f"node {node!r}: {path} is a {manifest.get('format')!r} archive, this leapp reads "
            f"{_FORMAT!r}; re-export the pipeline with this leapp"
        )
    wp = _import_warp(node, manifest["warp_version"])
    keys = []
    for segment in manifest["segments"]:
        key = segment["key"]
        keys.append(key)
        known = warp_op.entry(key)
        if known is not None and isinstance(known.run, SegmentRunner):
            continue  # loaded already (the same export loaded twice in one process)
        runner = _load_segment(wp, node, path, segment, files)
        specs = tuple(
            warp_op.OutputSpec(tuple(p["shape"]), getattr(torch, p["dtype"]), runner.device)
            for p in segment["outputs"]
        )
        warp_op.register(key, warp_op.SegmentEntry(outputs=lambda s=specs: s, run=runner))
    logger.debug("node %s: %d Warp segment(s) loaded from %s", node, len(keys), path)
    return keys


def _import_warp(node: str, version: str) -> Any:
    try:
        import warp as wp
    except ImportError as e:
        raise PipelineError(
            f"node {node!r} runs Warp kernels: install warp-lang (pip install "
            f"warp-lang=={version}), the version that exported it"
        ) from e
    installed = importlib.metadata.version("warp-lang")
    if installed != version:
        raise PipelineError(
            f"node {node!r} was exported with warp-lang {version}, this machine has "
            f"{installed}; Warp archives run only with the version that wrote them: install "
            f"warp-lang=={version}, or re-export the pipeline with warp-lang {installed}"
        )
    level = wp.config.log_level
    wp.config.log_level = max(level, wp.LOG_WARNING)  # no banner in a deployed node's output
    try:
        wp.init()
    finally:
        wp.config.log_level = level
    return wp


def _load_segment(wp: Any, node: str, path: Any, segment: dict, files: dict) -> SegmentRunner:
    device = str(segment["device"])
    if device != "cpu" and not wp.is_cuda_available():
        raise PipelineError(
            f"node {node!r}: its Warp segment (traced at {segment.get('location')}) was "
            f"captured on {device}, and this machine has no CUDA device; run it on a machine "
            "with a GPU, or trace the node with CPU tensors to export it for the CPU"
        )
    try:
        modules = {name: files[member] for name, member in segment["modules"].items()}
        graph = wp.capture_load_from_bytes(files[segment["wrp"]], modules, device=device)
        return SegmentRunner(graph, segment, wp)
    except PipelineError:
        raise
    except Exception as e:
        raise PipelineError(
            f"node {node!r}: Warp cannot load segment {segment['key']} from {path}: "
            f"{type(e).__name__}: {e}; re-export the pipeline on this machine's Warp version"
        ) from e
