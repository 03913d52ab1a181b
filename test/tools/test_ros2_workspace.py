"""The ROS 2 user's path, end to end, in a temporary colcon workspace, as
docs/how-to/colcon.md writes it: that page's commands, run here as written.

Export the seed pipeline into ``ws/exports``; copy this repository (the leapp_ros package)
into ``ws/src``; then the page's build steps run in ``ws`` (``support.page_run``): ``colcon
build``, ``source install/setup.bash``, ``ros2 run leapp_ros leapp-ros generate`` the export's
package into ``ws/src``, ``colcon build`` and source again; then, with the page's command
lines (:data:`LAUNCH_GENERATED` and the other constants, checked against the page by
test/docs/test_doc_blocks.py):
``colcon test`` of the generated package (its launch_testing test replays the traced examples
and random ticks over real topics, under each launch file) and of leapp_ros (a fast subset, see
LEAPP_ROS_COLCON_SUBSET), each with nothing skipped (``colcon test-result`` counts a skip as no
failure: here a skip fails); ``ros2 launch`` of the generated launch file (also with
``autostart:=false``, brought up with ``ros2 lifecycle set ... configure`` and ``activate``) and
of ``leapp_ros pipeline.launch.py ... deployment:=composed``, each answering a client over real
topics with the actions eager PyTorch computes (examples/torch_pipeline.py's functions, traced
in this process), and SIGINT to ``ros2 launch`` stopping every node cleanly.

Needs colcon, ros2cli and the launch stack (a ROS 2 install, or ``scripts/setup.sh`` with
``../shared/ros2-launch`` present); skipped with that reason elsewhere. Every process runs in a
ROS domain of this module's own with localhost discovery.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip(
    "launch_testing.actions",
    reason="the ROS 2 launch stack is not installed (launch, launch_ros, launch_testing, "
    "ros2cli, colcon): use a ROS 2 install, or run scripts/setup.sh with ../shared/ros2-launch "
    "present",
)

import torch
from graph_client import descendants  # the processes a command started
from support.page_run import run_page
from support.ros import eager_seed
from support.runner import REPO, Command, SeedIO, pid_alive, wait_until

from leapp_ros.testing import Probe, claim_domain_id, ros_env

pytestmark = [pytest.mark.ros, pytest.mark.launch, pytest.mark.slow]

PACKAGE = "torch_pipeline_ros"
NAMESPACE = "/torch_pipeline"
NODES = ("preprocess", "policy")
LAUNCH_FILES = ("torch_pipeline.launch.py", "torch_pipeline_composed.launch.py",
                "torch_pipeline_fused.launch.py")  # fmt: skip
BIN = Path(sys.executable).parent
# What `colcon test --packages-select leapp_ros` runs here: the whole suite takes minutes and
# runs in CI anyway, so this checks that colcon finds and runs leapp_ros's pytest tests.
LEAPP_ROS_COLCON_SUBSET = ("test/ros/test_ros_plan.py", "test/ros/test_ros_messages.py")
PAGE = "docs/how-to/colcon.md"  # its build steps run in the workspace fixture
# the page's other command lines, run from the workspace's folder as written there
LAUNCH_GENERATED = "ros2 launch torch_pipeline_ros torch_pipeline.launch.py"
LAUNCH_COMPOSED = "ros2 launch leapp_ros pipeline.launch.py pipeline:=exports/torch_pipeline deployment:=composed"  # noqa: E501
TEST_GENERATED = "colcon test --packages-select torch_pipeline_ros --return-code-on-test-failure --pytest-args -s"  # noqa: E501
RESULTS_GENERATED = "colcon test-result --verbose --test-result-base build/torch_pipeline_ros"
# Not copied into the workspace: environments, build outputs, caches.
_NOT_SOURCES = shutil.ignore_patterns(
    ".git",
    ".venv*",
    "build",
    "install",
    "log",
    "out",
    "__pycache__",
    ".pytest_cache",
    "*.egg-info",
)


def tool(name: str) -> str:
    """The executable ``name`` next to this Python, else on PATH."""
    found = BIN / name if (BIN / name).is_file() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed (ROS 2 launch stack / colcon)")
    return str(found)


def argv_of(line: str) -> list[str]:
    """``line`` as argv, its program found by :func:`tool`."""
    argv = shlex.split(line)
    return [tool(argv[0]), *argv[1:]]


def run(argv: list[str], env: dict[str, str], cwd: Path, timeout_s: float) -> str:
    """``argv`` to completion; its merged output. Fails with that output on a non-zero exit."""
    done = subprocess.run(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout_s,
    )
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}"
    return done.stdout


def sourced(setup_bash: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` after ``source <setup_bash>``, as a user's shell has it."""
    done = subprocess.run(
        ["bash", "-c", 'source "$0" && env -0', str(setup_bash)],
        env=env,
        capture_output=True,
        check=True,
        timeout=60,
    )
    pairs = (item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)
    return dict(pairs)


@pytest.fixture(scope="module")
def domain_id():
    domain, lock = claim_domain_id()
    yield domain
    lock.close()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, domain_id):
    """The built workspace: ``(root, seed, env after source install/setup.bash)``; ``seed``
    is the seed export (``seed.path``) and the eager functions it was traced from."""
    from support.ros import export_seed

    root = tmp_path_factory.mktemp("ws")
    seed = export_seed(root / "exports")
    tool("colcon"), tool("ros2")  # skip where they are missing
    env = ros_env(domain_id, {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    shutil.copytree(REPO, root / "src" / "leapp_ros", ignore=_NOT_SOURCES, symlinks=True)
    run_page(REPO / PAGE, root, domain_id, env)
    return root, seed, sourced(root / "install" / "setup.bash", env)


def colcon_test(root: Path, env: dict[str, str], test: str, results: str) -> str:
    """The ``colcon test`` line ``test``, then the ``colcon test-result`` line ``results``;
    their output."""
    return run(argv_of(test), env, root, 300) + run(argv_of(results), env, root, 60)


def test_colcon_build_installs_both_packages_with_their_executables_and_files(workspace):
    root, _, env = workspace
    install = root / "install"
    for executable in ("leapp_node", "leapp_container", "leapp-ros"):
        assert (install / "leapp_ros" / "lib" / "leapp_ros" / executable).is_file()
    share = install / PACKAGE / "share" / PACKAGE
    assert (share / "export" / "torch_pipeline.yaml").is_file()
    assert (share / "launch" / "torch_pipeline_composed.launch.py").is_file()
    prefixes = env["AMENT_PREFIX_PATH"].split(os.pathsep)
    assert str(install / PACKAGE) in prefixes and str(install / "leapp_ros") in prefixes


def count_tests(output: str) -> int:
    """The test count of ``colcon test-result``'s summary; it must report no error, no
    failure and nothing skipped (colcon counts a skipped test as no failure: a test that did
    not run, such as the whole launch test where launch_testing is missing, fails here)."""
    summary = re.search(
        r"Summary: (\d+) tests?, (\d+) errors?, (\d+) failures?, (\d+) skipped", output
    )
    assert summary, f"no colcon test-result summary in:\n{output}"
    total, errors, failures, skipped = map(int, summary.groups())
    assert (errors, failures, skipped) == (0, 0, 0), output
    return total


def test_colcon_test_runs_the_generated_launch_test_and_it_passes(workspace):
    """Under each launch file, both active tests of the generated launch_testing test ran and
    passed. launch_testing's pytest plugin reports one item for all runs and counts a test
    skipped inside it as passed, so its own unittest output (pytest -s) is read too: each run
    says ``Ran 2 tests`` and ``OK``, never ``OK (skipped=N)``."""
    root, _, env = workspace
    tested = colcon_test(root, env, TEST_GENERATED, RESULTS_GENERATED)
    assert count_tests(tested) == 1  # one launch_testing item
    log = root / "log" / "latest_test" / PACKAGE / "stdout_stderr.log"  # pytest's output
    output = log.read_text(errors="replace")
    for launch_file in LAUNCH_FILES:
        for test in ("every_planned_topic_exists_with_its_type",
                     "every_published_tensor_matches_its_reference"):  # fmt: skip
            assert f"test_{test}[{launch_file}] (" in output, output
    assert len(re.findall(r"^Ran 2 tests in \S+\n\nOK$", output, re.MULTILINE)) == 3, output
    assert "skipped=" not in output, output


def test_colcon_test_runs_leapp_ros_pytest_tests_and_they_pass(workspace):
    root, _, env = workspace
    test = "colcon test --packages-select leapp_ros --return-code-on-test-failure --pytest-args"
    results = "colcon test-result --verbose --test-result-base build/leapp_ros"
    output = colcon_test(root, env, f"{test} {' '.join(LEAPP_ROS_COLCON_SUBSET)}", results)
    assert count_tests(output) >= 10  # pytest ran: unittest would have found nothing


def launch_and_answer(
    argv: list[str],
    env: dict[str, str],
    seed: SimpleNamespace,
    domain_id: int,
    tmp: Path,
    root: Path,
    bring_up: Callable[[], None] | None = None,
) -> None:
    """``ros2 launch ...`` in the workspace's folder ``root``, with ``tmp`` as its temporary
    folder: every node ready (after
    ``bring_up()``, given one), three random state / velocity pairs each answered with the
    action eager PyTorch computes, then SIGINT stops ros2 launch and every process it started
    with exit code 0, leaving no launch_params_* file in ``tmp`` (launch_ros never removes the
    YAML file it writes for a node's dict parameters)."""
    command = Command(argv, {**env, "TMPDIR": str(tmp)}, cwd=root)
    probe = Probe(domain_id)
    try:
        if bring_up is not None:
            bring_up()
        probe.wait_ready(NAMESPACE, NODES, timeout_s=90, check=lambda: exited(command))
        io = SeedIO(probe, NAMESPACE)
        for _ in range(3):
            state, velocity = torch.randn(6) * 2, torch.randn(3)
            _, expected = eager_seed(seed, state, velocity)
            torch.testing.assert_close(io.step(state, velocity, expected, 20), expected)
        children = descendants(command.process.pid)
        assert children, command.output
        command.process.send_signal(signal.SIGINT)
        assert command.wait(60) == 0, command.output
        assert wait_until(lambda: not any(map(pid_alive, children)), 10), command.output
        finished = re.findall(r"process has finished cleanly \[pid (\d+)\]", command.output)
        assert set(children) <= set(map(int, finished)), command.output
        assert "process has died" not in command.output, command.output
        assert not list(tmp.glob("launch_params_*")), command.output
    finally:
        probe.close()
        command.kill()


def exited(command: Command) -> None:
    if command.process.poll() is not None:
        raise AssertionError(f"ros2 launch exited early:\n{command.output}")


def test_ros2_launch_of_the_generated_package_answers_like_eager_and_stops_on_sigint(
    workspace, domain_id, tmp_path
):
    root, seed, env = workspace
    launch_and_answer(argv_of(LAUNCH_GENERATED), env, seed, domain_id, tmp_path, root)


def ros2_lifecycle(env: dict[str, str], node: str, *transition: str) -> str:
    """``ros2 lifecycle get NODE`` (or ``set NODE TRANSITION``), retried until the CLI has
    discovered the node (no daemon: each call discovers the graph afresh); its output."""
    verb = ["set", node, *transition] if transition else ["get", node]
    argv = [tool("ros2"), "lifecycle", *verb, "--no-daemon", "--spin-time", "2"]
    deadline = time.monotonic() + 60
    while True:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        if done.returncode == 0 or "Node not found" not in done.stderr:
            break
        assert time.monotonic() < deadline, f"{' '.join(argv)}: {done.stdout}{done.stderr}"
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stdout}{done.stderr}"
    if transition:  # `set` exits 0 also when the transition failed
        assert "Transitioning successful" in done.stdout, done.stdout + done.stderr
    return done.stdout.strip()


def test_ros2_launch_of_the_generated_package_with_autostart_false_waits_for_ros2_lifecycle(
    workspace, domain_id, tmp_path
):
    root, seed, env = workspace
    argv = [*argv_of(LAUNCH_GENERATED), "autostart:=false"]
    nodes = [f"{NAMESPACE}/{node}" for node in NODES]

    def bring_up() -> None:
        # both nodes at once, as two terminals would (each call discovers the graph afresh)
        with ThreadPoolExecutor(len(nodes)) as pool:
            states = list(pool.map(lambda node: ros2_lifecycle(env, node), nodes))
            assert all(state.startswith("unconfigured") for state in states), states
            for transition in ("configure", "activate"):  # each checks "Transitioning successful"
                list(pool.map(lambda node, t=transition: ros2_lifecycle(env, node, t), nodes))

    launch_and_answer(argv, env, seed, domain_id, tmp_path, root, bring_up)


def test_ros2_launch_pipeline_composed_answers_like_eager_and_stops_on_sigint(
    workspace, domain_id, tmp_path
):
    root, seed, env = workspace
    launch_and_answer(argv_of(LAUNCH_COMPOSED), env, seed, domain_id, tmp_path, root)
