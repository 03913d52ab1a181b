"""The spec file: :func:`load` reads and checks ``<name>.yaml``, :func:`dump` writes one.

Files are written in the exact layout NVIDIA's leapp 0.7.2 uses. Keys the spec does not know
are kept in the ``extra`` mappings and written back unchanged, so files written by other LEAPP
versions survive a load/dump round trip. Both check a spec the same way, with
:mod:`leapp.spec.parser` (structure; :mod:`leapp.spec.wiring` for the edges); :func:`load` also
checks the artifacts' checksums (:mod:`leapp.spec.checksums`). Both refuse file names that
lead outside the export folder (:mod:`leapp.spec.containment`).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from leapp.errors import SpecError
from leapp.spec.checksums import check_checksums
from leapp.spec.containment import check_containment
from leapp.spec.parser import check_extras, parse_spec, read_yaml
from leapp.spec.schema import ModelSpec, PipelineSpec, Spec, TensorSpec

__all__ = ["dump", "load"]

logger = logging.getLogger(__name__)


def load(path: str | os.PathLike[str], *, verify_checksums: bool = True) -> Spec:
    """Read and validate a pipeline spec.

    Args:
        path: an export folder (its ``<folder name>.yaml``, or else its only ``*.yaml``) or
            the YAML file itself.
        verify_checksums: check that every ``model_path`` file exists next to the YAML and
            matches its ``sha256sum`` (and ``md5sum`` when given). Either way, every file the
            spec names must lie inside the export folder (:mod:`leapp.spec.containment`);
            one that does not is reported before any file is opened.

    Returns:
        The :class:`Spec`, with ``name`` the YAML file's stem and ``path`` the YAML file.

    Raises:
        SpecError: the file is missing, is not valid YAML, or has problems. ``problems``
            lists every one of them as ``"<yaml path>: <what was expected and found>"``, e.g.
            ``models.policy.inputs[0].dtype: expected one of float32, ... but found 'float33'``.
    """
    yaml_path = _find_yaml(Path(path))
    raw, problems = read_yaml(yaml_path)
    spec, found = parse_spec(raw, name=yaml_path.stem, path=yaml_path)
    problems.extend(found)
    escaping = check_containment(spec)  # before any artifact is opened or hashed
    problems.extend(escaping)
    if verify_checksums and not escaping:
        problems.extend(check_checksums(spec))
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
    target = Path(path)
    if target.suffix not in (".yaml", ".yml"):
        target = target / f"{spec.name}.yaml"
    sections = _sections(spec)
    problems = check_extras(spec)
    written, found = parse_spec(sections, name=target.stem, path=target)
    problems.extend(found)
    problems.extend(check_containment(written))
    if problems:
        raise SpecError(_problem_message(target, "would have", problems), tuple(problems))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(_render(sections), encoding="utf-8")
    logger.debug("wrote spec %s", target)
    return written


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
