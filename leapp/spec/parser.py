"""Reading a spec: the YAML document into a :class:`~leapp.spec.schema.Spec`, with every problem.

The checks behind :func:`leapp.spec.load` and :func:`leapp.spec.dump` (the artifacts' checksums
aside, which :mod:`leapp.spec.checksums` checks). :func:`read_yaml` (from
:mod:`leapp.spec.document`) reads the document.

Every check appends to a list of problems instead of stopping at the first one, so a user
sees everything that is wrong with a spec at once. A problem reads
``"<yaml path>: expected <what> but found <what>"``, e.g.
``models.policy.inputs[0].dtype: expected one of float32, float64, ... but found 'float33'``.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leapp.spec.document import read_yaml
from leapp.spec.schema import (
    BACKENDS,
    DTYPES,
    ModelParameters,
    ModelSpec,
    PipelineSpec,
    Spec,
    TensorSpec,
)
from leapp.spec.wiring import FLOW_KEYS, check_wiring

__all__ = ["check_extras", "parse_spec", "read_yaml"]

_TOP_KEYS = ("models", "pipeline", "system information")
_MODEL_KEYS = ("inputs", "outputs", "parameters")
_PORT_KEYS = ("name", "dtype", "shape", "type", "kind", "element_names", "temporal_period_ms")
_PARAMETER_KEYS = (
    "model_path",
    "md5sum",
    "sha256sum",
    "backend",
    "warp_segments",
    "opset_version",
    "torch_version",
)
_PIPELINE_KEYS = (*FLOW_KEYS, "inputs", "outputs", "initial_values", "examples", "configs")
#: the most elements a port may have, and the largest size of an axis: torch sizes are int64
MAX_ELEMENTS = 2**63 - 1


class _Problems(list):  # type: ignore[type-arg]
    """The problems found so far, each ``"<yaml path>: <message>"``.

    ``doubtful`` holds the ids of ports built from invalid values, so that later checks (edge
    agreement) do not report consequences of a problem already reported.
    """

    def __init__(self) -> None:
        super().__init__()
        self.doubtful: set[int] = set()

    def add(self, where: str, message: str) -> None:
        self.append(f"{where}: {message}")


def parse_spec(raw: Mapping[Any, Any], *, name: str, path: Path | None) -> tuple[Spec, list[str]]:
    """Build a :class:`Spec` from the YAML document ``raw``; also return every problem found.

    The spec is built on a best-effort basis (bad entries are dropped), so it is only
    meaningful when the problem list is empty.
    """
    problems = _Problems()
    top = _Entry(raw, "", problems)
    models = top.get(
        "models", "a non-empty mapping of node name to model", default={}, required=True
    )
    pipeline = _Entry(
        top.get("pipeline", "a mapping", default={}, required=True), "pipeline", problems
    )
    parsed_models = _parse_models(models, problems)
    parsed_pipeline = _parse_pipeline(pipeline)
    system = top.get("system information", "a mapping", default={})
    extra = top.extra(_TOP_KEYS)
    spec = Spec(name, parsed_models, parsed_pipeline, dict(system), path, extra)
    problems.extend(check_wiring(spec, problems.doubtful))
    return spec, list(problems)


def check_extras(spec: Spec) -> list[str]:
    """Problems with ``extra`` mappings that shadow known keys (dump would drop them)."""
    problems = _Problems()

    def check(where: str, extra: Mapping[Any, Any], known: tuple[str, ...]) -> None:
        for key in extra:
            if key in known:
                problems.add(
                    f"{where}.{key}",
                    f"expected extra keys unknown to LEAPP but found the known key {key!r} in "
                    "extra; set the dataclass field instead",
                )

    check("", spec.extra, _TOP_KEYS)
    check("pipeline", spec.pipeline.extra, _PIPELINE_KEYS)
    for model in spec.models:
        where = f"models.{model.name}"
        check(where, model.extra, _MODEL_KEYS)
        check(f"{where}.parameters", model.parameters.extra, _PARAMETER_KEYS)
        for role in ("inputs", "outputs"):
            for i, port in enumerate(getattr(model, role)):
                check(f"{where}.{role}[{i}]", port.extra, _PORT_KEYS)
    return [problem.lstrip(".") for problem in problems]


# --- structure -----------------------------------------------------------------------------

_MISSING = object()
_NAME = "a non-empty string without '/'"
_FILE = "a file name relative to the YAML"
_SHAPE = "a list of non-negative integers"
_HEX = set("0123456789abcdefABCDEF")


def _short_repr() -> reprlib.Repr:
    """``repr`` bounded in depth and length: a value may be huge or share itself (aliases)."""
    short = reprlib.Repr()
    short.maxlevel, short.maxlist, short.maxstring, short.maxlong = 3, 8, 50, 40
    return short


_SHORT = _short_repr()


def _found(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    try:
        text = _SHORT.repr(value)
    except ValueError:  # an int of more than 4300 digits (sys.set_int_max_str_digits)
        return f"an {type(value).__name__} too long to show"
    return text if len(text) < 60 else f"{text[:56]}...]"


def _is_positive_number(value: Any) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return value > 0 and math.isfinite(value)  # an int beyond float range overflows
    except OverflowError:
        return False


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and "/" not in value


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


_OK: dict[str, Callable[[Any], bool]] = {
    "a mapping": lambda v: isinstance(v, Mapping),
    "a non-empty mapping of node name to model": lambda v: isinstance(v, Mapping) and bool(v),
    "a list of ports": lambda v: isinstance(v, list),
    _NAME: _is_name,
    _FILE: _is_text,
    "a string": _is_text,
    f"one of {', '.join(DTYPES)}": lambda v: v in DTYPES,
    f"one of {', '.join(BACKENDS)}, null": lambda v: v in BACKENDS,
    "'tensor'": lambda v: v == "tensor",
    _SHAPE: lambda v: isinstance(v, list) and all(_is_int(d) and d >= 0 for d in v),
    "a positive finite number": _is_positive_number,
    "a positive integer": lambda v: _is_int(v) and v > 0,
    "a non-negative integer": lambda v: _is_int(v) and v >= 0,
    "32 hex digits": lambda v: isinstance(v, str) and len(v) == 32 and set(v) <= _HEX,
    "64 hex digits": lambda v: isinstance(v, str) and len(v) == 64 and set(v) <= _HEX,
}


@dataclass(frozen=True)
class _Entry:
    """One YAML mapping being read: its items, its YAML path and the shared problem list."""

    items: Mapping[Any, Any]
    where: str
    problems: _Problems

    def get(self, key: str, expected: str, *, default: Any = None, required: bool = False) -> Any:
        """``items[key]`` if it is ``expected`` (a key of ``_OK``), else ``default``.

        A wrong value, or a missing required key, is a problem. An optional key that is absent
        or null gives ``default`` silently.
        """
        where = f"{self.where}.{key}" if self.where else key
        value = self.items.get(key, _MISSING)
        if value is _MISSING:
            if required:
                self.problems.add(where, f"expected {expected} but the key is missing")
        elif value is None and not required:
            pass
        elif _OK[expected](value):
            return value
        else:
            self.problems.add(where, f"expected {expected} but found {_found(value)}")
        return default

    def extra(self, known: tuple[str, ...]) -> dict[Any, Any]:
        return {key: value for key, value in self.items.items() if key not in known}


def _parse_models(value: Mapping[Any, Any], problems: _Problems) -> tuple[ModelSpec, ...]:
    models = []
    for name, item in value.items():
        where = f"models.{name}"
        if not _is_name(name):
            problems.add(where, f"expected a node name: {_NAME} but found {name!r}")
        if not isinstance(item, Mapping):
            problems.add(where, f"expected inputs, outputs, parameters but found {_found(item)}")
            continue
        entry = _Entry(item, where, problems)
        inputs, outputs = (
            _parse_ports(
                entry.get(role, "a list of ports", default=[], required=True), role, entry
            )
            for role in ("inputs", "outputs")
        )
        parameters = entry.get("parameters", "a mapping", default={}, required=True)
        params = _parse_parameters(_Entry(parameters, f"{where}.parameters", problems))
        models.append(ModelSpec(str(name), inputs, outputs, params, entry.extra(_MODEL_KEYS)))
    return tuple(models)


def _parse_ports(items: list[Any], role: str, model: _Entry) -> tuple[TensorSpec, ...]:
    where = f"{model.where}.{role}"
    ports: list[TensorSpec] = []
    first_index: dict[str, int] = {}
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            model.problems.add(
                f"{where}[{i}]", f"expected name, dtype, shape, type but found {_found(item)}"
            )
            continue
        port = _parse_port(_Entry(item, f"{where}[{i}]", model.problems))
        if port is None:
            continue
        if port.name in first_index:
            model.problems.add(
                f"{where}[{i}].name",
                f"expected port names unique within {where} but found {port.name!r} "
                f"again (also {where}[{first_index[port.name]}])",
            )
        first_index.setdefault(port.name, i)
        ports.append(port)
    return tuple(ports)


def _parse_port(entry: _Entry) -> TensorSpec | None:
    known_problems = len(entry.problems)
    name = entry.get("name", _NAME, required=True)
    dtype = entry.get("dtype", f"one of {', '.join(DTYPES)}", required=True)
    shape = _check_element_count(entry, entry.get("shape", _SHAPE, required=True))
    port_type = entry.get("type", "'tensor'", default="tensor", required=True)
    kind = entry.get("kind", "a string")
    names = _parse_element_names(entry, shape)
    period = entry.get("temporal_period_ms", "a positive finite number")
    if name is None:
        return None
    port = TensorSpec(
        name=name,
        dtype=dtype or "float32",
        shape=tuple(shape or ()),
        type=port_type,
        kind=kind,
        element_names=names,
        temporal_period_ms=None if period is None else float(period),
        extra=entry.extra(_PORT_KEYS),
    )
    if len(entry.problems) > known_problems:
        entry.problems.doubtful.add(id(port))
    return port


def _check_element_count(entry: _Entry, shape: list[int] | None) -> list[int] | None:
    """``shape``, or None (a problem) when it holds more elements than torch can count."""
    count = 1
    for size in shape or ():
        count *= size
        if size > MAX_ELEMENTS or count > MAX_ELEMENTS:
            entry.problems.add(
                f"{entry.where}.shape",
                f"expected at most {MAX_ELEMENTS} elements (torch sizes are int64) but found "
                f"shape {_found(shape)} (port {entry.items.get('name')!r}); fix the shape",
            )
            return None
    return shape


def _parse_element_names(port: _Entry, shape: list[int] | None) -> tuple[Any, ...] | None:
    """One entry per named axis, counted from the last axis (so ``[[x, y, z]]`` names the last
    axis of a ``[1, 3]`` port, as NVIDIA's leapp writes it): ``shape[axis]`` names, a marker
    string like __temporal_axis__, or null."""
    value = port.items.get("element_names")
    where = f"{port.where}.element_names"
    if value is None or shape is None:
        return None
    of_port = f" (port {port.items.get('name')!r})"
    if not isinstance(value, list) or not value or len(value) > len(shape):
        expected = f"a list with one entry per axis of shape {shape}, or fewer for the last axes,"
        port.problems.add(where, f"expected {expected} but found {_found(value)}{of_port}")
        return None
    axes: list[Any] = []
    first = len(shape) - len(value)
    for entry, (names, size) in enumerate(zip(value, shape[first:], strict=True)):
        if names is None or isinstance(names, str):
            axes.append(names)
        elif isinstance(names, list) and len(names) == size and all(map(_is_text, names)):
            axes.append(tuple(names))
        else:
            port.problems.add(
                f"{where}[{entry}]",
                f"expected {size} names (axis {first + entry} of shape {shape}) or a marker "
                f"such as __temporal_axis__ but found {_found(names)}{of_port}",
            )
            return None
    return tuple(axes)


def _parse_parameters(entry: _Entry) -> ModelParameters:
    backend = entry.get("backend", f"one of {', '.join(BACKENDS)}, null")
    if backend is not None and entry.items.get("model_path") is None:
        entry.problems.add(
            f"{entry.where}.model_path",
            f"expected the artifact file of backend {backend!r} but found none",
        )
    return ModelParameters(
        model_path=entry.get("model_path", _FILE),
        md5sum=entry.get("md5sum", "32 hex digits"),
        sha256sum=entry.get("sha256sum", "64 hex digits"),
        backend=backend,
        warp_segments=entry.get("warp_segments", "a non-negative integer", default=0),
        opset_version=entry.get("opset_version", "a positive integer"),
        torch_version=entry.get("torch_version", "a string"),
        extra=entry.extra(_PARAMETER_KEYS),
    )


def _parse_pipeline(entry: _Entry) -> PipelineSpec:
    lists = {
        key: _parse_lists(entry.items.get(key), f"pipeline.{key}", entry.problems)
        for key in (*FLOW_KEYS, "inputs", "outputs")
    }
    return PipelineSpec(
        data_flow=lists["data_flow"],
        feedback_flow=lists["feedback_flow"],
        inputs=lists["inputs"],
        outputs=lists["outputs"],
        initial_values=entry.get("initial_values", _FILE),
        examples=entry.get("examples", _FILE),
        configs=dict(entry.get("configs", "a mapping", default={})),
        extra=entry.extra(_PIPELINE_KEYS),
    )


def _parse_lists(value: Any, where: str, problems: _Problems) -> dict[str, tuple[str, ...]]:
    """A mapping of string to list of strings (``{}`` when absent)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.add(where, f"expected a mapping of names to lists but found {_found(value)}")
        return {}
    result = {}
    for key, items in value.items():
        if not isinstance(key, str):
            problems.add(where, f"expected string keys but found {key!r}")
        elif not isinstance(items, list) or not all(map(_is_text, items)):
            problems.add(f"{where}.{key}", f"expected a list of strings but found {_found(items)}")
        else:
            result[key] = tuple(items)
    return result
