"""A simulated arm stays up through sensor, NaN, e-stop and lifecycle faults while its policy
runs as a live ROS 2 graph, in every deployment mode, and every command it gets is right.

The MuJoCo arm of :mod:`support.sim` is driven in lockstep through the graph over robot
messages by :class:`support.closed_loop.ClosedLoop`: each tick the test publishes the arm's
``sensor_msgs/Imu`` and then its ``sensor_msgs/JointState``, waits for the joint targets when
the tick must be answered, hands them to the arm's PD servos and steps the simulation by one
tick, no faster than one tick per control period. The nodes run with a params file:
``input_timeout_ms`` 100, ``rate_hz`` 50, and on the targets ``safe_action: hold``, joint
limits and ``max_step``.

Every command that arrives is checked: it equals eager PyTorch on the inputs of the latest
tick, after the limits, or it is the safe action (the hold: the previous command again).
Anything else is wrong. The arm is up when its tip stays above 90 % of its height in the
reference pose and no joint strays more than 0.35 rad from that pose, at every tick.

The faults, one after the other in one run per mode, each followed by normal ticks; each ends
on an event (the hold arrived, a status record counted the inputs, a service answered), with
a generous overall limit, never after a length of wall time:

1. the JointState stream stops while the arm keeps moving, until the watchdog's hold has come
   5 times (only holds, the first never before the timeout; normal commands with the first
   tick back);
2. five ticks of NaN joint positions, then five of a NaN gyro rate (each tick's set dropped
   and counted; the Imu goes first, so a node that kept a tick's JointState after dropping
   its Imu would pair it with the next tick's Imu: no such command may come);
3. the e-stop through ``~/enable`` of the node that publishes the commands, 25 ticks and at
   least 5 holds, then its release (only holds while engaged; commands resume from a tick sent
   after the release);
4. ``deactivate`` through its ``~/change_state``, 25 ticks, until the node's status has
   counted their inputs (so it has processed every one it must not answer): by then exactly
   one hold came; then ``activate`` (commands from the first tick after it).

``pytest -s`` prints, per mode and fault, the time until the safe action, the time until
normal commands resumed and the commands checked (from the fault's start to the next fault's);
with ``LEAPP_FAULT_REPORT`` set, the same goes to that JSON file.
"""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from support.closed_loop import START, TIMEOUT_S, ClosedLoop, params_document
from support.sim import Arm, export_arm_policy, write_arm_model

from leapp_ros.testing import Deployment, GraphOptions, GraphUnderTest

pytestmark = [pytest.mark.ros, pytest.mark.slow]

UP_FRACTION = 0.9  # the arm is up: its tip above this share of the reference pose's height...
UP_DEVIATION = 0.35  # ... and every joint within this many rad of the reference
NAN_TICKS = 5
STOPPED_TICKS = 25  # ticks sent while e-stopped, and while inactive
NORMAL_TICKS = 30  # after each fault (40 before the first)
HOLDS = 5  # holds a fault of the watchdog or the e-stop lasts for
LIMIT_TICKS = 250  # the most ticks a fault waits for its event
NOT_FAULTS = ("none", "finish")  # the windows before the first fault and after the last


def drive_through_faults(loop: ClosedLoop) -> None:
    """The faults of the module documentation, in order, normal ticks around each."""
    from lifecycle_msgs.msg import Transition

    loop.run(NORMAL_TICKS + 10)
    stop = loop.begin("joint_states_stop", at=loop.last_joints_at)
    loop.run_until(lambda: stop.count("safe") >= HOLDS, LIMIT_TICKS, joints=False)
    stop.ended = time.monotonic()
    loop.run(NORMAL_TICKS)
    for topic in ("joints", "imu"):
        burst = loop.begin(f"nan_{topic}")
        loop.run(NAN_TICKS, nan=topic)
        burst.ended = time.monotonic()
        loop.run(NORMAL_TICKS)
    estop = loop.begin("estop")
    loop.set_enabled(False)
    loop.run(STOPPED_TICKS, answer=False)
    loop.run_until(lambda: estop.count("safe") >= HOLDS, LIMIT_TICKS, answer=False)
    loop.set_enabled(True)
    estop.ended = time.monotonic()
    loop.run(NORMAL_TICKS)
    deactivated = loop.begin("deactivate")
    loop.transition(Transition.TRANSITION_DEACTIVATE)
    before = loop.wait(loop.inactive_received, "the status records of the inactive node")

    # Ticks until the inactive node counted the inputs of STOPPED_TICKS of them: at best effort,
    # depth 1, a loaded machine may let one sensor message replace another before preprocess
    # takes it, so a tick can pass without an input reaching the commanding node.
    def counted() -> bool:
        return (loop.inactive_received() or 0) >= before + STOPPED_TICKS

    loop.run_until(counted, LIMIT_TICKS, answer=False)
    try:
        loop.wait(
            lambda: counted() and deactivated.first_safe is not None,
            f"the inactive node's status to count the inputs of {STOPPED_TICKS} ticks, "
            "and its hold",
        )
    except AssertionError as error:
        seen = f"counted {loop.inactive_received()} (from {before}), hold {deactivated.first_safe}"
        raise AssertionError(f"{error}: {seen}") from None
    deactivated.proven_silent = len(deactivated.arrivals)
    loop.transition(Transition.TRANSITION_ACTIVATE)
    deactivated.ended = time.monotonic()
    loop.run(NORMAL_TICKS)


def finish(loop: ClosedLoop) -> dict[str, dict[str, Any]]:
    """Deactivate the commanding node (its hold ends the run), then the status records once
    every node has sent two since (one of them published after the deactivation)."""
    from lifecycle_msgs.msg import Transition

    last = loop.begin("finish")
    mark = len(loop.statuses)
    loop.transition(Transition.TRANSITION_DEACTIVATE)
    names = [node.name for node in loop.graph.plan.nodes]

    def settled() -> bool:
        later = [record["node"] for record in loop.statuses[mark:]]
        return last.first_safe is not None and all(later.count(name) >= 2 for name in names)

    loop.wait(settled, f"the last hold and two status records of each of {names}")
    return loop.latest_status()


# --- the run per mode, and its report -----------------------------------------------------


@pytest.fixture(scope="module")
def arm_export(tmp_path_factory):
    return export_arm_policy(tmp_path_factory.mktemp("arm_export"))


@pytest.fixture(scope="module")
def fault_report():
    """Per mode, what :meth:`ClosedLoop.record` says; printed and written (to the file that
    ``LEAPP_FAULT_REPORT`` names) once every mode ran."""
    report: dict[str, Any] = {}
    yield report
    if not report:
        return
    rows = [("mode", "fault", "safe action after s", "resumed after s", "checked")]
    for mode, record in report.items():
        for name, fault in record["faults"].items():
            timing = (fault["safe_action_after_s"], fault["commands_resumed_after_s"])
            shown = ["-" if value is None else f"{value:.3f}" for value in timing]
            rows.append((mode, name, *shown, str(fault["commands_checked"])))
        total = f"{record['commands_checked']} ({record['wrong']} wrong)"
        rows.append((mode, "whole run", "", "", total))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    print("\nclosed loop through faults\n" + "\n".join(lines))
    target = os.environ.get("LEAPP_FAULT_REPORT")
    if target:
        with open(target, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=2)


@pytest.fixture(scope="module", params=list(Deployment), ids=str)
def run(request, arm_export, fault_report, tmp_path_factory):
    """The arm driven through every fault by the graph in one deployment: the loop and the
    final status records."""
    folder = tmp_path_factory.mktemp(f"closed_loop_{request.param}")
    params = folder / "params.yaml"
    params.write_text(yaml.safe_dump(params_document()), encoding="utf-8")
    arm = Arm(write_arm_model(folder), START)
    with (
        open(folder / "nodes.log", "w", encoding="utf-8") as log,
        GraphUnderTest(
            arm_export.path, GraphOptions(request.param, params_file=params), output=log
        ) as graph,
    ):
        loop = ClosedLoop(graph, arm_export.policy, arm)
        drive_through_faults(loop)
        status = finish(loop)
        tail = "\n".join(graph.output.splitlines()[-30:])
    fault_report[request.param.value] = loop.record()
    faults = {fault.name: fault for fault in loop.faults}
    return SimpleNamespace(loop=loop, faults=faults, status=status, tail=f"\nnodes:\n{tail}")


# --- the rules ----------------------------------------------------------------------------


def test_every_command_is_eager_or_the_safe_action_through_every_fault(run):
    loop = run.loop
    assert not loop.wrong, f"{len(loop.wrong)} wrong commands:\n" + "\n".join(loop.wrong[:10])
    for name, fault in run.faults.items():
        if name not in NOT_FAULTS:
            assert fault.count("command"), f"no command after {name}"
    commands = sum(fault.count("command") for fault in loop.faults)
    assert commands == loop.awaited > 0, f"{commands} commands for {loop.awaited} ticks awaited"


def test_the_arm_stays_up_through_every_fault(run):
    loop = run.loop
    floor = UP_FRACTION * loop.arm.reference_tip_height()
    assert loop.lowest_tip >= floor, f"the tip fell to {loop.lowest_tip:.3f} m (< {floor:.3f})"
    assert loop.largest_deviation <= UP_DEVIATION, f"a joint {loop.largest_deviation:.3f} rad off"


def test_every_valid_tick_is_answered_and_commands_resume_with_the_first_tick_after_a_fault(
    run,
):
    assert not run.loop.missing, f"ticks without a command: {run.loop.missing}{run.tail}"
    for name, fault in run.faults.items():
        if name in NOT_FAULTS:
            continue
        assert fault.commands_during == 0, f"{name}: a tick sent during the fault was answered"
        assert fault.first_command is not None, f"{name}: commands never resumed{run.tail}"
        assert fault.first_command_tick == fault.first_tick_after, (
            f"{name}: commands resumed with tick {fault.first_command_tick}, not with the first "
            f"tick after the fault ({fault.first_tick_after})"
        )


def test_a_stopped_joint_state_stream_gets_only_the_hold_and_never_before_the_timeout(run):
    fault = run.faults["joint_states_stop"]
    kinds = fault.kinds_before_end()
    assert kinds.count("safe") >= HOLDS, f"{LIMIT_TICKS} ticks without joint states: {kinds}"
    assert set(kinds) == {"safe"}, f"while the joint states stopped: {kinds}"
    # A lower bound only: the node's timer cannot see the timeout before it has passed since
    # the last JointState was published; a loaded machine only makes the hold later.
    after = fault.first_safe - fault.started
    assert after >= TIMEOUT_S - 0.005, f"the hold came {after:.3f} s after the last JointState"


def test_nan_bursts_drop_their_sets_and_are_counted(run):
    for name in ("nan_joints", "nan_imu"):
        kinds = run.faults[name].kinds_before_end()
        assert set(kinds) <= {"safe"}, f"{name}: during the burst: {kinds}"
    counted = {
        counter: sum(record.get(counter, 0) for record in run.status.values())
        for counter in ("nonfinite_inputs", "incomplete_sets")
    }
    assert counted == {"nonfinite_inputs": 2 * NAN_TICKS, "incomplete_sets": 2 * NAN_TICKS}


def test_the_estop_allows_only_the_hold_until_a_fresh_tick_after_its_release(run):
    kinds = run.faults["estop"].kinds_before_end()
    assert kinds.count("safe") >= HOLDS, f"while e-stopped: {kinds}"
    assert set(kinds) == {"safe"}, f"while e-stopped: {kinds}"


def test_deactivate_publishes_the_hold_once_and_nothing_for_the_inputs_while_inactive(run):
    fault = run.faults["deactivate"]
    proven = [kind for _, kind in fault.arrivals[: fault.proven_silent]]
    assert proven == ["safe"], (
        f"once the inactive node had counted the inputs of {STOPPED_TICKS} ticks: {proven}"
    )
    kinds = fault.kinds_before_end()
    assert set(kinds) == {"safe"}, f"between deactivate and activate: {kinds}"


def test_the_status_counts_the_safe_actions_and_limits_the_loop_saw(run):
    loop, policy = run.loop, run.status["policy"]
    safe = sum(fault.count("safe") for fault in loop.faults)
    assert policy["safe_actions"] == safe
    assert policy["timeouts"] > 0
    assert loop.clamped > 0 and loop.step_limited > 0, "the limits were never reached"
    assert (policy["clamped"], policy["step_limited"]) == (loop.clamped, loop.step_limited)
