"""A simulated arm stays up when the process that commands it is killed, in every deployment
mode: the stand-in holds its last command until the restarted process commands again, and
every command the arm gets is right.

The MuJoCo arm of :mod:`support.sim` runs in lockstep with the live graph
(:class:`support.closed_loop.ClosedLoop`, the parameters of the fault test: ``input_timeout_ms``
100, ``rate_hz`` 50, ``safe_action: hold`` on the joint targets, joint limits and ``max_step``),
under the runner with restarts. After normal ticks the test SIGKILLs the process that runs the
policy (its own process, the container, or the fused node) and goes on ticking, unanswered, as
the robot's sensors do: the stand-in (:mod:`leapp_ros.run.stand_in`) publishes the hold, the
runner starts the process again, and once the stand-in's record says the restarted process is
watched and the node no longer stood in for, the ticks are answered again.

Every command that arrives is eager PyTorch on the latest tick after the limits, or the hold;
anything else is wrong. The restarted node starts its limits afresh (no last command, so its
first command is not step-limited: the loop expects exactly that). The arm is up at every
tick. ``pytest -s`` prints the time from the SIGKILL to the first hold, the holds until the
restarted node commanded, and the time from the stand-in's handover to the first command.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
import yaml
from support.closed_loop import START, ClosedLoop, params_document
from support.sim import Arm, export_arm_policy, write_arm_model

from leapp_ros.plan.pipeline import STAND_IN_TOPIC
from leapp_ros.run.processes import plan_processes
from leapp_ros.testing import Deployment, GraphOptions, GraphUnderTest
from leapp_ros.testing.probe import qos

pytestmark = [pytest.mark.ros, pytest.mark.slow]

UP_FRACTION = 0.9  # as in test_closed_loop_faults.py
UP_DEVIATION = 0.35
NORMAL_TICKS = 40
HOLDS = 5  # holds from the stand-in before the restart may end the fault
LIMIT_TICKS = 3000  # the most ticks (at 50 Hz: a minute) the restart may take


@pytest.fixture(scope="module")
def arm_export(tmp_path_factory):
    return export_arm_policy(tmp_path_factory.mktemp("arm_export"))


class StandInRecords(list):
    """The stand-in's records, as the probe receives them."""

    def __init__(self, graph: GraphUnderTest):
        from std_msgs.msg import String

        super().__init__()
        graph.probe.node.create_subscription(
            String,
            f"{graph.plan.namespace}/{STAND_IN_TOPIC}",
            lambda message: self.append(json.loads(message.data)),
            qos(depth=100, transient_local=True),
        )

    def handed_over(self, pid: int) -> bool:
        """The stand-in watches ``pid`` for the policy and stands in for nobody."""
        return (
            bool(self) and self[-1]["watching"].get("policy") == pid and not self[-1]["covering"]
        )


@pytest.mark.parametrize("deployment", list(Deployment), ids=str)
def test_the_arm_stays_up_and_gets_only_right_commands_when_its_command_process_is_killed(
    arm_export, tmp_path, deployment
):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(params_document()), encoding="utf-8")
    options = GraphOptions(deployment, params_file=params)
    arm = Arm(write_arm_model(tmp_path), START)
    with (
        open(tmp_path / "nodes.log", "w", encoding="utf-8") as log,
        GraphUnderTest(arm_export.path, options, restart=True, output=log) as graph,
    ):
        (label,) = [p.label for p in plan_processes(graph.plan, options)
                    if "policy" in p.pipeline_nodes]  # fmt: skip
        records = StandInRecords(graph)
        loop = ClosedLoop(graph, arm_export.policy, arm)
        old = graph.pids[label]
        assert loop.run_until(lambda: records.handed_over(old), NORMAL_TICKS), records
        loop.run(NORMAL_TICKS)
        assert not loop.missing and not loop.wrong, (loop.missing, loop.wrong)
        crash = loop.begin("sigkill")
        os.kill(old, signal.SIGKILL)

        def back() -> bool:
            new = graph.pids.get(label)
            return new not in (None, old) and records.handed_over(new)

        assert loop.run_until(
            lambda: crash.count("safe") >= HOLDS and back(), LIMIT_TICKS, answer=False
        ), f"the restarted process was not commanding after {LIMIT_TICKS} ticks"
        holds = crash.count("safe")
        loop.fresh_limits = True
        crash.ended = time.monotonic()
        assert loop.run_until(
            lambda: crash.first_command is not None, LIMIT_TICKS, answer=False
        ), "no command from the restarted process"
        missing = len(loop.missing)
        loop.run(NORMAL_TICKS)
        assert len(loop.missing) == missing, f"ticks without a command: {loop.missing}"
    assert not loop.wrong, f"{len(loop.wrong)} wrong commands:\n" + "\n".join(loop.wrong[:10])
    kinds = crash.kinds_before_end()
    assert kinds[kinds.index("safe") :].count("command") == 0, f"while dead: {kinds}"
    assert set(kinds) <= {"command", "safe"}
    floor = UP_FRACTION * loop.arm.reference_tip_height()
    assert loop.lowest_tip >= floor, f"the tip fell to {loop.lowest_tip:.3f} m (< {floor:.3f})"
    assert loop.largest_deviation <= UP_DEVIATION, f"a joint {loop.largest_deviation:.3f} rad off"
    print(
        f"\n{deployment}: the first hold {1000 * (crash.first_safe - crash.started):.1f} ms "
        f"after the SIGKILL (taken by the test); {holds} holds until the restarted process was "
        f"handed over; its first command "
        f"{1000 * (crash.first_command - crash.ended):.1f} ms after the handover; "
        f"{sum(len(f.arrivals) for f in loop.faults)} commands checked, {len(loop.wrong)} wrong"
    )
