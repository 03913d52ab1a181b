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

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.page_blocks import Block, page_blocks

from leapp_ros.testing import reserve_domain_id, ros_env

pytest.importorskip(
    "ros2cli",
    reason="ros2cli is not installed: use a ROS 2 install, or run scripts/setup.sh with "
    "../shared/ros2-launch present (it installs ros2cli and the launch stack into .venv)",
)
pytest.importorskip("mujoco", reason="leapp-ros sim needs MuJoCo: pip install 'leapp_ros[sim]'")

pytestmark = [pytest.mark.ros, pytest.mark.launch, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
STEP_TIMEOUT_S = 600.0  # the longest step (train.py) takes about a minute on a busy machine
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
_LIFECYCLE_NODE = re.compile(r"ros2 lifecycle (?:get|set) (/\S+)")


class Background:
    """A block running as in a second terminal: its output collected as it comes."""

    def __init__(self, block: Block, folder: Path, env: dict[str, str]):
        self.block, self.env = block, env
        self.process = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", block.code],
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group, as a terminal's job
        )
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.output.append(line)

    def text(self) -> str:
        return "".join(self.output)

    def wait_ready(self, page: Path, nodes: set[str]) -> None:
        """Until its output shows the block's ready text, then until the ros2 CLI sees
        ``nodes`` and their lifecycle services (discovery takes its time after a node is up)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while self.block.ready not in self.text():
            code = self.process.poll()
            assert code is None, (
                f"{self.block.where(page)}: ended with {code} before {self.block.ready!r}:\n"
                f"{self.text()}"
            )
            assert time.monotonic() < deadline, (
                f"{self.block.where(page)}: no {self.block.ready!r} within {READY_TIMEOUT_S} "
                f"s:\n{self.text()}"
            )
            time.sleep(0.1)
        ros2, seen = shutil.which("ros2"), ""
        if ros2 and nodes:  # asked through the daemon the page's commands will ask
            subprocess.run([ros2, "daemon", "start"], env=self.env, capture_output=True,
                           timeout=READY_TIMEOUT_S)  # fmt: skip
        while ros2 and nodes and not nodes <= set(seen.split()):
            assert time.monotonic() < deadline, (
                f"{self.block.where(page)}: ros2 lifecycle nodes shows no {sorted(nodes)} in "
                f"{READY_TIMEOUT_S} s: {seen!r}\n{self.text()}"
            )
            listed = subprocess.run([ros2, "lifecycle", "nodes"], env=self.env, text=True,
                                    capture_output=True, timeout=READY_TIMEOUT_S)  # fmt: skip
            seen = listed.stdout

    def interrupt(self, page: Path) -> None:
        """Ctrl-C: SIGINT to its process group, then its exit code must be 0."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            code = self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            pytest.fail(f"{self.block.where(page)}: still running {STOP_TIMEOUT_S} s after "
                        f"Ctrl-C:\n{self.text()}")  # fmt: skip
        self._reader.join(timeout=10)
        where = self.block.where(page)
        assert code == 0, f"{where}: exit code {code} after Ctrl-C:\n{self.text()}"


def run_step(block: Block, page: Path, folder: Path, env: dict[str, str]) -> str:
    """Run ``block`` to its end in ``folder``; its output. Fails unless it exits 0."""
    if block.language == "python":
        argv = [sys.executable, "-c", block.code]
    else:
        argv = ["bash", "-euo", "pipefail", "-c", block.code]
    try:
        done = subprocess.run(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=STEP_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{block.where(page)}: not done after {STEP_TIMEOUT_S} s:\n{e.stdout}")
    output = done.stdout + done.stderr
    assert done.returncode == 0, (
        f"{block.where(page)}: exit code {done.returncode}\n$ {block.code}\n{output}"
    )
    return output


def run_page(page: Path, folder: Path, domain_id: int) -> dict[int, str]:
    """Run every step of ``page`` in ``folder``; the output of each foreground step by line."""
    (folder / "examples").symlink_to(ROOT / "examples")
    env = ros_env(domain_id)
    outputs: dict[int, str] = {}
    running: list[Background] = []
    section = None
    blocks = page_blocks(page)
    try:
        for block in blocks:
            if block.section != section:
                while running:
                    running.pop().interrupt(page)
                stop_ros2_daemon(env, domain_id)  # its view of the graph that just stopped
                section = block.section
            if block.mode == "run":
                outputs[block.line] = run_step(block, page, folder, env)
            elif block.mode == "background":
                named = {node for later in blocks if later.section == block.section
                         for node in _LIFECYCLE_NODE.findall(later.code)}  # fmt: skip
                running.append(Background(block, folder, env))
                running[-1].wait_ready(page, named)
        while running:
            running.pop().interrupt(page)
    finally:
        for background in running:  # a failure above: stop what is left, hard
            if background.process.poll() is None:
                os.killpg(background.process.pid, signal.SIGKILL)
                background.process.wait()
        stop_ros2_daemon(env, domain_id)
    return outputs


def stop_ros2_daemon(env: dict[str, str], domain_id: int) -> None:
    """Stop the ros2 CLI's daemon of ``domain_id``, which outlives the commands that started
    it (the page's ``ros2`` commands are written as a reader types them, without
    ``--no-daemon``), and reap it: it is a child of this process (the suite's conftest makes
    pytest the subreaper of what its tests start)."""
    ros2 = shutil.which("ros2")
    if ros2 is None:
        return
    subprocess.run([ros2, "daemon", "stop"], env=env, capture_output=True, timeout=60)
    marker = f"--ros-domain-id {domain_id} "
    for task in Path(f"/proc/{os.getpid()}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in map(int, children):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if b"ros2cli.daemon" in command and marker.encode() in command + b" ":
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)


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
