"""The how-to pages whose commands run against an export work as written: every bash block of
each page runs in the page's order (``support.page_run``, as test_tutorial.py runs the
tutorial), in a folder holding the exports the pages name: ``exports/torch_pipeline`` (the
seed) and ``exports/robot_policy`` (examples/robot_policy.py). Background blocks run as in a
second terminal and stop on Ctrl-C with exit code 0; each page's output must show what the
page says it does."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from support.doc_pages import RUN_PAGES
from support.page_run import ROOT, run_page
from support.ros import export_example

from leapp_ros.testing import reserve_domain_id

pytest.importorskip(
    "ros2cli",
    reason="ros2cli is not installed: use a ROS 2 install, or run scripts/setup.sh with "
    "../shared/ros2-launch present (it installs ros2cli and the launch stack into .venv)",
)

pytestmark = [pytest.mark.ros, pytest.mark.launch, pytest.mark.slow]

EXPECTED = {
    "docs/how-to/bags-and-sim.md": [
        "(composed) against leapp.Pipeline on the bag's inputs",
        "(fused) against the recorded outputs",
        "verify passed: every published tensor matches\nplot: run2.png",
        "/torch_pipeline/policy/action  ",
    ],
    "docs/how-to/deployments.md": ["  1  /torch_pipeline/policy", "Unloaded component 1"],
    "docs/how-to/generated-packages.md": ["robot_policy_fused.launch.py"],
    "docs/how-to/nvidia-exports.md": [
        "50 of 50 samples replayed on /nv_pipeline (one process per node)",
        "verify passed",
    ],
    "docs/how-to/multi-host.md": ["Publisher count: 1\nSubscription count: 1"],
    "docs/how-to/perception.md": [
        "obstacle y +0.30 m: ",
        "largest command difference, graph - leapp.Pipeline: 0 (tolerance",
        "sim passed",
    ],
    "docs/how-to/safe-operation.md": ["unconfigured [1]", "Transitioning successful"],
}
"""Each page this module runs, and what its steps' output must show."""


@pytest.fixture(scope="module")
def exports(seed, tmp_path_factory):
    folder = tmp_path_factory.mktemp("exports")
    shutil.copytree(seed.path, folder / "torch_pipeline")
    export_example(folder, "robot_policy", lambda m: m.example_inputs(), no_grad=True)
    return folder


def nvidia_export(folder) -> None:
    """exports/nv_pipeline in ``folder``, written by NVIDIA's leapp 0.7.2 from the script the
    page shows (in a venv of its own: ``LEAPP_NVIDIA_PYTHON``, set by scripts/test.sh)."""
    python = os.environ.get("LEAPP_NVIDIA_PYTHON")
    if not python:
        pytest.skip("LEAPP_NVIDIA_PYTHON does not name a Python with NVIDIA's leapp 0.7.2")
    shutil.copy(ROOT / "docs" / "snippets" / "nvidia_export.py", folder)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([python, "nvidia_export.py"], cwd=folder, env=env, text=True,
                          capture_output=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "with leapp 0.7.2 from" in done.stdout and "site-packages" in done.stdout, done.stdout


def test_this_module_runs_the_pages_doc_pages_lists_for_it():
    assert sorted(EXPECTED) == sorted(
        page for page, runner in RUN_PAGES.items() if runner.endswith("/test_how_to_pages.py")
    )


@pytest.mark.parametrize("page", sorted(EXPECTED))
def test_every_step_of_the_how_to_page_runs_as_written(page, exports, tmp_path):
    shutil.copytree(exports, tmp_path / "exports")
    if page == "docs/how-to/nvidia-exports.md":
        nvidia_export(tmp_path)
    with reserve_domain_id() as domain_id:
        outputs = run_page(ROOT / page, tmp_path, domain_id)
    text = "\n".join(outputs.values())
    for expected in EXPECTED[page]:
        assert expected in text, f"{page}: no {expected!r} in its steps' output:\n{text}"
