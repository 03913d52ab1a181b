"""What :class:`~leapp.run.inference.InferenceManager` checks when it loads an export, as
NVIDIA LEAPP's runtime checks it, and LEAPP's error types.

LEAPP's runtime requires keys our spec reader leaves optional (``system information``,
``md5sum``), refuses an artifact whose checksum differs and an initial values file that names
no node input. Every error is a :class:`~leapp.errors.LeappError` and also the built-in type
LEAPP raises (``ValueError``, ``FileNotFoundError``), so code written for LEAPP 0.7.2 catches
it unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from leapp.errors import PipelineError, SpecError
from leapp.spec import Spec
from leapp.spec import load as load_spec
from leapp.spec.checksums import check_checksums
from leapp.spec.parser import read_yaml

__all__ = [
    "PipelineValueError",
    "SpecFileNotFoundError",
    "SpecValueError",
    "check_initial_values",
    "load_checked_spec",
    "read_description",
]

_TOP_KEYS = ("models", "pipeline", "system information")
_MODEL_KEYS = ("inputs", "outputs", "parameters")
_PARAMETER_KEYS = ("model_path", "md5sum", "sha256sum", "backend")


class SpecValueError(SpecError, ValueError):
    """A spec NVIDIA LEAPP refuses with ``ValueError``: malformed, or an artifact's checksum
    differs."""


class SpecFileNotFoundError(SpecError, FileNotFoundError):
    """A spec or initial values file that does not exist."""


class PipelineValueError(PipelineError, ValueError):
    """An export that cannot run, or a value ``run_policy`` cannot take."""


def read_description(path: Path) -> dict[str, Any]:
    """The YAML document, with the keys LEAPP's runtime requires (it requires some our spec
    reader leaves optional: ``system information``, ``md5sum``)."""
    try:
        raw, _ = read_yaml(path)
    except SpecError as e:
        raise SpecValueError(str(e), e.problems) from e
    missing = [key for key in _TOP_KEYS if key not in raw]
    if missing:
        raise SpecValueError(
            f"{path}: Leapp description file must contain models, pipeline, and system_info "
            f"(section 'system information'), but it lacks {missing}; re-export the pipeline "
            "or restore the section"
        )
    models = raw["models"]
    for name, model in models.items() if isinstance(models, Mapping) else ():
        lacking = _lacking(model, _MODEL_KEYS)
        if lacking:
            raise SpecValueError(
                f"{path}: models.{name} lacks {lacking}: Model description must contain "
                "inputs, outputs, and parameters; re-export the pipeline or restore them"
            )
        lacking = _lacking(model["parameters"], _PARAMETER_KEYS)
        if lacking:
            raise SpecValueError(
                f"{path}: models.{name}.parameters lacks {lacking}: Model description must "
                "contain model_path, md5sum, sha256sum, and backend; re-export the pipeline "
                "or restore them"
            )
    return raw


def _lacking(entry: Any, keys: tuple[str, ...]) -> list[str]:
    return [key for key in keys if key not in entry] if isinstance(entry, Mapping) else list(keys)


def load_checked_spec(path: Path) -> Spec:
    """The spec, checked as :func:`leapp.spec.load` checks it, errors as LEAPP's types."""
    try:
        spec = load_spec(path, verify_checksums=False)
    except SpecError as e:
        raise SpecValueError(str(e), e.problems) from e
    problems = check_checksums(spec)
    if problems:
        fields = {problem.split(":", 1)[0].rsplit(".", 1)[-1] for problem in problems}
        if "sha256sum" in fields:
            what = "SHA256 checksum mismatch"
        elif "model_path" in fields:
            what = "artifact missing or unreadable"
        else:
            what = "MD5 checksum mismatch"
        listed = "".join(f"\n  - {problem}" for problem in problems)
        raise SpecValueError(f"{path}: {what}:{listed}", tuple(problems))
    return spec


def check_initial_values(spec: Spec) -> None:
    """The initial values file must exist and name each value ``"<node>/<input>"``. (The
    pipeline reads the values: those of its state and feedback inputs.)"""
    if not spec.pipeline.initial_values:
        return
    path = spec.directory / spec.pipeline.initial_values
    if not path.is_file():
        raise SpecFileNotFoundError(
            f"{spec.path}: Feedback initial values file not found at {str(path)!r} "
            "(pipeline.initial_values); re-export the pipeline or copy the file next to the YAML"
        )
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            keys = list(handle.keys())
    except Exception as e:  # safetensors raises its own SafetensorError
        raise SpecValueError(f"{path}: cannot read the initial values: {e}") from e
    inputs = {f"{model.name}/{port.name}" for model in spec.models for port in model.inputs}
    for key in keys:
        parts = key.split("/")
        if len(parts) != 2:
            reason = (
                "too many values to unpack" if len(parts) > 2 else "not enough values to unpack"
            )
            raise SpecValueError(
                f"{path}: initial value key {key!r} is not '<node>/<input>' ({reason}, expected "
                "2); name each value after the input it starts, or re-export the pipeline"
            )
        if key not in inputs:
            raise SpecValueError(
                f"{path}: Feedback initial value key {key!r} does not match any node input "
                f"({sorted(inputs)}); rename or drop it, or re-export the pipeline"
            )
