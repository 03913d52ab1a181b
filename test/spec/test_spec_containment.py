"""Rules of leapp.spec.containment: every file a spec names lies inside its export folder, and
one that does not is refused before anything outside is opened."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml
from support.eager import export_function

from leapp import spec as spec_file
from leapp.errors import SpecError
from leapp.run.pipeline import Pipeline

# --- recording what is opened ---------------------------------------------------------------

_opened: list[str] | None = None


def _record_opens(event: str, args: tuple) -> None:
    """Audit hook: every Python-level open (builtins.open, io.open, os.open, Path.open)."""
    if event == "open" and _opened is not None and isinstance(args[0], (str, bytes, Path)):
        _opened.append(os.path.realpath(os.fsdecode(args[0])))


sys.addaudithook(_record_opens)  # permanent, but records only inside `opened_files`


@pytest.fixture
def opened_files():
    """The real paths of the files opened during the test."""
    global _opened
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


# --- exports --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """A one-node jit export with its examples file, plus an initial values file and a Warp
    archive that its spec does not name yet."""
    compiled = export_function(
        tmp_path_factory.mktemp("exported"), lambda x: x * 2, {"x": torch.ones(3)}, "jit"
    )
    folder = compiled.spec.directory
    from safetensors.torch import save_file

    save_file({"node/x": torch.zeros(3)}, str(folder / "initial.safetensors"))
    (folder / "node.warp").write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip archive
    return folder


@pytest.fixture
def layout(tmp_path, exported) -> tuple[Path, Path]:
    """``(export folder, outside folder)``: a fresh copy of the export, and beside it a folder
    holding a copy of every export file (same bytes, same checksums)."""
    folder = tmp_path / "exports" / "pipe"
    shutil.copytree(exported, folder)
    outside = tmp_path / "outside"
    shutil.copytree(exported, outside)
    return folder, outside


#: entry -> (YAML path of the entry, the file the export names there)
ENTRIES = {
    "model_path": ("models.node.parameters.model_path", "node.pt"),
    "examples": ("pipeline.examples", "pipe_examples.safetensors"),
    "initial_values": ("pipeline.initial_values", "initial.safetensors"),
    "warp_archive": ("models.node.parameters.warp_archive", "node.warp"),
}


def name_file(folder: Path, entry: str, value: str) -> None:
    """Make the spec in ``folder`` name ``value`` at ``entry`` (a key of ENTRIES)."""
    path = folder / "pipe.yaml"
    document = yaml.safe_load(path.read_text())
    if entry in ("model_path", "warp_archive"):
        document["models"]["node"]["parameters"][entry] = value
    else:
        document["pipeline"][entry] = value
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def escape_with_dots(folder: Path, outside: Path, file: str) -> str:
    return f"../../outside/{file}"


def escape_with_absolute_path(folder: Path, outside: Path, file: str) -> str:
    return str(outside / file)


def escape_with_symlink(folder: Path, outside: Path, file: str) -> str:
    (folder / f"linked_{file}").symlink_to(outside / file)
    return f"linked_{file}"


def escape_with_symlinked_folder(folder: Path, outside: Path, file: str) -> str:
    (folder / "sub").symlink_to(outside, target_is_directory=True)
    return f"sub/{file}"


ESCAPES: list[Callable[[Path, Path, str], str]] = [
    escape_with_dots,
    escape_with_absolute_path,
    escape_with_symlink,
    escape_with_symlinked_folder,
]


def assert_refused(error: SpecError, entry: str, value: str) -> None:
    where = ENTRIES[entry][0]
    assert any(p.startswith(f"{where}: ") and repr(value) in p for p in error.problems), (
        error.problems
    )
    assert "inside the export folder" in str(error)


def assert_not_opened(opened: list[str], outside: Path) -> None:
    inside = [p for p in opened if Path(p).is_relative_to(outside.resolve())]
    assert inside == [], f"opened outside the export folder: {inside}"


# --- rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("escape", ESCAPES, ids=lambda f: f.__name__)
def test_load_refuses_a_file_outside_the_export_before_opening_it(
    layout, opened_files, entry, escape
):
    folder, outside = layout
    value = escape(folder, outside, ENTRIES[entry][1])
    name_file(folder, entry, value)
    with pytest.raises(SpecError) as caught:
        spec_file.load(folder, verify_checksums=True)
    assert_refused(caught.value, entry, value)
    assert_not_opened(opened_files, outside)


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_load_refuses_a_file_outside_the_export_without_verifying_checksums(layout, entry):
    folder, outside = layout
    value = escape_with_dots(folder, outside, ENTRIES[entry][1])
    name_file(folder, entry, value)
    with pytest.raises(SpecError) as caught:
        spec_file.load(folder, verify_checksums=False)
    assert_refused(caught.value, entry, value)


def test_load_refuses_dots_that_climb_out_and_back_in(layout):
    folder, _ = layout
    name_file(folder, "model_path", "../pipe/node.pt")
    with pytest.raises(SpecError) as caught:
        spec_file.load(folder)
    assert_refused(caught.value, "model_path", "../pipe/node.pt")
    assert "'..'" in str(caught.value)


@pytest.mark.parametrize("entry", ["model_path", "examples", "initial_values"])
def test_load_accepts_a_symlink_to_a_file_inside_the_export(layout, entry):
    folder, _ = layout
    file = ENTRIES[entry][1]
    (folder / "store").mkdir()
    (folder / file).rename(folder / "store" / file)
    (folder / file).symlink_to(Path("store") / file)
    name_file(folder, entry, file)
    loaded = spec_file.load(folder, verify_checksums=True)
    assert (loaded.directory / file).resolve() == (folder / "store" / file).resolve()


def test_load_accepts_files_in_a_subfolder_of_the_export(layout):
    folder, _ = layout
    (folder / "artifacts").mkdir()
    (folder / "node.pt").rename(folder / "artifacts" / "node.pt")
    name_file(folder, "model_path", "artifacts/node.pt")
    assert spec_file.load(folder).model("node").parameters.model_path == "artifacts/node.pt"


def test_load_accepts_an_export_linked_file_by_file_into_another_folder(layout, tmp_path):
    """What an install that links instead of copying makes (colcon --symlink-install)."""
    folder, _ = layout
    name_file(folder, "initial_values", "initial.safetensors")
    installed = tmp_path / "install" / "pipe"
    installed.mkdir(parents=True)
    for file in folder.iterdir():
        (installed / file.name).symlink_to(file)
    assert spec_file.load(installed, verify_checksums=True).directory == installed


def test_load_refuses_a_symlink_loop(layout):
    folder, _ = layout
    (folder / "loop").symlink_to("loop")
    name_file(folder, "model_path", "loop")
    with pytest.raises(SpecError) as caught:
        spec_file.load(folder)
    assert any(p.startswith("models.node.parameters.model_path: ") for p in caught.value.problems)


def test_load_refuses_a_warp_archive_that_is_not_a_file_name(layout):
    folder, _ = layout
    name_file(folder, "warp_archive", ["node.warp"])
    with pytest.raises(SpecError, match=r"warp_archive: .* is not a file name"):
        spec_file.load(folder)


def test_pipeline_load_refuses_an_artifact_outside_the_export(layout, opened_files):
    folder, outside = layout
    (folder / "node.pt").unlink()
    (folder / "node.pt").symlink_to(outside / "node.pt")
    with pytest.raises(SpecError):
        Pipeline.load(folder)
    assert_not_opened(opened_files, outside)


def test_generate_package_refuses_an_artifact_outside_the_export(layout, tmp_path, opened_files):
    from leapp_ros.tools.generate import generate_package

    folder, outside = layout
    name_file(folder, "model_path", str(outside / "node.pt"))
    with pytest.raises(SpecError):
        generate_package(folder, tmp_path / "src")
    assert_not_opened(opened_files, outside)
    assert not (tmp_path / "src").exists()


def test_dump_refuses_a_spec_naming_a_file_outside_the_folder(layout, tmp_path):
    import dataclasses

    folder, _ = layout
    loaded = spec_file.load(folder)
    escaping = dataclasses.replace(
        loaded, pipeline=dataclasses.replace(loaded.pipeline, examples="/etc/passwd")
    )
    with pytest.raises(SpecError, match=r"pipeline\.examples: .*'/etc/passwd'"):
        spec_file.dump(escaping, tmp_path / "written")
