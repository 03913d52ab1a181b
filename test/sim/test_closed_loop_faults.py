"""A simulated arm stays up through sensor, NaN, e-stop and lifecycle faults while its policy
runs as a live ROS 2 graph, in every deployment mode, and every command it gets is right.

The MuJoCo arm of :mod:`sim_support` is driven in lockstep through the graph over robot
messages: each tick the test publishes the arm's ``sensor_msgs/Imu`` and then its
``sensor_msgs/JointState`` (joints shuffled, an extra joint the policy does not use), waits
for the joint targets (``std_msgs/Float64MultiArray``), hands them to the arm's PD servos and
steps the simulation by one tick, no faster than one tick per 20 ms of wall time; while no
command comes the servos keep the last one. The nodes run with a params file:
``input_timeout_ms`` 100, ``rate_hz`` 50, and on the targets ``safe_action: hold``, joint
limits (``min`` / ``max``) and ``max_step``.

Every command that arrives is checked: it equals eager PyTorch on the inputs of the latest
tick, after the limits (clamped, and at most ``max_step`` from the previous command), or it is
the safe action (``hold``: the previous command again). Anything else is wrong. The arm is up
when its tip stays above 90 % of its height in the reference pose and no joint strays more
than 0.35 rad from that pose, at every tick.

The faults, one after the other in one run per mode, each followed by normal ticks:

1. the JointState stream stops for 0.5 s while the arm keeps moving (the watchdog's hold must
   come within about a timeout and a period, normal commands with the first tick back);
2. five ticks of NaN joint positions, then five of a NaN gyro rate (each tick's set dropped
   and counted; the Imu goes first, so a node that kept a tick's JointState after dropping
   its Imu would pair it with the next tick's Imu: no such command may come);
3. the e-stop through ``~/enable`` of the node that publishes the commands, then its release
   (only the hold while engaged; commands resume from a tick sent after the release);
4. ``deactivate`` then ``activate`` through its ``~/change_state`` (one hold at deactivate,
   nothing while inactive, commands after activate).

``pytest -s`` prints, per mode and fault, the time until the safe action, the time until
normal commands resumed and the commands checked (from the fault's start to the next fault's);
with ``LEAPP_FAULT_REPORT`` set, the same goes to that JSON file.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import yaml
from support.sim import (
    REFERENCE,
    TICK_S,
    Arm,
    eager_targets,
    export_arm_policy,
    imu_message,
    joint_state_message,
    write_arm_model,
)

from leapp_ros.testing import MODES, GraphUnderTest
from leapp_ros.testing.probe import qos

pytestmark = [pytest.mark.ros, pytest.mark.slow]

TIMEOUT_S = 0.1  # input_timeout_ms / 1000
LOW = (-0.5, -1.2, -0.3)  # the targets' joint limits
HIGH = (0.39, 0.0, 0.37)
MAX_STEP = 0.02  # rad per command
TOLERANCE = 1e-5
START = tuple(r + d for r, d in zip(REFERENCE, (0.2, -0.15, 0.2), strict=True))
JOINT_ORDERS = (
    ("elbow", "gripper", "wrist", "shoulder"),
    ("wrist", "shoulder", "gripper", "elbow"),
)
UP_FRACTION = 0.9  # the arm is up: its tip above this share of the reference pose's height...
UP_DEVIATION = 0.35  # ... and every joint within this many rad of the reference
SENSOR_STOP_S = 0.5
NAN_TICKS = 5
STOPPED_TICKS = 25  # ticks while e-stopped, and while inactive
NORMAL_TICKS = 30  # after each fault (40 before the first)
ANSWER_S = 2.0  # longest wait for the command of a tick
SLACK_S = 0.06  # for the scheduling of three processes on a loaded machine
NOT_FAULTS = ("none", "finish")  # the windows before the first fault and after the last


def params_document() -> dict[str, Any]:
    return {
        "/**": {
            "ros__parameters": {
                "input_timeout_ms": TIMEOUT_S * 1000,
                "rate_hz": 1 / TICK_S,
                "ports": {
                    "joint_targets": {
                        "safe_action": "hold",
                        "min": list(LOW),
                        "max": list(HIGH),
                        "max_step": MAX_STEP,
                    }
                },
            }
        }
    }


def limited(raw: np.ndarray, last: np.ndarray | None) -> tuple[np.ndarray, bool, bool]:
    """``raw`` after the limits, as the node applies them (float32 values, float64 limits):
    at most ``max_step`` from ``last``, then clamped; whether it clamped, whether it stepped."""
    value, stepped, clamped = raw, False, False
    if last is not None and np.any(np.abs(value - last) > MAX_STEP):
        stepped = True
        value = last + np.clip(value - last, -MAX_STEP, MAX_STEP)
    low, high = np.asarray(LOW), np.asarray(HIGH)
    if np.any(value < low) or np.any(value > high):
        clamped = True
        value = np.clip(value, low, high)
    return value.astype(np.float32), clamped, stepped


@dataclass
class Fault:
    """One fault and the messages from its start to the next fault's (monotonic times)."""

    name: str
    started: float
    ended: float | None = None  # the cause is gone: sensors back, released, activated
    answered: float | None = None  # the deactivate request was answered
    first_safe: float | None = None
    first_command: float | None = None  # the first normal command after ``ended``
    first_command_tick: int | None = None
    first_tick_after: int | None = None  # the first tick sent after ``ended``
    arrivals: list[tuple[float, str]] = field(default_factory=list)  # (time, kind)
    commands_during: int = 0  # answers to ticks sent between start and end

    def summary(self) -> dict[str, Any]:
        def since(moment: float | None, origin: float | None) -> float | None:
            return None if moment is None or origin is None else round(moment - origin, 4)

        return {
            "safe_action_after_s": since(self.first_safe, self.started),
            "commands_resumed_after_s": since(self.first_command, self.ended),
            "commands_checked": len(self.arrivals),
            "safe_actions": sum(kind == "safe" for _, kind in self.arrivals),
        }


class ClosedLoop:
    """The arm driven through ``graph`` tick by tick, every command checked on arrival."""

    def __init__(self, graph: GraphUnderTest, export: Any, arm: Arm):
        from lifecycle_msgs.srv import ChangeState
        from sensor_msgs.msg import Imu, JointState
        from std_msgs.msg import Float64MultiArray
        from std_srvs.srv import SetBool

        self.graph, self.policy, self.arm = graph, export.policy, arm
        namespace = graph.plan.namespace
        self.node_name = f"{namespace}/{'leapp_fused' if graph.fused else 'policy'}"
        probe = graph.probe
        self.joints = probe.publisher(f"{namespace}/preprocess/joint_states", JointState)
        self.imu = probe.publisher(f"{namespace}/preprocess/imu", Imu)
        self.enable = probe.node.create_client(SetBool, f"{self.node_name}/enable")
        self.change_state = probe.node.create_client(ChangeState, f"{self.node_name}/change_state")
        topic = f"{namespace}/policy/joint_targets"
        probe.node.create_subscription(Float64MultiArray, topic, self._on_command, qos(depth=1000))
        for publisher in (self.joints, self.imu):
            probe.wait_matched(publisher)
        for client in (self.enable, self.change_state):
            probe.spin_until(client.service_is_ready, 20, f"service {client.srv_name}")

        def matched() -> bool:  # the harness's subscription and this one: no command lost
            return graph.status().get("policy", {}).get("subscribers", {}).get(topic, 0) >= 2

        probe.spin_until(matched, 20, f"the publisher of {topic} to match the test")
        self.applied = np.asarray(START)
        self.last: np.ndarray | None = None  # the last command published, float32
        self.candidate: tuple[int, float, np.ndarray] | None = None  # (tick, sent, eager)
        self.answered = -1  # the latest tick whose command came
        self.ticks = 0
        self.awaited = 0  # ticks whose command the loop waited for
        self.last_joints_at = 0.0
        self.faults = [Fault("none", time.monotonic())]
        self.wrong: list[str] = []
        self.missing: list[int] = []
        self.clamped = self.step_limited = 0
        self.lowest_tip, self.largest_deviation = arm.tip_height(), arm.deviation()

    # --- commands ---------------------------------------------------------------------------

    def _on_command(self, message: Any) -> None:
        now = time.monotonic()
        value = np.asarray(message.data, dtype=np.float64)
        kind, tick, sent = self._classify(value)
        fault = self.faults[-1]
        fault.arrivals.append((now, kind))
        if kind == "safe" and fault.first_safe is None and fault.name != "none":
            fault.first_safe = now
        if kind == "command":
            if fault.started < sent and (fault.ended is None or sent < fault.ended):
                fault.commands_during += 1
            elif fault.ended is not None and fault.first_command is None:
                fault.first_command, fault.first_command_tick = now, tick
        self.last = value.astype(np.float32)
        self.applied = value

    def _classify(self, value: np.ndarray) -> tuple[str, int | None, float]:
        """``command`` (eager on the latest tick, limited), ``safe`` (the last command
        again) or ``wrong`` (noted), with the tick answered and when it was sent."""
        if self.candidate is not None:
            tick, sent, raw = self.candidate
            expected, clamped, stepped = limited(raw, self.last)
            if np.allclose(value, expected, rtol=0, atol=TOLERANCE):
                self.candidate, self.answered = None, tick
                self.clamped += clamped
                self.step_limited += stepped
                return "command", tick, sent
        if self.last is not None and np.allclose(value, self.last, rtol=0, atol=TOLERANCE):
            return "safe", None, 0.0
        if self.candidate is None:
            expected_text = "no command (no valid set was sent since the last one)"
        else:
            expected_text = f"eager for tick {self.candidate[0]}, limited: {expected.tolist()}"
        self.wrong.append(
            f"message {sum(len(f.arrivals) for f in self.faults) + 1} (during fault "
            f"{self.faults[-1].name!r}, tick {self.ticks}): {value.tolist()}; expected "
            f"{expected_text} or the hold {None if self.last is None else self.last.tolist()}"
        )
        return "wrong", None, 0.0

    # --- ticks ------------------------------------------------------------------------------

    def tick(self, *, joints: bool = True, nan: str | None = None, answer: bool = True) -> None:
        """One tick: publish the IMU and (with ``joints``) the JointState of the arm now
        (``nan``: ``"joints"`` or ``"imu"`` carries a NaN), wait for the command if ``answer``,
        pace to one tick per period, apply the newest command and step the arm."""
        begun = time.monotonic()
        self.graph.spin(0)  # raises if a node died
        reading, stamp = self.arm.read(), self.arm.time
        valid = joints and nan is None
        self.candidate = (
            (self.ticks, begun, eager_targets(self.policy, reading)) if valid else None
        )
        fault = self.faults[-1]
        if fault.ended is not None and fault.first_tick_after is None:
            fault.first_tick_after = self.ticks
        self.imu.publish(imu_message(reading, stamp, nan_gyro=nan == "imu"))
        if joints:
            order = JOINT_ORDERS[self.ticks % len(JOINT_ORDERS)]
            nan_joint = "elbow" if nan == "joints" else None
            self.joints.publish(joint_state_message(reading, stamp, order, nan_joint=nan_joint))
            self.last_joints_at = time.monotonic()
        if answer and valid:
            self.awaited += 1
            self.spin(until=begun + ANSWER_S, done=lambda: self.answered == self.ticks)
            if self.answered != self.ticks:
                self.missing.append(self.ticks)
        self.spin(until=begun + TICK_S)
        self.arm.command(self.applied)
        self.arm.step()
        self.lowest_tip = min(self.lowest_tip, self.arm.tip_height())
        self.largest_deviation = max(self.largest_deviation, self.arm.deviation())
        self.ticks += 1

    def run(self, count: int, **options: Any) -> None:
        for _ in range(count):
            self.tick(**options)

    def spin(self, *, until: float, done: Any = None) -> None:
        executor = self.graph.probe.executor
        while (done is None or not done()) and (left := until - time.monotonic()) > 0:
            executor.spin_once(timeout_sec=min(left, 0.005))

    # --- faults -----------------------------------------------------------------------------

    def begin(self, name: str, at: float | None = None) -> Fault:
        self.faults.append(Fault(name, time.monotonic() if at is None else at))
        return self.faults[-1]

    def call(self, client: Any, request: Any) -> Any:
        future = client.call_async(request)
        self.graph.probe.spin_until(future.done, 10, f"the answer of {client.srv_name}")
        return future.result()

    def set_enabled(self, enabled: bool) -> None:
        from std_srvs.srv import SetBool

        answer = self.call(self.enable, SetBool.Request(data=enabled))
        assert answer.success, f"{self.node_name}/enable {enabled}: {answer.message}"

    def transition(self, transition_id: int) -> None:
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState

        request = ChangeState.Request(transition=Transition(id=transition_id))
        answer = self.call(self.change_state, request)
        assert answer.success, f"{self.node_name}: transition {transition_id} refused"

    def record(self) -> dict[str, Any]:
        return {
            "ticks": self.ticks,
            "commands_checked": sum(len(f.arrivals) for f in self.faults),
            "wrong": len(self.wrong),
            "clamped": self.clamped,
            "step_limited": self.step_limited,
            "lowest_tip_m": round(self.lowest_tip, 4),
            "largest_deviation_rad": round(self.largest_deviation, 4),
            "faults": {f.name: f.summary() for f in self.faults if f.name not in NOT_FAULTS},
        }


def drive_through_faults(loop: ClosedLoop) -> None:
    """The faults of the module documentation, in order, normal ticks around each."""
    from lifecycle_msgs.msg import Transition

    loop.run(NORMAL_TICKS + 10)
    stop = loop.begin("joint_states_stop", at=loop.last_joints_at)
    while time.monotonic() - stop.started < SENSOR_STOP_S:
        loop.tick(joints=False)
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
    loop.set_enabled(True)
    estop.ended = time.monotonic()
    loop.run(NORMAL_TICKS)
    deactivated = loop.begin("deactivate")
    loop.transition(Transition.TRANSITION_DEACTIVATE)
    deactivated.answered = time.monotonic()
    loop.run(STOPPED_TICKS, answer=False)
    loop.transition(Transition.TRANSITION_ACTIVATE)
    deactivated.ended = time.monotonic()
    loop.run(NORMAL_TICKS)


def finish(loop: ClosedLoop) -> dict[str, dict[str, Any]]:
    """Deactivate the commanding node (its hold ends the run), then the status records once
    every node has sent one since."""
    from lifecycle_msgs.msg import Transition

    loop.begin("finish")
    loop.transition(Transition.TRANSITION_DEACTIVATE)
    loop.graph.spin(1.3)  # the nodes send their status once a second
    return loop.graph.status()


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


@pytest.fixture(scope="module", params=list(MODES))
def run(request, arm_export, fault_report, tmp_path_factory):
    """The arm driven through every fault by the graph in one mode: the loop and the final
    status records."""
    folder = tmp_path_factory.mktemp(f"closed_loop_{request.param}")
    params = folder / "params.yaml"
    params.write_text(yaml.safe_dump(params_document()), encoding="utf-8")
    arm = Arm(write_arm_model(folder), START)
    with (
        open(folder / "nodes.log", "w", encoding="utf-8") as log,
        GraphUnderTest(
            arm_export.path, params_file=params, output=log, **MODES[request.param]
        ) as graph,
    ):
        loop = ClosedLoop(graph, arm_export, arm)
        drive_through_faults(loop)
        status = finish(loop)
        tail = "\n".join(graph.output.splitlines()[-30:])
    fault_report[request.param] = loop.record()
    faults = {fault.name: fault for fault in loop.faults}
    return SimpleNamespace(loop=loop, faults=faults, status=status, tail=f"\nnodes:\n{tail}")


def kinds_before_end(fault: Fault) -> list[str]:
    return [kind for moment, kind in fault.arrivals if moment < (fault.ended or np.inf)]


# --- the rules ----------------------------------------------------------------------------


def test_every_command_is_eager_or_the_safe_action_through_every_fault(run):
    loop = run.loop
    assert not loop.wrong, f"{len(loop.wrong)} wrong commands:\n" + "\n".join(loop.wrong[:10])
    for name, fault in run.faults.items():
        if name not in NOT_FAULTS:
            assert "command" in (kind for _, kind in fault.arrivals), f"no command after {name}"
    commands = sum(kind == "command" for fault in loop.faults for _, kind in fault.arrivals)
    assert commands == loop.awaited > 0, f"{commands} commands for {loop.awaited} ticks awaited"


def test_the_arm_stays_up_through_every_fault(run):
    loop = run.loop
    floor = UP_FRACTION * loop.arm.reference_tip_height()
    assert loop.lowest_tip >= floor, f"the tip fell to {loop.lowest_tip:.3f} m (< {floor:.3f})"
    assert loop.largest_deviation <= UP_DEVIATION, f"a joint {loop.largest_deviation:.3f} rad off"


def test_every_valid_tick_is_answered_and_commands_resume_after_every_fault(run):
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
        assert fault.first_command - fault.ended <= TICK_S + SLACK_S, fault.summary()


def test_a_stopped_joint_state_stream_gets_the_hold_within_a_timeout_and_a_period(run):
    fault = run.faults["joint_states_stop"]
    assert fault.first_safe is not None, f"no safe action while the joint states stopped{run.tail}"
    after = fault.first_safe - fault.started
    assert TIMEOUT_S - 0.005 <= after <= TIMEOUT_S + TICK_S + SLACK_S, f"hold after {after:.3f} s"
    kinds = kinds_before_end(fault)
    assert set(kinds) == {"safe"}, f"while the joint states stopped: {kinds}"
    assert len(kinds) >= (SENSOR_STOP_S - TIMEOUT_S) / TICK_S / 2, f"{len(kinds)} holds"


def test_nan_bursts_drop_their_sets_and_are_counted(run):
    for name in ("nan_joints", "nan_imu"):
        kinds = kinds_before_end(run.faults[name])
        assert set(kinds) <= {"safe"}, f"{name}: during the burst: {kinds}"
    counted = {
        counter: sum(record.get(counter, 0) for record in run.status.values())
        for counter in ("nonfinite_inputs", "incomplete_sets")
    }
    assert counted == {"nonfinite_inputs": 2 * NAN_TICKS, "incomplete_sets": 2 * NAN_TICKS}


def test_the_estop_allows_only_the_hold_until_a_fresh_tick_after_its_release(run):
    fault = run.faults["estop"]
    kinds = kinds_before_end(fault)
    assert kinds and set(kinds) == {"safe"}, f"while e-stopped: {kinds}"
    assert fault.first_safe - fault.started <= 0.25, fault.summary()
    assert len(kinds) >= STOPPED_TICKS / 2, f"{len(kinds)} holds in {STOPPED_TICKS} ticks"


def test_deactivate_publishes_the_hold_once_and_nothing_until_activate(run):
    fault = run.faults["deactivate"]
    kinds = kinds_before_end(fault)
    assert kinds == ["safe"], f"between deactivate and activate: {kinds}"
    late = [
        t - fault.answered for t, _ in fault.arrivals if fault.answered + 0.1 < t < fault.ended
    ]
    assert not late, f"messages {late} s after the deactivate answer"


def test_the_status_counts_the_safe_actions_and_limits_the_loop_saw(run):
    loop, policy = run.loop, run.status["policy"]
    safe = sum(kind == "safe" for fault in loop.faults for _, kind in fault.arrivals)
    assert policy["safe_actions"] == safe
    assert policy["timeouts"] > 0
    assert loop.clamped > 0 and loop.step_limited > 0, "the limits were never reached"
    assert (policy["clamped"], policy["step_limited"]) == (loop.clamped, loop.step_limited)
