"""The tutorial (docs/tutorial.md) works as written: every bash and Python block of the page
runs, in the page's order, from a fresh folder that has the repository's ``examples/``, and
exits 0; the blocks a reader runs in a second terminal run in the background until their
section ends, then stop on SIGINT (Ctrl-C) with exit code 0 (``support.page_blocks`` reads
the page's directives). Before the next step, the test waits for the background block's ready
text and until ``ros2 lifecycle nodes`` shows the nodes the section's ``ros2 lifecycle``
commands name: a node is up before the ros2 CLI's discovery has seen its services.

So the page cannot drift from the code: the policy is fitted (``train.py``), exported, run
in MuJoCo through the live graph (``leapp-ros sim`` exits 1 if the graph's commands differ
from ``leapp.Pipeline``'s or the robot falls), a bag verifies, and the graph runs on the
robot's topics with the robot's parameters, through its lifecycle and e-stop, started by
``leapp-ros run`` and by the robot's own launch file. The README's example runs the same way.
"""

from __future__ import annotations

import pytest
from support.page_blocks import page_blocks
from support.page_run import ROOT, run_page

from leapp_ros.testing import reserve_domain_id

pytest.importorskip(
    "ros2cli",
    reason="ros2cli is not installed: use a ROS 2 install, or run scripts/setup.sh with "
    "../shared/ros2-launch present (it installs ros2cli and the launch stack into .venv)",
)
pytest.importorskip("mujoco", reason="leapp-ros sim needs MuJoCo: pip install 'leapp_ros[sim]'")

pytestmark = [pytest.mark.ros, pytest.mark.launch, pytest.mark.slow]


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory):
    page = ROOT / "docs" / "tutorial.md"
    folder = tmp_path_factory.mktemp("tutorial")
    with reserve_domain_id() as domain_id:
        outputs = run_page(page, folder, domain_id)
    return page, folder, outputs


def test_every_step_of_the_tutorial_runs_as_written(tutorial):
    page, folder, outputs = tutorial
    steps = [block for block in page_blocks(page) if block.mode != "shown"]
    assert len(outputs) + sum(b.mode != "run" for b in steps) == len(steps)
    assert (folder / "trained" / "policy.pt").is_file()
    assert (folder / "sim_run" / "bag").is_dir()


def test_the_fitted_policy_walks_like_its_teacher_and_never_falls(tutorial):
    _, _, outputs = tutorial
    train = next(text for text in outputs.values() if "walked x" in text)
    walks = {line.split()[0]: line for line in train.splitlines() if " walked x " in line}
    assert "no fall" in walks["teacher"] and "no fall" in walks["policy"], train
    distance = {name: float(line.split("walked x ")[1].split()[0]) for name, line in walks.items()}
    assert distance["policy"] > 0.8 * distance["teacher"] > 0.5, train


def test_the_graph_walks_the_simulated_robot_as_leapp_pipeline_does(tutorial):
    _, _, outputs = tutorial
    sim = next(text for text in outputs.values() if "leapp-ros sim:" in text)
    assert "0 fall(s)" in sim and "sim passed" in sim, sim
    assert "largest command difference, graph - leapp.Pipeline: 0 " in sim, sim


def test_the_params_file_puts_the_targets_in_the_controllers_order(tutorial):
    _, _, outputs = tutorial
    inspect = next(text for text in outputs.values() if "sent in order" in text)
    assert "sent in order [fl_hip, fr_hip, rl_hip, rr_hip, fl_knee, fr_knee" in inspect, inspect


def test_the_readme_example_runs(tmp_path):
    with reserve_domain_id() as domain_id:
        outputs = run_page(ROOT / "README.md", tmp_path, domain_id)
    assert outputs, "the README has no step to run"
