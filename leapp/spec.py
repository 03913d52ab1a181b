"""The pipeline spec: typed view of ``<name>.yaml`` (LEAPP config 1.3 compatible).

TODO(helper): load(), dump(), validation with YAML paths, checksum verification.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

LEAPP_CONFIG_VERSION = "1.3"


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
