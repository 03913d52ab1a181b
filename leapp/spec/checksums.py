"""Artifact checksums: computing them (:func:`file_checksums`) and checking a spec's against
the files next to it (:func:`check_checksums`, part of :func:`leapp.spec.load`)."""

from __future__ import annotations

import hashlib
import os

from leapp.spec.schema import ModelSpec, Spec

__all__ = ["check_checksums", "file_checksums"]


def file_checksums(path: str | os.PathLike[str]) -> tuple[str, str]:
    """The ``(md5, sha256)`` hex digests of a file, read in chunks (large files are fine)."""
    md5 = hashlib.md5(usedforsecurity=False)
    sha256 = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            md5.update(chunk)
            sha256.update(chunk)
    return md5.hexdigest(), sha256.hexdigest()


def check_checksums(spec: Spec) -> list[str]:
    """Problems with the artifact files: missing, unreadable, or checksums that differ."""
    problems: list[str] = []

    def add(where: str, message: str) -> None:
        problems.append(f"{where}: {message}")

    for model in spec.models:
        params = model.parameters
        problems += _warp_archive_problems(spec, model)
        if params.model_path is None:
            continue
        where = f"models.{model.name}.parameters"
        file = spec.directory / params.model_path
        if not file.is_file():
            add(
                f"{where}.model_path",
                f"expected the artifact of node {model.name!r} at {file} but there is no such "
                "file; re-export the pipeline or copy the file next to the YAML",
            )
            continue
        if params.sha256sum is None:
            add(
                f"{where}.sha256sum",
                f"expected a sha256sum to verify {file} (node {model.name!r}) but found none; "
                "re-export the pipeline or load with verify_checksums=False",
            )
            continue
        try:
            digests = dict(zip(("md5sum", "sha256sum"), file_checksums(file), strict=True))
        except OSError as e:
            add(f"{where}.model_path", f"cannot read {file} (node {model.name!r}): {e}")
            continue
        for key, actual in digests.items():
            expected = getattr(params, key)
            if expected is not None and expected.lower() != actual:
                add(
                    f"{where}.{key}",
                    f"expected {file} (node {model.name!r}) to have {key} {expected} but found "
                    f"{actual}; the file changed after export: re-export the pipeline or "
                    "restore the original file",
                )
    return problems


def _warp_archive_problems(spec: Spec, model: ModelSpec) -> list[str]:
    """The node's Warp archive (``parameters.warp_archive``, ours) against its checksums."""
    extra = model.parameters.extra
    name = extra.get("warp_archive")
    if name is None:
        return []
    where = f"models.{model.name}.parameters"
    file = spec.directory / str(name)
    if not file.is_file():
        return [
            f"{where}.warp_archive: expected the Warp archive of node {model.name!r} at {file} "
            "but there is no such file; re-export the pipeline or copy the file next to the YAML"
        ]
    try:
        actual = dict(zip(("warp_md5sum", "warp_sha256sum"), file_checksums(file), strict=True))
    except OSError as e:
        return [f"{where}.warp_archive: cannot read {file} (node {model.name!r}): {e}"]
    if extra.get("warp_sha256sum") is None:
        return [
            f"{where}.warp_sha256sum: expected a sha256sum to verify {file} (node "
            f"{model.name!r}) but found none; re-export the pipeline or load with "
            "verify_checksums=False"
        ]
    return [
        f"{where}.{key}: expected {file} (node {model.name!r}) to have {key} {extra[key]} but "
        f"found {value}; the file changed after export: re-export the pipeline or restore the "
        "original file"
        for key, value in actual.items()
        if extra.get(key) is not None and str(extra[key]).lower() != value
    ]
