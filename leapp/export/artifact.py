"""What an export writes: the backends and their files, and the :class:`Artifact` of one node.

:data:`BACKENDS` are the built-in backends with the suffix of the file each writes,
:data:`ALIASES` NVIDIA LEAPP's names for them. An :class:`Artifact` holds exactly what the spec's
``models.<node>.parameters`` needs of one exported node besides the checksums.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field

BACKENDS: Mapping[str, str] = types.MappingProxyType(
    {"jit": ".pt", "onnx": ".onnx", "pt2": ".pt2"}
)
"""The built-in backends and the suffix of the file each one writes."""

ALIASES: Mapping[str, tuple[str, str | None]] = types.MappingProxyType(
    {
        "jit-script": ("jit", "script"),
        "jit-trace": ("jit", "trace"),
        "onnx-torchscript": ("onnx", None),
        "onnx-dynamo": ("onnx", None),
        "exported-program": ("pt2", None),
        "torch": ("jit", None),
    }
)
"""NVIDIA LEAPP's backend names: ``name -> (backend, TorchScript mode)``. ``"jit-script"`` is
``torch.jit.script`` only, ``"jit-trace"`` is ``torch.jit.trace`` only (``"jit"`` and LEAPP's
older ``"torch"`` script and fall back to tracing); ``"onnx-torchscript"`` and ``"onnx-dynamo"``
are our ONNX exporter (TorchScript-based, the one that runs on this torch), ``"exported-program"``
is ``pt2``. The artifact and the spec record the backend (``jit`` / ``onnx`` / ``pt2``) every
reader knows."""


@dataclass(frozen=True)
class Artifact:
    """What one exported node contributes to ``models.<node>.parameters`` of the spec.

    ``model_path`` is the artifact's file name relative to the export folder (None when the node
    was not exported), ``backend`` one of :data:`BACKENDS` or None, ``opset_version`` is set for
    ONNX and ``torch_version`` for pt2 artifacts. A node with Warp segments has
    ``warp_segments`` > 0 and ``warp_archive``, the file holding them (:mod:`leapp.export.warp`).
    ``timings`` are the seconds each phase of the export took (``"torch.jit.script"``,
    ``"torch.onnx.export"``, ``"agreement"``, ...), for reports; they are not part of the spec.
    """

    model_path: str | None
    backend: str | None
    opset_version: int | None = None
    torch_version: str | None = None
    warp_segments: int = 0
    warp_archive: str | None = None
    timings: Mapping[str, float] = field(default_factory=dict, repr=False, compare=False)
