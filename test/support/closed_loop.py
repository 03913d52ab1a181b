"""The simulated arm of :mod:`support.sim` driven through a live graph tick by tick, every
command checked on arrival, and the faults the closed-loop test puts it through.

Each tick the loop publishes the arm's ``sensor_msgs/Imu`` and then its
``sensor_msgs/JointState`` (joints shuffled, an extra joint the policy does not use), waits
for the joint targets (``std_msgs/Float64MultiArray``) when the tick must be answered, paces
itself to one tick per control period (the nodes' watchdog and ``rate_hz`` are in wall time),
hands the newest command to the arm's PD servos and steps the simulation by one tick; while no
command comes the servos keep the last one.

Every command that arrives is classified: ``command`` (eager PyTorch on the inputs of the
latest tick, after the limits: clamped, and at most ``max_step`` from the previous command;
where ticks are not awaited, :attr:`ClosedLoop.late` lets it answer one of a few unanswered
ticks before; a restarted node's first command is not step-limited:
:attr:`ClosedLoop.fresh_limits`),
``safe`` (the hold: the previous command again) or ``wrong`` (noted with what was expected,
and which tick's eager output it is nearest to).

"Latest" is as of the moment the middleware received the command (its ``received_timestamp``),
not the moment the loop takes it: the loop may take a command late (its callbacks run only
while it spins, between ticks, and a loaded machine leaves it little time), and meanwhile it
sends further ticks. A command is therefore checked against the ticks sent before it arrived
(:meth:`ClosedLoop.candidates`): how long the loop took to read it is no fault of the graph,
while a graph that answers ticks older than :attr:`ClosedLoop.late` is still wrong.
Each fault ends on an event, never after a length of wall time: the hold arrived a number of
times, the node's status counted the inputs it must not answer, a service answered. The
nodes' status records are kept in arrival order (:attr:`ClosedLoop.statuses`).
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from leapp_ros.plan.pipeline import STATUS_TOPIC
from leapp_ros.testing import GraphUnderTest
from leapp_ros.testing.probe import qos
from support.sim import (
    JOINTS,
    REFERENCE,
    TICK_S,
    Arm,
    eager_targets,
    imu_message,
    joint_state_message,
)

__all__ = ["LIMITS", "START", "TIMEOUT_S", "ClosedLoop", "Fault", "params_document"]

TIMEOUT_S = 0.1  # input_timeout_ms / 1000
LIMITS = {"min": (-0.5, -1.2, -0.3), "max": (0.39, 0.0, 0.37), "max_step": 0.02}  # targets
START = tuple(r + d for r, d in zip(REFERENCE, (0.2, -0.15, 0.2), strict=True))
TOLERANCE = 1e-5
JOINT_ORDERS = (
    ("elbow", "gripper", "wrist", "shoulder"),
    ("wrist", "shoulder", "gripper", "elbow"),
)
KEPT_TICKS = 256  # ticks kept for a command the loop takes late (5 s at 50 Hz)
ANSWER_S = 5.0  # longest wait for the command of a tick (an overall timeout, not a window)
STATUS_S = 30.0  # longest wait for a status record the loop needs


def params_document() -> dict[str, Any]:
    """The nodes' parameters: a watchdog, ``rate_hz`` of one control tick, and on the targets
    the hold as safe action, joint limits and ``max_step``."""
    targets = {
        "safe_action": "hold",
        "min": list(LIMITS["min"]),
        "max": list(LIMITS["max"]),
        "max_step": LIMITS["max_step"],
    }
    return {
        "/**": {
            "ros__parameters": {
                "input_timeout_ms": TIMEOUT_S * 1000,
                "rate_hz": 1 / TICK_S,
                "ports": {"joint_targets": targets},
            }
        }
    }


def limited(raw: np.ndarray, last: np.ndarray | None) -> tuple[np.ndarray, bool, bool]:
    """``raw`` after the limits, as the node applies them (float32 values, float64 limits):
    at most ``max_step`` from ``last``, then clamped; whether it clamped, whether it stepped."""
    value, stepped, clamped = raw, False, False
    step = LIMITS["max_step"]
    if last is not None and np.any(np.abs(value - last) > step):
        stepped = True
        value = last + np.clip(value - last, -step, step)
    low, high = np.asarray(LIMITS["min"]), np.asarray(LIMITS["max"])
    if np.any(value < low) or np.any(value > high):
        clamped = True
        value = np.clip(value, low, high)
    return value.astype(np.float32), clamped, stepped


@dataclass
class Fault:
    """One fault and the messages from its start to the next fault's (monotonic times, which
    the report prints and no rule asserts on, except that a hold never comes before the
    watchdog's timeout)."""

    name: str
    started: float
    ended: float | None = None  # the cause is gone: sensors back, released, activated
    first_safe: float | None = None
    first_command: float | None = None  # the first normal command after ``ended``
    first_command_tick: int | None = None
    first_tick_after: int | None = None  # the first tick sent after ``ended``
    arrivals: list[tuple[float, str]] = field(default_factory=list)  # (time, kind)
    commands_during: int = 0  # answers to ticks sent between start and end
    proven_silent: int | None = None  # arrivals when the status proved the inputs processed

    def count(self, kind: str) -> int:
        return sum(seen == kind for _, seen in self.arrivals)

    def kinds_before_end(self) -> list[str]:
        return [kind for moment, kind in self.arrivals if moment < (self.ended or np.inf)]

    def summary(self) -> dict[str, Any]:
        def since(moment: float | None, origin: float | None) -> float | None:
            return None if moment is None or origin is None else round(moment - origin, 4)

        return {
            "safe_action_after_s": since(self.first_safe, self.started),
            "commands_resumed_after_s": since(self.first_command, self.ended),
            "commands_checked": len(self.arrivals),
            "safe_actions": self.count("safe"),
        }


class ClosedLoop:
    """The arm driven through ``graph`` tick by tick, every command checked on arrival."""

    def __init__(self, graph: GraphUnderTest, policy: Any, arm: Arm):
        from lifecycle_msgs.srv import ChangeState
        from sensor_msgs.msg import Imu, JointState
        from std_msgs.msg import Float64MultiArray, String
        from std_srvs.srv import SetBool

        self.graph, self.policy, self.arm = graph, policy, arm
        namespace = graph.plan.namespace
        self.node_name = f"{namespace}/{'leapp_fused' if graph.fused else 'policy'}"
        probe = graph.probe
        self.joints = probe.publisher(f"{namespace}/preprocess/joint_states", JointState)
        self.imu = probe.publisher(f"{namespace}/preprocess/imu", Imu)
        self.enable = probe.node.create_client(SetBool, f"{self.node_name}/enable")
        self.change_state = probe.node.create_client(ChangeState, f"{self.node_name}/change_state")
        topic = f"{namespace}/policy/joint_targets"
        probe.node.create_subscription(
            Float64MultiArray,
            topic,
            lambda message, info: self._on_command(message, info),
            qos(depth=1000),
        )
        self.statuses: list[dict[str, Any]] = []
        probe.node.create_subscription(
            String,
            f"{namespace}/{STATUS_TOPIC}",
            lambda message: self.statuses.append(json.loads(message.data)),
            qos(depth=100, transient_local=True),
        )
        # matched both ways: the probe's publishers by the nodes, and the nodes' subscriptions
        # by the probe's publishers (their status records count them), so no tick is lost
        probe.spin_until(
            lambda: not probe.connection_gaps(namespace), 20, "every hop matched both ways"
        )
        for client in (self.enable, self.change_state):
            probe.spin_until(client.service_is_ready, 20, f"service {client.srv_name}")

        def matched() -> bool:  # the harness's subscription and this one: no command lost
            return graph.status().get("policy", {}).get("subscribers", {}).get(topic, 0) >= 2

        probe.spin_until(matched, 20, f"the publisher of {topic} to match the test")
        self._init_checks()

    def _init_checks(self) -> None:
        """What the checks of the commands keep (no ROS: a test of the checks makes a loop
        with this alone)."""
        self.applied = np.asarray(START)
        self.last: np.ndarray | None = None  # the last command published, float32
        self.fresh_limits = False  # a restarted node: its first command is not step-limited
        self.late = 0  # unawaited ticks: a command may answer one of this many earlier ones
        self.earlier: deque[tuple[int, float, np.ndarray]] = deque()  # their candidates
        self.candidate: tuple[int, float, np.ndarray] | None = None  # (tick, sent, eager)
        self.sent_ns: deque[tuple[int, int]] = deque(maxlen=KEPT_TICKS)  # (tick, time_ns)
        self.eager: deque[tuple[int, np.ndarray]] = deque(maxlen=KEPT_TICKS)  # every tick's
        self.received_ns: int | None = None  # when the command being classified arrived
        self.newest = -1  # the latest tick sent before it arrived
        self.answered = -1  # the latest tick whose command came
        self.ticks = 0
        self.awaited = 0  # ticks whose command the loop waited for
        self.last_joints_at = 0.0
        self.faults = [Fault("none", time.monotonic())]
        self.wrong: list[str] = []
        self.missing: list[int] = []
        self.clamped = self.step_limited = 0
        self.lowest_tip, self.largest_deviation = self.arm.tip_height(), self.arm.deviation()

    # --- commands ---------------------------------------------------------------------------

    def _on_command(self, message: Any, info: Any = None) -> None:
        now = time.monotonic()
        value = np.asarray(message.data, dtype=np.float64)
        received = (info or {}).get("received_timestamp") or None
        self.received_ns = received
        self.newest = self._newest_before(received)
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

    def _newest_before(self, received_ns: int | None) -> int:
        """The latest tick whose messages were sent before ``received_ns`` (None: the latest
        tick sent)."""
        if received_ns is None:
            return self.sent_ns[-1][0] if self.sent_ns else -1
        for tick, sent_ns in reversed(self.sent_ns):
            if sent_ns <= received_ns:
                return tick
        return -1

    def candidates(self) -> list[tuple[int, float, np.ndarray]]:
        """The unanswered ticks the command being classified may answer, newest first: the
        latest sent before it arrived (:attr:`newest`) and, with :attr:`late`, that many
        before it."""
        pool = [self.candidate, *reversed(self.earlier)]
        return [
            candidate
            for candidate in pool
            if candidate is not None and self.newest - self.late <= candidate[0] <= self.newest
        ]

    def nearest_eager(self, value: np.ndarray) -> str:
        """Which kept tick's eager output ``value`` is nearest to, and how far, in words (for
        a wrong command: a lag shows as a tick long before the latest one sent)."""
        if not self.eager:
            return "no tick kept"
        ticks = [tick for tick, _ in self.eager]
        distance = np.max(np.abs(np.stack([raw for _, raw in self.eager]) - value), axis=1)
        index = int(np.argmin(distance))
        behind = self.newest - ticks[index]
        return (
            f"nearest eager: tick {ticks[index]}, {behind} tick(s) before the latest sent when "
            f"it arrived (tick {self.newest}), off by {distance[index]:.2e}; the loop took it "
            f"{self.sent_ns[-1][0] - self.newest} tick(s) after it arrived"
        )

    def _classify(self, value: np.ndarray) -> tuple[str, int | None, float]:
        """``command`` (eager on the latest tick sent before it arrived, limited; with
        :attr:`late`, or on one of that many unanswered ticks before it), ``safe`` (the last
        command again) or ``wrong`` (noted), with the tick answered and when it was sent."""
        for candidate in self.candidates():
            tick, sent, raw = candidate
            expected, clamped, stepped = limited(raw, None if self.fresh_limits else self.last)
            if np.allclose(value, expected, rtol=0, atol=TOLERANCE):
                self._take(tick)
                self.fresh_limits = False
                self.clamped += clamped
                self.step_limited += stepped
                return "command", tick, sent
        if self.last is not None and np.allclose(value, self.last, rtol=0, atol=TOLERANCE):
            return "safe", None, 0.0
        candidates = self.candidates()
        if not candidates:
            expected_text = "no command (no valid set was sent since the last one)"
        else:
            raw = candidates[0][2]
            expected = limited(raw, None if self.fresh_limits else self.last)[0]
            expected_text = f"eager for tick {candidates[0][0]}, limited: {expected.tolist()}"
        self.wrong.append(
            f"message {sum(len(f.arrivals) for f in self.faults) + 1} (during fault "
            f"{self.faults[-1].name!r}, tick {self.ticks}): {value.tolist()}; expected "
            f"{expected_text} or the hold {None if self.last is None else self.last.tolist()}"
            f"; {self.nearest_eager(value)}"
        )
        return "wrong", None, 0.0

    def _take(self, tick: int) -> None:
        """A command answered ``tick``: it, and every tick before it, is answered or passed."""
        if self.candidate is not None and self.candidate[0] <= tick:
            self.candidate = None
        while self.earlier and self.earlier[0][0] <= tick:
            self.earlier.popleft()
        self.answered = max(self.answered, tick)

    # --- ticks ------------------------------------------------------------------------------

    def tick(
        self,
        *,
        joints: bool = True,
        nan: str | None = None,
        answer: bool = True,
        spike: float | None = None,
        until: Callable[[], bool] | None = None,
    ) -> None:
        """One tick: publish the IMU and (with ``joints``) the JointState of the arm now
        (``nan``: ``"joints"`` or ``"imu"`` carries a NaN; ``spike``: the elbow's velocity
        reads this, not what the arm does), wait for the command if ``answer`` (or, given
        ``until``, until that event), pace to one tick per control period, apply the newest
        command and step the arm."""
        begun = time.monotonic()
        self.graph.spin(0)  # raises if a node died
        reading, stamp = self.arm.read(), self.arm.time
        valid = joints and nan is None and spike is None
        self.sending(eager_targets(self.policy, reading) if valid else None, begun)
        fault = self.faults[-1]
        if fault.ended is not None and fault.first_tick_after is None:
            fault.first_tick_after = self.ticks
        self.imu.publish(imu_message(reading, stamp, nan_gyro=nan == "imu"))
        if joints:
            order = JOINT_ORDERS[self.ticks % len(JOINT_ORDERS)]
            nan_joint = "elbow" if nan == "joints" else None
            sent = reading
            if spike is not None:
                velocity = reading.velocity.copy()
                velocity[JOINTS.index("elbow")] = spike
                sent = replace(reading, velocity=velocity)
            self.joints.publish(joint_state_message(sent, stamp, order, nan_joint=nan_joint))
            self.last_joints_at = time.monotonic()
        if until is not None:
            self.spin(until=begun + ANSWER_S, done=until)
        elif answer and valid:
            self.awaited += 1
            self.spin(until=begun + ANSWER_S, done=lambda: self.answered == self.ticks)
            if self.answered != self.ticks:
                self.missing.append(self.ticks)
        # Pacing only: the robot's sensors come once per control period, as on a robot.
        self.spin(until=begun + TICK_S)
        self.arm.command(self.applied)
        self.arm.step()
        self.lowest_tip = min(self.lowest_tip, self.arm.tip_height())
        self.largest_deviation = max(self.largest_deviation, self.arm.deviation())
        self.ticks += 1

    def sending(self, raw: np.ndarray | None, begun: float) -> None:
        """Tick :attr:`ticks` is about to be sent: its candidate (eager PyTorch ``raw`` on
        its inputs, None when no command may answer it), and when it is sent."""
        if self.late and self.candidate is not None:
            self.earlier.append(self.candidate)  # (those too old are left out when checking)
            while len(self.earlier) > KEPT_TICKS:
                self.earlier.popleft()
        self.candidate = None if raw is None else (self.ticks, begun, raw)
        if raw is not None:
            self.eager.append((self.ticks, raw))
        self.sent_ns.append((self.ticks, time.time_ns()))  # before its first message goes

    def run(self, count: int, **options: Any) -> None:
        for _ in range(count):
            self.tick(**options)

    def run_until(self, done: Callable[[], bool], limit: int, **options: Any) -> bool:
        """Ticks until ``done()`` (checked before each), at most ``limit``; whether it is."""
        for _ in range(limit):
            if done():
                return True
            self.tick(**options)
        return done()

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

    def parameter(self, node: str, name: str) -> Any:
        """The value of parameter ``name`` of the graph's node ``node``, as the live node has
        it (its ``get_parameters`` service)."""
        from rcl_interfaces.srv import GetParameters
        from rclpy.parameter import parameter_value_to_python

        client = self.graph.probe.node.create_client(
            GetParameters, f"{self.graph.plan.namespace}/{node}/get_parameters"
        )
        try:
            self.graph.probe.spin_until(client.service_is_ready, 20, f"{node}'s parameters")
            (value,) = self.call(client, GetParameters.Request(names=[name])).values
            return parameter_value_to_python(value)
        finally:
            self.graph.probe.node.destroy_client(client)

    def wait(self, condition: Callable[[], Any], what: str) -> Any:
        """Spin until ``condition()`` holds (AssertionError naming ``what`` after a generous
        overall timeout)."""
        return self.graph.probe.spin_until(condition, STATUS_S, what)

    def latest_status(self, since: int = 0) -> dict[str, dict[str, Any]]:
        """The latest status record per node among those that came after the first ``since``."""
        return {record["node"]: record for record in self.statuses[since:]}

    def commanding_nodes(self) -> list[str]:
        """The pipeline nodes whose records the commanding process publishes (the fused node
        publishes every pipeline node's)."""
        return [node.name for node in self.graph.plan.nodes] if self.graph.fused else ["policy"]

    def inactive_received(self) -> int | None:
        """How many messages the commanding process received, by its latest status records,
        if they all say it is inactive (else None)."""
        latest = self.latest_status()
        records = [latest.get(name, {}) for name in self.commanding_nodes()]
        if not all(record.get("lifecycle") == "inactive" for record in records):
            return None
        return sum(record["received"] for record in records)

    def record(self) -> dict[str, Any]:
        return {
            "ticks": self.ticks,
            "commands_checked": sum(len(f.arrivals) for f in self.faults),
            "wrong": len(self.wrong),
            "clamped": self.clamped,
            "step_limited": self.step_limited,
            "lowest_tip_m": round(self.lowest_tip, 4),
            "largest_deviation_rad": round(self.largest_deviation, 4),
            "faults": {
                f.name: f.summary() for f in self.faults if f.name not in ("none", "finish")
            },
        }
