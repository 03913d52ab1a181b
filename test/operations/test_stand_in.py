"""A node process that dies without its goodbye gets a stand-in, over real DDS, in every
deployment: the seed graph runs under the runner with restarts and a parameters file that gives
the policy's ``action`` fixed safe values; the test streams the robot's inputs as a robot does
and SIGKILLs the process that runs the policy.

What counts is the order of events, never a window of wall time: after the process ended
(a pidfd of its own tells the test), the commands on ``policy/action`` are the safe values
until the restarted process is active, then the policy's commands again (eager PyTorch),
with no policy command in between and no safe value after; ``/diagnostics`` has an ERROR
for the node naming the dead process. An orderly stop of the same process (SIGINT: the node
says goodbye and publishes its own safe action once) leaves the stand-in quiet. The time
from the SIGKILL to the first safe value's source timestamp is printed (``-s``) for the record.
"""

from __future__ import annotations

import os
import select
import signal
import time

import pytest
from support.stand_in import NAMESPACE, Robot, is_safe, safe_values_params

from leapp_ros.run.deployment import Deployment, GraphOptions
from leapp_ros.run.processes import load_plan, plan_processes
from leapp_ros.run.runner import make_graph
from leapp_ros.testing import Probe, reserve_domain_id, ros_env

pytestmark = [pytest.mark.ros, pytest.mark.slow]

WAIT_S = 90.0  # a generous bound on any one event (a restart loads torch on a busy machine)


@pytest.fixture(scope="module")
def params(tmp_path_factory):
    return safe_values_params(tmp_path_factory.mktemp("params"))


def policy_label(plan, options) -> str:
    (process,) = [p for p in plan_processes(plan, options) if "policy" in p.pipeline_nodes]
    return process.label


def ended(pidfd: int) -> bool:
    return bool(select.select([pidfd], [], [], 0)[0])


def started_graph(seed, deployment, params, domain_id):
    options = GraphOptions(deployment, params_file=params)
    graph = make_graph(seed.path, options, restart=True, env=ros_env(domain_id, base={}))
    return graph.start(), policy_label(load_plan(seed.path, params_file=params), options)


def commanding(robot: Robot, graph, label: str) -> int:
    """Stream until the policy commands from the process ``label`` and the stand-in watches
    it; its pid."""
    assert graph.wait_ready(WAIT_S), graph.failure
    pid = graph.pids[label]
    mark = len(robot.commands)
    robot.run_until(
        lambda: (
            robot.watching("policy", pid)
            and any(robot.is_command(c) for c in robot.commands_since(mark))
        ),
        "policy commands, and the stand-in watching the policy's process",
    )
    return pid


@pytest.mark.parametrize("deployment", list(Deployment), ids=str)
def test_a_killed_command_process_is_stood_in_for_until_it_is_back_and_active(
    seed, params, deployment
):
    with reserve_domain_id() as domain_id, Probe(domain_id) as probe:
        robot = Robot(probe, seed)
        graph, label = started_graph(seed, deployment, params, domain_id)
        try:
            pid = commanding(robot, graph, label)
            pidfd = os.pidfd_open(pid)
            killed_at, kill_time = time.time_ns(), time.monotonic()
            os.kill(pid, signal.SIGKILL)
            exit_seen: list[float] = []
            robot.run_until(
                lambda: exit_seen, "the killed process to end",
                also=lambda: ended(pidfd) and not exit_seen and exit_seen.append(
                    (time.monotonic(), len(robot.commands))),
            )  # fmt: skip
            (exit_time, at_exit), *_ = exit_seen
            os.close(pidfd)
            robot.run_until(
                lambda: any(is_safe(c) for c in robot.commands_since(at_exit)),
                "the safe action after the exit",
            )
            first = at_exit + next(i for i, c in enumerate(robot.commands_since(at_exit))
                                   if is_safe(c))  # fmt: skip
            first_safe = robot.commands[first][0]
            published = robot.sent_at[first] - killed_at
            robot.run_until(
                lambda: any(s.name == f"{NAMESPACE}/policy" and str(pid) in s.message
                            for s in robot.errors),
                "an ERROR on /diagnostics naming the node and the dead process",
            )  # fmt: skip
            robot.run_until(
                lambda: (
                    graph.pids.get(label) not in (None, pid)
                    and robot.watching("policy", graph.pids[label])
                    and any(robot.is_command(c) for c in robot.commands_since(at_exit))
                    and not robot.records[-1]["covering"]
                ),
                "the policy's commands from the restarted process, the stand-in done",
            )
            after = robot.commands_since(at_exit)
            # in flight when the process died, the policy's last commands can still arrive
            start = next(i for i, c in enumerate(after) if is_safe(c))
            assert all(robot.is_command(c) for c in after[:start]), "a wrong command"
            resumed = next(i for i, c in enumerate(after) if i > start and not is_safe(c))
            assert all(is_safe(c) for c in after[start:resumed]), "a command while dead"
            assert all(robot.is_command(c) for c in after[resumed:]), "a safe value or a "
            "wrong command after the policy's commands resumed"
            covered = [r for r in robot.records if "policy" in r["covering"]]
            assert covered and covered[0]["covering"]["policy"]["pid"] == pid
            print(
                f"\n{deployment}: the stand-in published the first safe action "
                f"{published / 1e6:.1f} ms after the SIGKILL (source timestamp; the test saw "
                f"the process end {1000 * (exit_time - kill_time):.1f} ms after it, and took "
                f"the safe action {1000 * (first_safe - exit_time):.1f} ms after that); "
                f"{resumed - start} safe action messages until the restarted policy commanded"
            )
        finally:
            assert graph.stop(60) is not None


@pytest.mark.parametrize("deployment", list(Deployment), ids=str)
def test_an_orderly_stop_leaves_the_stand_in_quiet(seed, params, deployment):
    with reserve_domain_id() as domain_id, Probe(domain_id) as probe:
        robot = Robot(probe, seed)
        graph, label = started_graph(seed, deployment, params, domain_id)
        try:
            pid = commanding(robot, graph, label)
            mark = len(robot.commands)
            os.kill(pid, signal.SIGINT)  # the node says goodbye; the runner restarts it

            def resumed() -> bool:
                after = robot.commands_since(mark)
                last_word = next((i for i, c in enumerate(after) if is_safe(c)), len(after))
                return any(robot.is_command(c) for c in after[last_word:])

            robot.run_until(
                lambda: (
                    graph.pids.get(label) not in (None, pid)
                    and robot.watching("policy", graph.pids[label])
                    and resumed()
                ),
                "the policy's commands from the restarted process",
            )
            after = robot.commands_since(mark)
            safe = [c for c in after if is_safe(c)]
            assert len(safe) == 1, "the node's own last word only, nothing from a stand-in"
            assert not any("policy" in r["covering"] for r in robot.records)
            assert not [s for s in robot.errors if "stand-in" in s.message]
        finally:
            assert graph.stop(60) is not None
