"""The pipeline spec: typed view of ``<name>.yaml`` (LEAPP config 1.3 compatible).

An export folder holds one YAML file with three top-level sections: ``models`` (one entry per
node: its input and output ports and the artifact that computes it), ``pipeline`` (how the
nodes connect) and ``system information``. This module reads such a file into frozen
dataclasses (:func:`load`), writes one back in the exact layout NVIDIA's leapp 0.7.2 uses
(:func:`dump`), and provides the checksum and environment helpers the exporter needs.

Keys this module does not know are kept in the ``extra`` mappings and written back unchanged,
so files written by other LEAPP versions survive a load/dump round trip.

Example::

    from leapp import spec

    s = spec.load("exports/torch_pipeline")  # the folder, or the YAML file itself
    for model in s.models:
        print(model.name, [p.name for p in model.inputs], model.parameters.backend)
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import logging
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leapp.errors import SpecError

__all__ = [
    "BACKENDS",
    "DTYPES",
    "LEAPP_CONFIG_VERSION",
    "ModelParameters",
    "ModelSpec",
    "PipelineSpec",
    "Spec",
    "TensorSpec",
    "dump",
    "file_checksums",
    "load",
    "system_information",
]

logger = logging.getLogger(__name__)

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


def load(path: str | os.PathLike[str], *, verify_checksums: bool = True) -> Spec:
    """Read and validate a pipeline spec.

    Args:
        path: an export folder (its ``<folder name>.yaml``, or else its only ``*.yaml``) or
            the YAML file itself.
        verify_checksums: check that every ``model_path`` file exists next to the YAML and
            matches its ``sha256sum`` (and ``md5sum`` when given).

    Returns:
        The :class:`Spec`, with ``name`` the YAML file's stem and ``path`` the YAML file.

    Raises:
        SpecError: the file is missing, is not valid YAML, or has problems. ``problems``
            lists every one of them as ``"<yaml path>: <what was expected and found>"``, e.g.
            ``models.policy.inputs[0].dtype: expected one of float32, ... but found 'float33'``.
    """
    from leapp import spec_check

    yaml_path = _find_yaml(Path(path))
    raw, problems = spec_check.read_yaml(yaml_path)
    spec, found = spec_check.parse_spec(raw, name=yaml_path.stem, path=yaml_path)
    problems.extend(found)
    if verify_checksums:
        problems.extend(spec_check.check_checksums(spec))
    if problems:
        raise SpecError(_problem_message(yaml_path, "has", problems), tuple(problems))
    logger.debug("loaded spec %s with %d models", yaml_path, len(spec.models))
    return spec


def dump(spec: Spec, path: str | os.PathLike[str]) -> Spec:
    """Write ``spec`` as YAML in the LEAPP 0.7.2 layout and return it as :func:`load` would.

    Args:
        spec: the spec to write. It is checked first, exactly as :func:`load` checks a file
            (checksums aside), so a written spec can always be read back.
        path: a ``.yaml``/``.yml`` file, or a folder (then ``<folder>/<spec.name>.yaml``).
            Missing parent folders are created.

    Returns:
        The spec with ``path`` set to the written file and ``name`` to its stem;
        ``load(result.path) == result`` holds.

    Raises:
        SpecError: the spec is inconsistent; ``problems`` lists every finding.
    """
    from leapp import spec_check

    target = Path(path)
    if target.suffix not in (".yaml", ".yml"):
        target = target / f"{spec.name}.yaml"
    sections = _sections(spec)
    problems = spec_check.check_extras(spec)
    written, found = spec_check.parse_spec(sections, name=target.stem, path=target)
    problems.extend(found)
    if problems:
        raise SpecError(_problem_message(target, "would have", problems), tuple(problems))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(_render(sections), encoding="utf-8")
    logger.debug("wrote spec %s", target)
    return written


def file_checksums(path: str | os.PathLike[str]) -> tuple[str, str]:
    """The ``(md5, sha256)`` hex digests of a file, read in chunks (large files are fine)."""
    md5 = hashlib.md5(usedforsecurity=False)
    sha256 = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            md5.update(chunk)
            sha256.update(chunk)
    return md5.hexdigest(), sha256.hexdigest()


def system_information() -> dict[str, str | None]:
    """The ``system information`` section describing this machine, keys as LEAPP writes them."""
    import torch

    import leapp

    try:
        warp_version: str | None = importlib.metadata.version("warp-lang")
    except importlib.metadata.PackageNotFoundError:
        warp_version = None
    return {
        "cuda version": str(torch.version.cuda),
        "leapp config version": LEAPP_CONFIG_VERSION,
        "leapp version": str(getattr(leapp, "__version__", "0.1.0")),
        "os": _os_name(),
        "python version": platform.python_version(),
        "torch version": str(torch.__version__),
        "warp version": warp_version,
    }


def _os_name() -> str:
    """``"Debian GNU/Linux 12"`` style (os-release NAME VERSION_ID, as LEAPP writes it)."""
    try:
        release = platform.freedesktop_os_release()
    except OSError:
        return platform.platform()
    if release.get("NAME") and release.get("VERSION_ID"):
        return f"{release['NAME']} {release['VERSION_ID']}"
    return release.get("PRETTY_NAME") or platform.platform()


# --- reading ------------------------------------------------------------------------------


def _find_yaml(path: Path) -> Path:
    if path.is_file():
        return path
    if not path.exists():
        raise SpecError(
            f"{path}: no such export folder or spec file; "
            "pass the folder leapp exported to, or its <name>.yaml",
            (f"{path}: expected an export folder or a YAML file but nothing is there",),
        )
    named = path / f"{path.name}.yaml"
    if named.is_file():
        return named
    candidates = sorted(path.glob("*.yaml"))
    if len(candidates) == 1:
        return candidates[0]
    found = ", ".join(c.name for c in candidates) or "none"
    raise SpecError(
        f"{path}: cannot tell which YAML file is the spec (expected {named.name} or exactly "
        f"one *.yaml, found {found}); pass the YAML file itself",
        (f"{path}: expected {named.name} or a single *.yaml but found {found}",),
    )


def _problem_message(path: Path, verb: str, problems: list[str]) -> str:
    listing = "\n".join(f"  - {problem}" for problem in problems)
    return (
        f"{path}: the pipeline spec {verb} {len(problems)} problem(s):\n{listing}\n"
        "Fix these entries in the YAML (or re-export the pipeline) and load it again."
    )


# --- writing ------------------------------------------------------------------------------


class _Flow(list):  # type: ignore[type-arg]
    """A list written in YAML flow style: ``[a, b]``."""


def _sections(spec: Spec) -> dict[str, Any]:
    """The YAML document as plain data, keys in LEAPP's order."""
    document: dict[str, Any] = {
        "models": {model.name: _model_entry(model) for model in spec.models},
        "pipeline": _pipeline_entry(spec.pipeline),
        "system information": {k: _plain(spec.system[k]) for k in sorted(spec.system, key=str)},
    }
    for key, value in spec.extra.items():
        document.setdefault(key, _plain(value))
    return document


def _model_entry(model: ModelSpec) -> dict[str, Any]:
    params = model.parameters
    parameters: dict[str, Any] = {
        "model_path": params.model_path,
        "md5sum": params.md5sum,
        "sha256sum": params.sha256sum,
        "backend": params.backend,
        "warp_segments": params.warp_segments,
    }
    if params.opset_version is not None:
        parameters["opset_version"] = params.opset_version
    if params.torch_version is not None:
        parameters["torch_version"] = params.torch_version
    entry: dict[str, Any] = {
        "inputs": [_port_entry(port) for port in model.inputs],
        "outputs": [_port_entry(port) for port in model.outputs],
        "parameters": _with_extra(parameters, params.extra),
    }
    return _with_extra(entry, model.extra)


def _port_entry(port: TensorSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": port.name,
        "dtype": port.dtype,
        "shape": _Flow(port.shape),
        "type": port.type,
    }
    if port.kind is not None:
        entry["kind"] = port.kind
    if port.element_names is not None:
        entry["element_names"] = _Flow(_plain(port.element_names))
    if port.temporal_period_ms is not None:
        period = port.temporal_period_ms
        entry["temporal_period_ms"] = int(period) if float(period).is_integer() else period
    return _with_extra(entry, port.extra)


def _pipeline_entry(pipeline: PipelineSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "data_flow": {k: _Flow(v) for k, v in pipeline.data_flow.items()},
        "feedback_flow": {k: _Flow(v) for k, v in pipeline.feedback_flow.items()},
        "inputs": {k: _Flow(v) for k, v in pipeline.inputs.items()},
        "outputs": {k: _Flow(v) for k, v in pipeline.outputs.items()},
    }
    if pipeline.configs:
        entry["configs"] = _plain(pipeline.configs)
    if pipeline.initial_values is not None:
        entry["initial_values"] = pipeline.initial_values
    if pipeline.examples is not None:
        entry["examples"] = pipeline.examples
    entry = _with_extra(entry, pipeline.extra)
    return {key: entry[key] for key in sorted(entry, key=str)}  # LEAPP writes these sorted


def _with_extra(entry: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        entry.setdefault(key, _plain(value))
    return entry


def _plain(value: Any) -> Any:
    """Tuples and other sequences become lists, mappings dicts: what safe YAML can write."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _render(document: Mapping[str, Any]) -> str:
    import yaml

    dumper = _dumper_class()
    return "\n".join(
        yaml.dump(
            {key: value},
            Dumper=dumper,
            sort_keys=False,
            default_flow_style=False,
            allow_unicode=True,
            width=1 << 20,
        )
        for key, value in document.items()
    )


@functools.cache
def _dumper_class() -> type:
    import yaml

    class SpecDumper(yaml.SafeDumper):
        """Safe dumper: ``_Flow`` lists in flow style, no anchors/aliases."""

        def ignore_aliases(self, data: Any) -> bool:
            return True

    def represent_flow(dumper: yaml.SafeDumper, data: _Flow) -> Any:
        return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)

    SpecDumper.add_representer(_Flow, represent_flow)
    SpecDumper.add_representer(tuple, SpecDumper.represent_list)
    # str subclasses (torch.__version__ is a TorchVersion) are written as plain strings.
    SpecDumper.add_multi_representer(str, SpecDumper.represent_str)
    return SpecDumper
