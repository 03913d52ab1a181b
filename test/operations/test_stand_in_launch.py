"""Under ``ros2 launch leapp_ros pipeline.launch.py`` the stand-in is a process of the launch
too, in every deployment: SIGKILL of the process that runs the policy brings its safe values on
``policy/action`` for as long as it is dead (launch restarts nothing), and an ERROR on
``/diagnostics`` naming the dead process. The robot's inputs stream as in test_stand_in.py;
what counts is the order of the commands, never a window of wall time."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import pytest
from support.runner import Command
from support.stand_in import NAMESPACE, Robot, is_safe, safe_values_params

from leapp_ros.run.deployment import Deployment
from leapp_ros.testing import Probe, reserve_domain_id, ros_env

pytest.importorskip(
    "launch_ros.actions",
    reason="the ROS 2 launch stack is not installed (launch, launch_ros): use a ROS 2 install, "
    "or run scripts/setup.sh with ../shared/ros2-launch present",
)

pytestmark = [pytest.mark.launch, pytest.mark.ros, pytest.mark.slow]

SAFE_MESSAGES = 10  # safe values that must come after the death, and nothing else


def ros2() -> str:
    found = Path(sys.executable).parent / "ros2"
    if found.is_file():
        return str(found)
    if shutil.which("ros2") is None:
        pytest.skip("the ros2 CLI is not installed (scripts/setup.sh installs it)")
    return str(shutil.which("ros2"))


@pytest.mark.parametrize("deployment", list(Deployment), ids=str)
def test_under_ros2_launch_a_killed_command_process_gets_its_safe_action_while_dead(
    seed, tmp_path, deployment
):
    params = safe_values_params(tmp_path)
    argv = [ros2(), "launch", "leapp_ros", "pipeline.launch.py", f"pipeline:={seed.path}",
            f"params_file:={params}", f"deployment:={deployment.value}"]  # fmt: skip
    with reserve_domain_id() as domain_id, Probe(domain_id) as probe:
        robot = Robot(probe, seed)
        launch = Command(argv, ros_env(domain_id))
        try:
            robot.run_until(
                lambda: (
                    robot.records
                    and robot.records[-1]["watching"].get("policy")
                    and any(robot.is_command(c) for c in robot.commands_since(0))
                ),
                "policy commands, and the stand-in watching the policy's process",
            )
            pid = robot.records[-1]["watching"]["policy"]
            mark = len(robot.commands)
            os.kill(pid, signal.SIGKILL)
            robot.run_until(
                lambda: sum(map(is_safe, robot.commands_since(mark))) >= SAFE_MESSAGES
                and any(s.name == f"{NAMESPACE}/policy" and str(pid) in s.message
                        for s in robot.errors),
                f"{SAFE_MESSAGES} safe actions and an ERROR naming the dead process",
            )  # fmt: skip
            after = robot.commands_since(mark)
            start = next(i for i, c in enumerate(after) if is_safe(c))
            assert all(robot.is_command(c) for c in after[:start]), "a wrong command"
            assert all(is_safe(c) for c in after[start:]), "a command from the dead process"
            assert robot.records[-1]["covering"]["policy"]["pid"] == pid
        finally:
            launch.process.send_signal(signal.SIGINT)
            try:
                launch.wait(60)
            finally:
                launch.kill()
