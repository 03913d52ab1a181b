"""The perception example's rover (``examples/perception``) driven through a live graph tick
by tick, every command checked on arrival against eager PyTorch, with the camera covered or
stopped on the ticks a test asks for.

Each tick the loop takes the simulator's messages of one physics state
(:class:`~leapp_ros.sim.mujoco_robot.SimulatedRobot`: the JointState of the two slide joints,
the rover's Odometry and the front camera's ``32FC1`` depth frame), publishes them (the frame
replaced by one of zeros while the camera is ``covered``, left out while it is ``stopped``),
and hands the newest command to the rover's PD servos for one control tick. The nodes gather
their inputs by stamp (``sync: exact``, :func:`params_document`): the first latent after a gap
carries its frame's stamp and joins the JointState and Odometry of that stamp, whatever order
the messages of the tick arrive in. The eager
reference decodes the same bytes with rclpy and NumPy and runs the traced functions
(``encode``, ``act``) outside a session, carrying the GRU's hidden state from command to
command: a tick the graph must not answer (the encoder's latent is NaN, or there is no frame)
leaves it as it was, as it leaves the node's.

Every command that arrives is classified: ``command`` (eager PyTorch on the inputs of the
latest tick, within :data:`TOLERANCE`), ``safe`` (the hold: the previous command again) or
``wrong``. A normal tick waits for its command; a fault tick waits one control period for
what comes (the watchdog is in wall time) and the fault lasts until the hold has come
:data:`HOLDS` times, an event, within a generous number of ticks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from leapp_ros.messages.robot_codecs import message_class
from leapp_ros.plan.bindings import IMAGE, JOINT_STATE, ODOMETRY
from leapp_ros.sim.mujoco_robot import SimulatedRobot
from leapp_ros.testing import GraphUnderTest

__all__ = ["HOLDS", "TIMEOUT_S", "TOLERANCE", "Fault", "RoverLoop", "params_document"]

TOLERANCE = 1e-5
WATCHDOG_FILE = Path(__file__).resolve().parents[2] / "docs" / "snippets" / "rover_watchdog.yaml"
TIMEOUT_S = 0.3  # input_timeout_ms / 1000
TICK_S = 0.1  # the control period (sim_map.yaml: decimation 10 of 10 ms)
HOLDS = 3  # holds a fault lasts for
ANSWER_S = 10.0  # longest wait for the command of a tick (an overall timeout, not a window)
FAULT_TICKS = 100  # the most ticks a fault waits for its holds


def params_document() -> dict[str, Any]:
    """The nodes' parameters, the file the perception page shows
    (``docs/snippets/rover_watchdog.yaml``): a watchdog of :data:`TIMEOUT_S`, ``rate_hz`` of
    one control tick, the hold as the targets' safe action, and sets gathered by stamp."""
    document = yaml.safe_load(WATCHDOG_FILE.read_text(encoding="utf-8"))
    given = document["/**"]["ros__parameters"]
    expected = (TIMEOUT_S * 1000, 1 / TICK_S, "hold", "exact")
    written = (
        given["input_timeout_ms"],
        given["rate_hz"],
        given["ports"]["targets"]["safe_action"],
        given["sync"],
    )
    assert written == expected, f"{WATCHDOG_FILE}: {written}, the loop expects {expected}"
    return document


@dataclass
class Fault:
    """One fault: when it started (monotonic), the last command before it, what came."""

    name: str
    started: float
    last_command_at: float | None
    ticks: int = 0
    first_safe: float | None = None
    kinds: list[str] = field(default_factory=list)

    @property
    def safe_after_s(self) -> float | None:
        """From the fault's first tick to the first hold."""
        return None if self.first_safe is None else self.first_safe - self.started


class RoverLoop:
    """The rover of ``robot`` driven by ``graph``; ``deploy`` is the example's deploy module
    and ``nets`` its trained ``(encoder, policy)``."""

    def __init__(self, graph: GraphUnderTest, robot: SimulatedRobot, deploy: Any, nets: Any):
        self.graph, self.robot, self.deploy, self.nets = graph, robot, deploy, nets
        self.key = robot.command_key
        kinds = {kind: topic for topic, kind in robot.topics.items()}
        self.depth_topic, self.joints_topic = kinds[IMAGE], kinds[JOINT_STATE]
        self.odometry_topic = kinds[ODOMETRY]
        self.h = deploy.start_state()
        self.last: np.ndarray | None = None  # the newest command received
        self.seen = 0  # messages on the command topic taken so far
        self.wrong: list[str] = []
        self.commands = self.holds = self.frames = self.ticks = 0
        self.last_command_at: float | None = None
        self.positions: list[tuple[float, float]] = []
        self.faults: list[Fault] = []

    # --- the eager reference ---------------------------------------------------------------

    def _decode(self, messages: dict[str, bytes]) -> tuple[torch.Tensor, ...]:
        from rclpy.serialization import deserialize_message

        def typed(topic: str) -> Any:
            return deserialize_message(messages[topic], message_class(self.robot.topics[topic]))

        image, joints, odometry = (typed(t) for t in (self.depth_topic, self.joints_topic,
                                                      self.odometry_topic))  # fmt: skip
        depth = np.frombuffer(bytes(image.data), "<f4").reshape(image.height, image.width)
        names = list(joints.name)
        position = [joints.position[names.index(j)] for j in self.deploy.JOINTS]
        linear = odometry.twist.twist.linear
        return (
            torch.from_numpy(depth.copy()),
            torch.tensor(position, dtype=torch.float32),
            torch.tensor([linear.x, linear.y, linear.z], dtype=torch.float32),
        )

    def _expected(self, messages: dict[str, bytes]) -> np.ndarray | None:
        """Eager PyTorch's command for the tick, None when the graph must not answer it; the
        hidden state moves on only when it answers."""
        if self.depth_topic not in messages:
            return None
        depth, position, velocity = self._decode(messages)
        encoder, policy = self.nets
        with torch.no_grad():
            latent = self.deploy.encode(encoder, depth)
            if not torch.isfinite(latent).all():
                return None
            targets, h = self.deploy.act(policy, latent, position, velocity, self.h)
        self.h = h
        return targets.numpy()

    # --- arrivals ----------------------------------------------------------------------------

    def _arrivals(self) -> list[np.ndarray]:
        received = self.graph.received(self.key)
        new = [value.numpy().astype(np.float64) for value in received[self.seen :]]
        self.seen = len(received)
        return new

    def _classify(self, value: np.ndarray, expected: np.ndarray | None) -> str:
        if expected is not None and np.abs(value - expected).max() <= TOLERANCE:
            return "command"
        if self.last is not None and np.array_equal(value, self.last):
            return "safe"
        self.wrong.append(f"tick {self.ticks}: {value.tolist()} (eager: "
                          f"{None if expected is None else expected.tolist()})")  # fmt: skip
        return "wrong"

    def _take(self, values: list[np.ndarray], expected: np.ndarray | None) -> list[str]:
        kinds = []
        for value in values:
            kind = self._classify(value, expected)
            kinds.append(kind)
            now = time.monotonic()
            if kind == "command":
                self.commands += 1
                self.last_command_at = now
            elif kind == "safe":
                self.holds += 1
                fault = self.faults[-1] if self.faults else None
                if fault is not None and fault.first_safe is None:
                    fault.first_safe = now
            self.last = value
        return kinds

    # --- ticks -------------------------------------------------------------------------------

    def _messages(self, camera: str) -> dict[str, bytes]:
        messages = self.robot.sensor_messages()
        if camera == "stopped":
            del messages[self.depth_topic]
        elif camera == "covered":
            kind = self.robot.topics[self.depth_topic]
            messages[self.depth_topic] = _zero_frame(messages[self.depth_topic], kind)
        return messages

    def tick(self, camera: str = "on") -> list[str]:
        """One tick with the camera ``on``, ``covered`` or ``stopped``; the kinds that came."""
        messages = self._messages(camera)
        expected = self._expected(messages)
        self.frames += self.depth_topic in messages
        self.graph.publish(messages)
        kinds: list[str] = []
        deadline = time.monotonic() + (ANSWER_S if expected is not None else TICK_S)
        while time.monotonic() < deadline:
            kinds += self._take(self._arrivals(), expected)
            if expected is not None and ("command" in kinds or "wrong" in kinds):
                break
            self.graph.spin(0.005)
        if expected is not None and not {"command", "wrong"} & set(kinds):
            self.wrong.append(f"tick {self.ticks}: no command within {ANSWER_S} s")
        if self.last is not None:
            state = self.robot.act(self.last)
            self.positions.append(state.position[:2])
        self.ticks += 1
        return kinds

    def run(self, ticks: int) -> None:
        for _ in range(ticks):
            self.tick()

    def fault(self, name: str, camera: str) -> Fault:
        """The camera ``covered`` or ``stopped`` until :data:`HOLDS` holds came."""
        fault = Fault(name, time.monotonic(), self.last_command_at)
        self.faults.append(fault)
        while fault.kinds.count("safe") < HOLDS and fault.ticks < FAULT_TICKS:
            fault.kinds += self.tick(camera)
            fault.ticks += 1
        return fault


def _zero_frame(data: bytes, kind: str) -> bytes:
    """The depth frame ``data`` (CDR) with every pixel 0: a covered lens."""
    from rclpy.serialization import deserialize_message, serialize_message

    image = deserialize_message(data, message_class(kind))
    image.data = bytes(len(image.data))
    return serialize_message(image)
