"""From an export to a deployable ROS 2 package: ``leapp-ros generate EXPORT --out DIR``.

:func:`generate_package` writes ``DIR/<package>/``, a complete ament_python package for one
pipeline (default name ``<pipeline>_ros``)::

    package.xml  setup.py  setup.cfg  README.md  .leapp_generated.json
    resource/<package>                   ament index marker
    <package>/__init__.py, __main__.py   finds the installed export; python -m runs the graph
    export/                              the spec, every artifact, examples, initial values
    config/<pipeline>.yaml               node parameters (the file users edit)
    launch/<pipeline>.launch.py          one leapp_node process per pipeline node
    launch/<pipeline>_composed.launch.py every node in one leapp_container process
    launch/<pipeline>_fused.launch.py    one leapp_fused node running every node per tick
    test/test_<pipeline>_topics.py       launch_testing test replaying the traced examples

The launch files return leapp_ros's launch description with the package's defaults. The
package builds with ``colcon build`` on a ROS 2 install and installs with pip where ROS 2
comes from wheels; both put package.xml, launch, config and export under ``share/<package>``.

Example::

    from leapp_ros.tools.generate import generate_package

    result = generate_package("exports/torch_pipeline", "ros2_ws/src")
    print(result.path, result.written)

Regenerating is safe: the same export always gives the same bytes, and
``.leapp_generated.json`` records the sha256 of every generated file. Generated files nobody
changed are rewritten (or removed when no longer generated); files the user added are never
touched; generated files the user edited make :func:`generate_package` raise
:class:`GenerateError` naming them, unless ``force=True``, which overwrites them.
"""

from __future__ import annotations

import hashlib
import json
import keyword
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from leapp.errors import LeappError
from leapp.spec import Spec
from leapp_ros.plan.pipeline import make_plan
from leapp_ros.tools.templates import PackageInfo, render_package

__all__ = [
    "MANIFEST",
    "GenerateError",
    "GeneratedPackage",
    "check_package_name",
    "default_package_name",
    "generate_package",
]

logger = logging.getLogger(__name__)

MANIFEST = ".leapp_generated.json"
_MANIFEST_FORMAT = "leapp-ros-generated/1"
_PACKAGE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
_RESERVED = frozenset({"leapp", "leapp_ros", "test", "tests", "launch", "launch_ros"})


class GenerateError(LeappError):
    """A package cannot be generated: bad name or option, an export file that is missing or
    changed, or generated files the user edited (``files`` names them)."""

    def __init__(self, message: str, files: tuple[str, ...] = ()):
        super().__init__(message)
        self.files = tuple(files)


@dataclass(frozen=True)
class GeneratedPackage:
    """What :func:`generate_package` did. Paths are relative to ``path``, sorted.

    ``written``: created or changed; ``unchanged``: already identical; ``overwritten``: edited
    by the user and overwritten (only with ``force``; also in ``written``); ``removed``:
    generated before, no longer generated, unchanged, so deleted; ``kept``: generated before,
    no longer generated, but edited, so left in place.
    """

    path: Path
    name: str
    pipeline: str
    written: tuple[str, ...]
    unchanged: tuple[str, ...]
    overwritten: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()


def default_package_name(pipeline: str) -> str:
    """``<pipeline>_ros`` made a valid ROS package name (``Torch-Pipeline`` ->
    ``torch_pipeline_ros``)."""
    stem = re.sub(r"[^a-z0-9]+", "_", pipeline.lower()).strip("_")
    if not stem or not stem[0].isalpha():
        stem = f"pipeline_{stem}".rstrip("_")
    return check_package_name(f"{stem}_ros")


def check_package_name(name: str) -> str:
    """``name`` when it is a valid ROS 2 package name (REP 144: lowercase letters, digits and
    single underscores, starting with a letter) that is also a usable Python package name.

    Raises:
        GenerateError: saying what is wrong and suggesting a valid name.
    """
    problem = None
    if not _PACKAGE_NAME.match(name):
        problem = "use lowercase letters, digits and underscores, starting with a letter"
    elif "__" in name:
        problem = "ROS package names must not contain two underscores in a row"
    elif name in _RESERVED or keyword.iskeyword(name):
        problem = "the name is taken by Python, leapp or ROS 2"
    if problem is None:
        return name
    suggestion = re.sub(r"_+", "_", re.sub(r"[^a-z0-9]+", "_", name.lower())).strip("_")
    if not suggestion or not suggestion[0].isalpha() or suggestion in _RESERVED:
        suggestion = f"my_{suggestion}".rstrip("_")
    raise GenerateError(
        f"{name!r} is not a valid ROS 2 package name: {problem}; pass e.g. "
        f"--package-name {suggestion}"
    )


def generate_package(
    export: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    package_name: str | None = None,
    namespace: str | None = None,
    force: bool = False,
    version: str = "0.1.0",
    maintainer: str = "TODO",
    maintainer_email: str = "todo@example.com",
    license: str = "TODO",
) -> GeneratedPackage:
    """Write (or update) the ROS 2 package of ``export`` in ``out/<package name>/``.

    Args:
        export: the export folder, or its ``<name>.yaml``. Its checksums are verified, and
            again while the artifacts are copied.
        out: the folder that receives the package folder, e.g. a colcon workspace's ``src``.
        package_name: default ``<pipeline>_ros``; see :func:`check_package_name`.
        namespace: ROS namespace of the nodes (default: the pipeline name); names the
            sections of ``config/<pipeline>.yaml`` and is the launch files' default.
        force: overwrite generated files the user edited.
        version, maintainer, maintainer_email, license: package.xml and setup.py metadata.

    Returns:
        What was written, left unchanged, overwritten, removed or kept.

    Raises:
        SpecError: the export is missing, invalid or fails its checksums.
        PlanError: the spec cannot be mapped onto ROS 2, or ``namespace`` is invalid.
        GenerateError: a bad name or option; an export file missing or changing while copied;
            generated files edited by the user (without ``force``; ``files`` names them).
    """
    from leapp import spec as spec_module

    spec = spec_module.load(export, verify_checksums=True)
    assert spec.path is not None  # load() sets it
    plan = make_plan(spec, namespace=namespace)
    name = default_package_name(spec.name) if package_name is None else package_name
    check_package_name(name)
    _check_metadata(version, maintainer, maintainer_email, license)
    copies = _export_files(spec)
    examples = spec.pipeline.examples or f"{spec.name}_examples.safetensors"
    info = PackageInfo(
        name=name,
        stem=_file_stem(spec.name),
        plan=plan,
        spec_file=spec.path.name,
        export_files=tuple(sorted(copies)),
        examples_file=examples if examples in copies else None,
        version=version,
        maintainer=maintainer,
        maintainer_email=maintainer_email,
        license=license,
    )
    planned: dict[str, bytes | _Copy] = {
        path: text.encode("utf-8") for path, text in render_package(info).items()
    }
    planned.update({f"export/{path}": copy for path, copy in copies.items()})
    root = Path(out) / name
    result = _sync(root, planned, force=force, name=name, pipeline=spec.name)
    logger.debug("package %s in %s: wrote %s", name, root, ", ".join(result.written) or "none")
    return result


# --- the export's files ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Copy:
    """A file copied from the export; ``sha256`` (and ``md5`` when the spec has one) are
    checked on the bytes as they are copied."""

    source: Path
    sha256: str
    md5: str | None = None


def _export_files(spec: Spec) -> dict[str, _Copy]:
    """Spec, artifacts, examples and initial values, by path relative to the export folder."""
    folder = spec.directory
    assert spec.path is not None
    found = {spec.path.name: _Copy(spec.path, _file_digest(spec.path))}
    for model in spec.models:
        parameters = model.parameters
        if parameters.model_path is None:
            continue
        where = f"models.{model.name}.parameters.model_path"
        relative = _inside(parameters.model_path, where, spec)
        sha256 = parameters.sha256sum or _file_digest(folder / relative)
        found[relative] = _Copy(folder / relative, sha256, parameters.md5sum)
        archive = parameters.extra.get("warp_archive")  # the node's Warp segments (leapp)
        if isinstance(archive, str):
            where = f"models.{model.name}.parameters.warp_archive"
            relative = _inside(archive, where, spec)
            sha256 = parameters.extra.get("warp_sha256sum") or _file_digest(folder / relative)
            found[relative] = _Copy(folder / relative, sha256, parameters.extra.get("warp_md5sum"))
    initial = spec.pipeline.initial_values
    if initial is not None:
        relative = _inside(initial, "pipeline.initial_values", spec)
        if not (folder / relative).is_file():
            raise GenerateError(
                f"{spec.path}: pipeline.initial_values names {initial}, which does not exist "
                f"in {folder}; the nodes cannot start without it: export the pipeline again"
            )
        found[relative] = _Copy(folder / relative, _file_digest(folder / relative))
    examples = spec.pipeline.examples or f"{spec.name}_examples.safetensors"
    relative = _inside(examples, "pipeline.examples", spec)
    if (folder / relative).is_file():
        found[relative] = _Copy(folder / relative, _file_digest(folder / relative))
    elif spec.pipeline.examples:
        logger.warning(
            "%s: pipeline.examples names %s, which does not exist; the generated test will "
            "have nothing to replay (export the pipeline again to capture examples)",
            spec.path,
            examples,
        )
    return found


def _inside(value: str, where: str, spec: Spec) -> str:
    """``value`` as a clean relative POSIX path inside the export folder."""
    path = PurePosixPath(value.replace(os.sep, "/"))
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise GenerateError(
            f"{spec.path}: {where} is {value!r}, which is not a file inside the export "
            "folder; copy the file next to the spec and name it relative to it"
        )
    return path.as_posix()


def _file_stem(pipeline: str) -> str:
    """The pipeline's name made safe for file and module names."""
    stem = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", pipeline)).strip("_")
    return stem if stem and stem[0].isalpha() else f"pipeline_{stem}".rstrip("_")


def _check_metadata(version: str, maintainer: str, email: str, license: str) -> None:
    if not _VERSION.match(version):
        raise GenerateError(f"package version {version!r} must be MAJOR.MINOR.PATCH, e.g. 0.1.0")
    if not maintainer.strip() or not license.strip():
        raise GenerateError("maintainer and license must not be empty")
    if any(not text.isprintable() for text in (maintainer, email, license)):
        raise GenerateError("maintainer, e-mail and license must be one line of printable text")
    if not re.match(r"^[^@\s]+@[^@\s]+$", email):
        raise GenerateError(f"maintainer email {email!r} is not an e-mail address")


# --- writing --------------------------------------------------------------------------------


def _sync(
    root: Path, planned: Mapping[str, bytes | _Copy], *, force: bool, name: str, pipeline: str
) -> GeneratedPackage:
    """Bring ``root`` to ``planned``, protecting user edits (see the module docstring)."""
    if root.exists() and not root.is_dir():
        raise GenerateError(f"{root} exists and is not a folder; remove it or choose --out")
    previous = _read_manifest(root)
    digests = {path: _digest(content) for path, content in planned.items()}
    conflicts, unchanged, changed = [], [], []
    for path in sorted(planned):
        target = root / path
        if target.is_dir():
            raise GenerateError(f"{target} is a folder where a generated file belongs; move it")
        if not target.exists():
            changed.append(path)
            continue
        current = _file_digest(target)
        if current == digests[path]:
            unchanged.append(path)
            continue
        if previous.get(path) != current:
            conflicts.append(path)
        changed.append(path)
    if conflicts and not force:
        listing = "".join(f"\n  {root / path}" for path in conflicts)
        raise GenerateError(
            f"not regenerating package {name}: these generated files were edited (or are "
            f"not leapp's) and would be overwritten:{listing}\nMove your changes to files of "
            "your own (or a copy of the parameters file), or pass --force to overwrite them.",
            tuple(conflicts),
        )
    for path in changed:
        _write(root / path, planned[path])
    removed, kept = [], []
    for path in sorted(set(previous) - set(planned)):
        target = root / path
        if not target.is_file() or target.is_symlink():
            continue
        if _file_digest(target) == previous[path]:
            target.unlink()
            removed.append(path)
        else:
            kept.append(path)
    manifest = {"format": _MANIFEST_FORMAT, "package": name, "pipeline": pipeline}
    manifest["files"] = dict(sorted(digests.items()))  # type: ignore[assignment]
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    _write(root / MANIFEST, text.encode("utf-8"))
    return GeneratedPackage(
        path=root,
        name=name,
        pipeline=pipeline,
        written=tuple(changed),
        unchanged=tuple(unchanged),
        overwritten=tuple(conflicts),
        removed=tuple(removed),
        kept=tuple(kept),
    )


def _read_manifest(root: Path) -> dict[str, str]:
    """The recorded ``{path: sha256}`` of the last generation; empty when there is none."""
    path = root / MANIFEST
    if not path.is_file():
        return {}
    try:
        files = json.loads(path.read_text(encoding="utf-8")).get("files", {})
    except (ValueError, AttributeError, OSError):
        logger.warning("%s is unreadable; treating every file there as the user's", path)
        return {}
    if not isinstance(files, dict):
        return {}
    return {str(key): str(value) for key, value in files.items()}


def _digest(content: bytes | _Copy) -> str:
    if isinstance(content, _Copy):
        return content.sha256
    return hashlib.sha256(content).hexdigest()


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _write(target: Path, content: bytes | _Copy) -> None:
    """Write ``content`` to ``target`` through a temporary file; a copy is verified against
    its checksums on the bytes written."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    try:
        if isinstance(content, bytes):
            partial.write_bytes(content)
        else:
            _copy_verified(content, partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def _copy_verified(copy: _Copy, destination: Path) -> None:
    sha256 = hashlib.sha256()
    md5 = hashlib.md5(usedforsecurity=False)
    with open(copy.source, "rb") as source, open(destination, "wb") as out:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            sha256.update(chunk)
            md5.update(chunk)
            out.write(chunk)
    if sha256.hexdigest() != copy.sha256 or (copy.md5 and md5.hexdigest() != copy.md5):
        raise GenerateError(
            f"{copy.source} does not match its checksum in the spec (expected sha256 "
            f"{copy.sha256}, copied {sha256.hexdigest()}); it changed while being copied or "
            "the export is damaged: export the pipeline again"
        )
