"""The rate loop's robot side: :class:`RateDrive` runs the arm of :mod:`rate_arm` at 500 Hz
against a graph (or any node of the same topics) and records every message both ways.

Each physics step (2 ms of simulated time, paced to wall time; when the loop falls behind it
drops the lag instead of bursting) the arm's servos take the newest ``joint_targets`` received,
the arm steps, and the loop publishes the sensors of the new instant, stamped with the
simulated time: a ``sensor_msgs/JointState`` and a ``sensor_msgs/Imu`` (in alternating order),
and every 50th step (10 Hz) a ``geometry_msgs/Twist`` on ``cmd_vel`` with a new command. A
:class:`Schedule` takes streams away: an IMU dropout, a ``cmd_vel`` that stops, joint states at a
lower rate. Every message published and every ``action`` and ``joint_targets`` received (with
its arrival time) is kept in a :class:`Record` for :mod:`rate_check`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rate_arm import Plant, Reading, imu_message, joint_state_message, twist_message

__all__ = ["FAULTS", "RateDrive", "Record", "Schedule"]

STEP_S = 0.002
TWIST_EVERY = 50  # steps: 10 Hz
_LAG_S = 0.02  # behind by more than this: the lag is dropped, not made up in a burst


@dataclass(frozen=True)
class Schedule:
    """Which streams a run of ``steps`` physics steps publishes when (step ranges, half
    open): the IMU is away during ``imu_dropout``, ``cmd_vel`` during ``twist_stop``, and the
    joint states come every ``n``-th step during each ``(start, end, n)`` of ``joint_rates``."""

    steps: int
    imu_dropout: tuple[int, int] = (0, 0)
    twist_stop: tuple[int, int] = (0, 0)
    joint_rates: tuple[tuple[int, int, int], ...] = ()

    def imu(self, step: int) -> bool:
        return not self.imu_dropout[0] <= step < self.imu_dropout[1]

    def twist(self, step: int) -> bool:
        return step % TWIST_EVERY == 0 and not self.twist_stop[0] <= step < self.twist_stop[1]

    def joints(self, step: int) -> bool:
        for start, end, every in self.joint_rates:
            if start <= step < end:
                return step % every == 0
        return True


# 4 s: a 0.3 s IMU dropout, cmd_vel gone for 1 s, joint states at 250 Hz, then at 100 Hz
FAULTS = Schedule(
    steps=2000,
    imu_dropout=(250, 400),
    twist_stop=(650, 1150),
    joint_rates=((900, 1300, 2), (1300, 1600, 5)),
)


@dataclass
class Record:
    """Every message of one run: the readings published (by stamp), which stamps went out as
    JointState and as Imu, the commands (``(step, command)`` in order), the step of each stamp,
    and what came back (``(arrival, value)`` in order)."""

    readings: dict[int, Reading] = field(default_factory=dict)
    joint_stamps: set[int] = field(default_factory=set)
    imu_stamps: set[int] = field(default_factory=set)
    twists: list[tuple[int, np.ndarray]] = field(default_factory=list)
    step_of: dict[int, int] = field(default_factory=dict)
    results: list[tuple[float, np.ndarray]] = field(default_factory=list)
    targets: list[tuple[float, np.ndarray]] = field(default_factory=list)
    lag_dropped_s: float = 0.0
    largest_deviation: float = 0.0


def command_at(step: int) -> np.ndarray:
    """The ``cmd_vel`` of ``step``: forward, sideways, turn rate (each command differs)."""
    t = step * STEP_S
    return np.array([0.4 * math.sin(1.3 * t), 0.2 * math.cos(0.7 * t), 0.5 * math.sin(2.1 * t)])


class RateDrive:
    """The arm driven against the nodes under ``namespace`` (see the module documentation).

    Args:
        node: an rclpy node to publish and subscribe with; ``executor`` spins it.
        namespace: where ``preprocess/{joint_states,imu,cmd_vel}`` and
            ``policy/{action,joint_targets}`` are.
        plant: the arm (:class:`rate_arm.Plant`).
    """

    def __init__(self, node: Any, executor: Any, namespace: str, plant: Plant):
        from geometry_msgs.msg import Twist
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Imu, JointState
        from std_msgs.msg import Float32MultiArray, Float64MultiArray

        from leapp_ros.node.match_count import MatchCount

        self.node, self.executor, self.plant = node, executor, plant
        self.record = Record()
        self.matched: list[MatchCount] = []
        reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)

        def publisher(stem: str, kind: Any) -> Any:
            count = MatchCount()
            self.matched.append(count)
            return node.create_publisher(
                kind,
                f"{namespace}/preprocess/{stem}",
                10,
                event_callbacks=count.publisher_callbacks(),
            )

        def subscription(stem: str, kind: Any, into: list) -> None:
            count = MatchCount()
            self.matched.append(count)

            def take(message: Any) -> None:
                into.append((time.monotonic(), np.array(message.data, dtype=np.float64)))

            node.create_subscription(
                kind,
                f"{namespace}/policy/{stem}",
                take,
                reliable,
                event_callbacks=count.subscription_callbacks(),
            )

        self.joints = publisher("joint_states", JointState)
        self.imu = publisher("imu", Imu)
        self.twist = publisher("cmd_vel", Twist)
        subscription("action", Float32MultiArray, self.record.results)
        subscription("joint_targets", Float64MultiArray, self.record.targets)

    def connected(self) -> bool:
        """Whether every publisher and subscription of the drive has matched its partner."""
        return all(count() > 0 for count in self.matched)

    def spin_until(self, deadline: float) -> None:
        """Handle callbacks until ``deadline`` (monotonic), at least once."""
        self.executor.spin_once(timeout_sec=0)
        while (left := deadline - time.monotonic()) > 0:
            self.executor.spin_once(timeout_sec=min(left, 0.002))

    def run(self, schedule: Schedule) -> Record:
        """Publish and step through ``schedule``; the record so far."""
        record, plant = self.record, self.plant
        begun = time.monotonic()
        for step in range(schedule.steps):
            due = begun + step * STEP_S
            if time.monotonic() - due > _LAG_S:
                lag = time.monotonic() - due
                begun += lag
                record.lag_dropped_s += lag
                due += lag
            self.spin_until(due)
            plant.step(record.targets[-1][1] if record.targets else None)
            record.largest_deviation = max(record.largest_deviation, plant.deviation())
            self.publish(step, schedule)
        return record

    def publish(self, step: int, schedule: Schedule) -> None:
        """The messages of ``step``: sensors of the arm now, a command every 50th step."""
        record = self.record
        stamp, reading = self.plant.stamp_ns, self.plant.read()
        record.readings[stamp] = reading
        record.step_of[stamp] = step
        if schedule.twist(step):
            command = command_at(step)
            record.twists.append((step, command))
            self.twist.publish(twist_message(command))
        sends = []
        if schedule.joints(step):
            record.joint_stamps.add(stamp)
            sends.append((self.joints, joint_state_message(reading, stamp, step % 3 == 0)))
        if schedule.imu(step):
            record.imu_stamps.add(stamp)
            sends.append((self.imu, imu_message(reading, stamp)))
        for publisher, message in sends[:: 1 if step % 2 else -1]:
            publisher.publish(message)
