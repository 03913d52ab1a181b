"""The pipeline spec's typed view: frozen dataclasses for ``<name>.yaml`` (LEAPP config 1.3).

An export folder holds one YAML file with three top-level sections: ``models`` (one entry per
node: its input and output ports and the artifact that computes it), ``pipeline`` (how the
nodes connect) and ``system information``. :class:`Spec` holds all three; keys a LEAPP reader
does not know are kept in the ``extra`` mappings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BACKENDS",
    "DTYPES",
    "LEAPP_CONFIG_VERSION",
    "ModelParameters",
    "ModelSpec",
    "PipelineSpec",
    "Spec",
    "TensorSpec",
]

LEAPP_CONFIG_VERSION = "1.3"

#: dtype names a port may declare: torch dtype names without the ``torch.`` prefix.
_DTYPE_NAMES = (
    "float32 float64 float16 bfloat16 int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool"
    " complex64 complex128 float8_e4m3fn float8_e5m2"
)
DTYPES: tuple[str, ...] = tuple(_DTYPE_NAMES.split())

#: artifact formats a model may declare in ``parameters.backend`` (besides null).
BACKENDS = ("jit", "onnx", "pt2")


@dataclass(frozen=True)
class TensorSpec:
    """One input or output port of a model."""

    name: str
    dtype: str  # torch dtype name without the "torch." prefix: float32, int64, bool, ...
    shape: tuple[int, ...]  # () for a scalar
    type: str = "tensor"
    kind: str | None = None
    element_names: tuple[Any, ...] | None = None
    temporal_period_ms: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # unknown keys, kept verbatim


@dataclass(frozen=True)
class ModelParameters:
    """``models.<node>.parameters``."""

    model_path: str | None  # relative to the YAML file
    md5sum: str | None
    sha256sum: str | None
    backend: str | None  # "jit" | "onnx" | "pt2" | None
    warp_segments: int = 0
    opset_version: int | None = None  # onnx only
    torch_version: str | None = None  # pt2 only
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelSpec:
    """``models.<node>``: one pipeline node and its artifact."""

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    parameters: ModelParameters
    extra: Mapping[str, Any] = field(default_factory=dict)  # unknown keys of the model entry

    def input(self, name: str) -> TensorSpec:
        """The input port called ``name`` (``KeyError`` when there is none)."""
        for port in self.inputs:
            if port.name == name:
                return port
        raise KeyError(f"{self.name}/{name}")

    def output(self, name: str) -> TensorSpec:
        """The output port called ``name`` (``KeyError`` when there is none)."""
        for port in self.outputs:
            if port.name == name:
                return port
        raise KeyError(f"{self.name}/{name}")


@dataclass(frozen=True)
class PipelineSpec:
    """``pipeline``: how the nodes connect. Port keys are ``"<node>/<port>"``."""

    data_flow: Mapping[str, tuple[str, ...]]
    feedback_flow: Mapping[str, tuple[str, ...]]
    inputs: Mapping[str, tuple[str, ...]]
    outputs: Mapping[str, tuple[str, ...]]
    initial_values: str | None = None
    examples: str | None = None  # ours: "<name>_examples.safetensors"
    configs: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Spec:
    """A whole export: models in completion order, the pipeline wiring, system information."""

    name: str
    models: tuple[ModelSpec, ...]
    pipeline: PipelineSpec
    system: Mapping[str, Any]
    path: Path | None = None  # the YAML file this spec was read from or written to
    extra: Mapping[str, Any] = field(default_factory=dict)  # unknown top-level keys

    @property
    def directory(self) -> Path:
        if self.path is None:
            raise ValueError("this spec has no file; write it with dump() first")
        return self.path.parent

    def model(self, name: str) -> ModelSpec:
        for model in self.models:
            if model.name == name:
                return model
        raise KeyError(name)
