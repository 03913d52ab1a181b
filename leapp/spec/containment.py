"""Containment: every file a spec names must lie inside its export folder.

A spec names files relative to its YAML: each model's ``parameters.model_path``, a node's
Warp archive (``parameters.warp_archive``), ``pipeline.initial_values`` and
``pipeline.examples``. An export must never make a reader open anything outside its folder,
so :func:`check_containment` (part of :func:`leapp.spec.load` and :func:`leapp.spec.dump`)
refuses, before any of these files is opened or hashed, a name that is absolute, that has a
``..`` part, or that resolves (symlinks followed) outside the folder.

The export folder is the YAML's folder; when the YAML itself is a symlink (an install that
links files instead of copying them, such as ``colcon build --symlink-install``), the folder
its target lies in counts as the export folder too, so links into the real export are fine.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from leapp.spec.schema import Spec

__all__ = ["check_containment", "named_files"]


def named_files(spec: Spec) -> Iterator[tuple[str, object]]:
    """``(yaml path, value)`` of every file name in ``spec`` (values as written, unchecked)."""
    for model in spec.models:
        where = f"models.{model.name}.parameters"
        yield f"{where}.model_path", model.parameters.model_path
        if "warp_archive" in model.parameters.extra:
            yield f"{where}.warp_archive", model.parameters.extra["warp_archive"]
    yield "pipeline.initial_values", spec.pipeline.initial_values
    yield "pipeline.examples", spec.pipeline.examples


def check_containment(spec: Spec) -> list[str]:
    """Problems with file names of ``spec`` that lead outside its export folder, each
    ``"<yaml path>: <message>"``; ``[]`` for a spec without a file (nothing to resolve
    against). Nothing is opened: only names and symlinks are resolved."""
    if spec.path is None:
        return []
    roots = _roots(spec.path)
    problems = []
    for where, value in named_files(spec):
        if value is None:
            continue
        reason = _escape(value, spec.directory, roots)
        if reason is not None:
            problems.append(
                f"{where}: expected a file inside the export folder {roots[0]} but found "
                f"{value!r}, which {reason}; copy the file into the export folder and name it "
                "relative to the YAML (or re-export the pipeline)"
            )
    return problems


def _roots(yaml_path: Path) -> tuple[Path, ...]:
    """The folders the spec's files may resolve into: the YAML's folder, and the folder of the
    YAML's symlink target."""
    roots = [_resolve(yaml_path.parent)]
    real = _resolve(yaml_path).parent
    if real not in roots:
        roots.append(real)
    return tuple(roots)


def _escape(value: object, directory: Path, roots: tuple[Path, ...]) -> str | None:
    """Why ``value`` is not a file name inside ``roots``, or None when it is one."""
    if not isinstance(value, str) or not value:
        return "is not a file name"
    if "\0" in value:
        return "holds a NUL character"
    name = PurePosixPath(value)
    if name.is_absolute():
        return "is an absolute path"
    if ".." in name.parts:
        return "climbs out with '..'"
    try:
        target = (directory / value).resolve()
    except (OSError, RuntimeError) as e:  # a symlink loop (RuntimeError before Python 3.13)
        return f"cannot be resolved ({e})"
    if not any(target.is_relative_to(root) for root in roots):
        return f"resolves to {target} (a symlink leads out of the folder)"
    return None


def _resolve(path: Path) -> Path:
    """``path`` made absolute with symlinks followed as far as they exist (as written past a
    symlink loop)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
        return path.absolute()
