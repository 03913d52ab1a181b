"""A simulated arm stays up when the process that commands it is killed, in every deployment
mode: the stand-in holds its last command until the restarted process commands again, and
every command the arm gets is right.

The MuJoCo arm of :mod:`support.sim` runs in lockstep with the live graph
(:class:`support.closed_loop.ClosedLoop`, the parameters of the fault test: ``input_timeout_ms``
100, ``rate_hz`` 50, ``safe_action: hold`` on the joint targets, joint limits and ``max_step``;
and ``sync: exact``: the restarted node can lose inputs in its first seconds while the ticks go
on unawaited, and a set gathered by arrival would then pair one tick's Imu with another's
JointState),
under the runner with restarts. After normal ticks the test SIGKILLs the process that runs the
policy (its own process, the container, or the fused node) and goes on ticking, unanswered, as
the robot's sensors do: the stand-in (:mod:`leapp_ros.run.stand_in`) publishes the hold, the
runner starts the process again, and once the stand-in's record says the restarted process is
watched and the node no longer stood in for, the restarted node commands again (the first
answers can be lost: a subscription that replaces a SIGKILLed one may miss messages in its first
seconds, see the safe-operation how-to, so the ticks around the restart are not awaited).

Every command that arrives is eager PyTorch on the latest tick after the limits, or the hold;
anything else is wrong. The restarted node starts its limits afresh (no last command, so its
first command is not step-limited: the loop expects exactly that). The arm is up at every
tick. The commands after the SIGKILL are the dead process's last ones (in flight), then only
holds, then the restarted node's (its own holds, too, which its status counts: its watchdog
fires where a new subscription lost inputs in its first seconds; never one from the stand-in
after the handover). ``pytest -s`` prints the time from the SIGKILL
to the first hold and the holds until the restarted node commanded.
"""

from __future__ import annotations

import json
import os
import signal

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
LATE_TICKS = 5  # unawaited ticks: a command may answer one of this many before the latest
LIMIT_TICKS = 3000  # the most ticks (at 50 Hz: a minute) the restart or a record may take


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
    document = params_document()  # a set is one tick's, however many messages are lost:
    for node in ("preprocess", "leapp_fused"):  # the nodes that read the robot's messages
        # (/**/: a bare name reaches only a node of the root namespace)
        document[f"/**/{node}"] = {"ros__parameters": {"sync": "exact"}}
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(document), encoding="utf-8")
    options = GraphOptions(deployment, params_file=params)
    arm = Arm(write_arm_model(tmp_path), START)
    with (
        open(tmp_path / "nodes.log", "w", encoding="utf-8") as log,
        GraphUnderTest(arm_export.path, options, restart=True, output=log) as graph,
    ):
        (label,) = [p.label for p in plan_processes(graph.plan, options)
                    if "policy" in p.pipeline_nodes]  # fmt: skip
        records = StandInRecords(graph)
        loop = ClosedLoop(graph, arm_export.policy, arm)  # ready: the stand-in watches it
        synced = "leapp_fused" if graph.fused else "preprocess"
        assert loop.parameter(synced, "sync") == "exact", f"{synced} does not sync by stamp"
        old = graph.pids[label]
        loop.run(NORMAL_TICKS)
        assert not loop.missing and not loop.wrong, (loop.missing, loop.wrong)
        crash = loop.begin("sigkill")
        loop.late = LATE_TICKS  # ticks go on unawaited from now on: an answer may be late
        os.kill(old, signal.SIGKILL)

        def resumed() -> bool:  # a command after the first hold: the restarted process's
            kinds = [kind for _, kind in crash.arrivals]
            return "safe" in kinds and "command" in kinds[kinds.index("safe") :]

        assert loop.run_until(lambda: crash.first_safe is not None, LIMIT_TICKS, answer=False)
        loop.fresh_limits = True  # the dead process's last commands came before its hold
        assert loop.run_until(resumed, LIMIT_TICKS, answer=False), (
            f"no command from the restarted process within {LIMIT_TICKS} ticks; "
            f"{len(loop.wrong)} wrong: {loop.wrong[:3]}"
        )
        new = graph.pids[label]
        loop.run(NORMAL_TICKS, answer=False)
        assert loop.run_until(lambda: records.handed_over(new), LIMIT_TICKS, answer=False)
        kinds = [kind for _, kind in crash.arrivals]
        first_hold = kinds.index("safe")
        back = kinds.index("command", first_hold)
        own = kinds[back:].count("safe")  # after it commanded: the restarted node's own holds

        def counted() -> bool:  # (its watchdog: inputs lost in a new subscription's first s)
            record = graph.status().get("policy", {})
            return record.get("pid") == new and record.get("safe_actions", -1) >= own

        graph.probe.spin_until(counted, 30, f"the restarted node to count {own} holds")
    assert new != old
    assert not loop.wrong, f"{len(loop.wrong)} wrong commands:\n" + "\n".join(loop.wrong[:10])
    assert set(kinds[:first_hold]) <= {"command"}, "in flight when the process died"
    assert set(kinds[first_hold:back]) == {"safe"}, "only holds while the process was dead"
    assert kinds[back:].count("command") > 0
    floor = UP_FRACTION * loop.arm.reference_tip_height()
    assert loop.lowest_tip >= floor, f"the tip fell to {loop.lowest_tip:.3f} m (< {floor:.3f})"
    assert loop.largest_deviation <= UP_DEVIATION, f"a joint {loop.largest_deviation:.3f} rad off"
    print(
        f"\n{deployment}: the first hold {1000 * (crash.first_safe - crash.started):.1f} ms "
        f"after the SIGKILL (taken by the test); {back - first_hold} holds until the restarted "
        f"process commanded, {kinds[back:].count('command')} commands and {own} of its own "
        "holds since; "
        f"{sum(len(f.arrivals) for f in loop.faults)} commands checked, {len(loop.wrong)} wrong"
    )
