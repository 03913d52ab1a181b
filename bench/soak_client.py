"""The client side of bench/soak.py: recognizable inputs, malformed messages, the client node.

- :class:`TickCode` turns a tick counter into the seed's ``state`` and ``velocity`` and an
  ``action`` back into the inputs that produced it, then checks the action against eager
  PyTorch. Tick ``t`` sets every state value to a multiple of the level ``L(t mod M)`` (and the
  velocity likewise), with levels spread over [-1, 1] in a scrambled order, so neighbouring
  ticks differ a lot. The seed is ``action = tanh(W [2 state, velocity] + b)`` (no clamp at these
  values): ``atanh(action)`` is affine in the two levels, which a least-squares solve recovers
  (the affine map is measured with the eager pipeline itself, not read from the weights). A
  pair mixing the state of one tick with the velocity of another (the node fires with the
  newest value of each input, and the inputs are best effort) decodes as such. An action that
  decodes to no pair of levels, or differs from eager PyTorch on the decoded inputs, is wrong.
- :func:`bad_messages`: malformed messages for one input port (wrong length, empty, a layout
  that is not the port's, a 200 000-element array, NaN values); :func:`bad_packed_messages`
  the same for the packed input.
- :class:`SoakClient`: one rclpy node on a context of its own (EventsExecutor), publishing the
  inputs in one of two forms (:data:`FORMS`: ``separate``, a message on ``state`` then one on
  ``velocity``; ``packed``, both in one message on ``preprocess/packed_inputs`` named with the
  tick, README: coherent input sets), collecting every action with its arrival time and the
  tick it carries, and following ``_leapp/status`` (:class:`StatusTally` keeps counters summed
  over node restarts).
"""

from __future__ import annotations

import array
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "BAD_KINDS",
    "FORMS",
    "HUGE_ELEMENTS",
    "Answers",
    "SoakClient",
    "StatusTally",
    "TickCode",
    "bad_messages",
    "bad_packed_messages",
]

#: how the client sends a tick's inputs: two messages, or one packed message with the tick
FORMS = ("separate", "packed")

HUGE_ELEMENTS = 200_000
#: kinds of malformed messages, and the status counter each one should raise; in the order
#: sent (a huge message takes the node a while, so the next one is more often overwritten by
#: the tick after it under load: not the only NaN one).
BAD_KINDS = {
    "wrong length": "dropped",
    "nan": "nonfinite_inputs",
    "empty": "dropped",
    "layout": "dropped",
    "huge": "dropped",
}
_SCRAMBLE = 379  # coprime with the default level count: neighbouring ticks get distant levels
_MAX_PRE_TANH = 1.5  # keeps atanh(action) well conditioned
_NAN_ACTION = np.full(6, np.nan, np.float32).tobytes()  # an action of another length: wrong
_STATE_SHAPE = (1.0, -0.8, 0.6, -0.4, 0.9, -0.7)
_VELOCITY_SHAPE = (0.5, -1.0, 0.75)


class TickCode:
    """Inputs of each tick, and the tick pair behind each action (see the module docstring).

    Args:
        eager: ``eager(state, velocity) -> action`` with float32 torch tensors (no grad).
        levels: distinct values per input; ticks ``levels`` apart share their inputs, so it
            must exceed the answers' latency in ticks (1000 at 500 Hz: 2 s).
    """

    def __init__(self, eager: Callable[[Any, Any], Any], levels: int = 1000):
        if np.gcd(_SCRAMBLE, levels) != 1:
            raise ValueError(f"levels must be coprime with {_SCRAMBLE}, got {levels}")
        self.levels = levels
        self._eager = eager
        self._cache: dict[tuple[int, int], np.ndarray] = {}
        order = (np.arange(levels) * _SCRAMBLE) % levels  # tick residue -> level index
        self._residue_of = np.argsort(order)  # level index -> tick residue
        self._value = -1.0 + 2.0 * order / (levels - 1)  # tick residue -> level value
        self._state = np.array(_STATE_SHAPE)
        self._velocity = np.array(_VELOCITY_SHAPE)
        z0, a, b = self._affine()
        scale = min(1.0, (_MAX_PRE_TANH - np.abs(z0).max()) / (np.abs(a) + np.abs(b)).max())
        self._state *= scale
        self._velocity *= scale
        self._z0, a, b = self._affine()
        self._solve = np.linalg.pinv(np.stack([a, b], axis=1))  # (2, 6)
        probe = self._pre_tanh(0.3, -0.6)
        if not np.allclose(self._z0 + 0.3 * a - 0.6 * b, probe, atol=1e-5):
            raise ValueError("atanh(action) is not affine in the inputs: not the seed pipeline")
        self.states = [array.array("f", self._state * v) for v in self._value]
        self.velocities = [array.array("f", self._velocity * v) for v in self._value]

    def _pre_tanh(self, s: float, v: float) -> np.ndarray:
        action = self._call(
            (self._state * s).astype(np.float32), (self._velocity * v).astype(np.float32)
        )
        return np.arctanh(action.astype(np.float64))

    def _affine(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        z0 = self._pre_tanh(0.0, 0.0)
        return z0, self._pre_tanh(1.0, 0.0) - z0, self._pre_tanh(0.0, 1.0) - z0

    def _call(self, state: np.ndarray, velocity: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            action = self._eager(torch.from_numpy(state), torch.from_numpy(velocity))
        return action.numpy().astype(np.float32)

    def decode(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(state_residue, velocity_residue, ok)`` of each action (rows of ``actions``):
        the tick residues (tick mod ``levels``) whose inputs produced it; ``ok`` is False
        where the action decodes to no pair of levels."""
        with np.errstate(invalid="ignore", divide="ignore"):
            z = np.arctanh(actions.astype(np.float64))
        found = (z - self._z0) @ self._solve.T  # (N, 2): state level, velocity level
        index = (found + 1.0) * (self.levels - 1) / 2.0
        nearest = np.rint(np.nan_to_num(index, nan=-1.0))
        ok = np.all(np.abs(index - nearest) < 0.25, axis=1)
        ok &= np.all((nearest >= 0) & (nearest < self.levels), axis=1)
        nearest = np.clip(nearest, 0, self.levels - 1).astype(np.int64)
        residues = self._residue_of[nearest]
        return residues[:, 0], residues[:, 1], ok

    def expected(self, state_residue: int, velocity_residue: int) -> np.ndarray:
        """Eager PyTorch's action for the state of one tick and the velocity of another."""
        key = (int(state_residue), int(velocity_residue))
        if key not in self._cache:
            state = np.frombuffer(self.states[key[0]], np.float32)
            velocity = np.frombuffer(self.velocities[key[1]], np.float32)
            self._cache[key] = self._call(state, velocity)
        return self._cache[key]

    def check(
        self, actions: np.ndarray, atol: float = 1e-5
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(state_residue, velocity_residue, wrong)`` of each action; wrong: undecodable,
        or not eager PyTorch's action (``atol``) for the inputs it decodes to."""
        states, velocities, ok = self.decode(actions)
        wrong = ~ok
        for row in np.flatnonzero(ok):
            expected = self.expected(states[row], velocities[row])
            wrong[row] = not np.allclose(actions[row], expected, rtol=1e-4, atol=atol)
        return states, velocities, wrong


@dataclass(frozen=True)
class Answers:
    """Every action received, checked: when it arrived, the ticks whose state and velocity
    produced it (negative: sent before the run, while priming), whether it is wrong, and the
    tick it carries in its layout (-1: none)."""

    arrivals: np.ndarray
    state_tick: np.ndarray
    velocity_tick: np.ndarray
    wrong: np.ndarray
    carried_tick: np.ndarray

    @property
    def good(self) -> np.ndarray:
        """Right answers to ticks of the run."""
        return ~self.wrong & (self.state_tick >= 0) & (self.velocity_tick >= 0)


def bad_messages(message_class: Any, size: int) -> dict[str, Any]:
    """One malformed ``message_class`` (a Float32MultiArray) per kind of :data:`BAD_KINDS`
    for a 1-d input port of ``size`` elements."""
    from std_msgs.msg import MultiArrayDimension, MultiArrayLayout

    def message(values: Any, dims: tuple[tuple[int, int], ...] = ()) -> Any:
        layout = MultiArrayLayout(dim=[MultiArrayDimension(size=s, stride=t) for s, t in dims])
        return message_class(data=array.array("f", values), layout=layout)

    return {
        "wrong length": message([0.25] * (size + 1)),
        "empty": message([]),
        "layout": message([0.25] * size, ((1, size), (size, size))),
        "huge": message(bytes(4 * HUGE_ELEMENTS)),
        "nan": message([float("nan")] * size),
    }


def bad_packed_messages(message_class: Any, sizes: tuple[int, ...]) -> dict[str, Any]:
    """:func:`bad_messages` for the packed input of ports of ``sizes`` (labelled ``state``,
    ``velocity``): the wrong length, an empty message, the ports in another order, a huge
    one, NaN values."""
    from std_msgs.msg import MultiArrayDimension, MultiArrayLayout

    def message(values: Any, dims: list[tuple[str, int]]) -> Any:
        layout = MultiArrayLayout(
            dim=[MultiArrayDimension(label=a, size=n, stride=n) for a, n in dims]
        )
        return message_class(data=array.array("f", values), layout=layout)

    ports = list(zip(("state", "velocity"), sizes, strict=True))
    total = sum(sizes)
    return {
        "wrong length": message([0.25] * (total + 1), []),
        "empty": message([], []),
        "layout": message([0.25] * total, ports[::-1]),
        "huge": message(bytes(4 * HUGE_ELEMENTS), []),
        "nan": message([float("nan")] * total, ports),
    }


class StatusTally:
    """The latest ``_leapp/status`` record of each pipeline node, and counters summed over
    the node's lives (a restarted node counts from zero again)."""

    COUNTERS = ("runs", "received", "dropped", "errors", "nonfinite_inputs")

    def __init__(self) -> None:
        self.latest: dict[str, dict[str, Any]] = {}
        self._banked: dict[str, int] = dict.fromkeys(self.COUNTERS, 0)

    def add(self, record: dict[str, Any]) -> None:
        node = record.get("node", "?")
        last = self.latest.get(node)
        if last is not None and record.get("received", 0) < last.get("received", 0):
            for name in self.COUNTERS:
                self._banked[name] += int(last.get(name, 0))
        self.latest[node] = record

    def totals(self) -> dict[str, int]:
        """Every counter summed over the nodes and their lives."""
        return {
            name: self._banked[name] + sum(int(r.get(name, 0)) for r in self.latest.values())
            for name in self.COUNTERS
        }


class SoakClient:
    """The bench's ROS side: publishes ``state`` and ``velocity`` of ticks, records every
    ``action`` (its data, ``time.monotonic()`` of arrival and the ticks published by then),
    and tallies the nodes' status records. Spin it with :meth:`spin_until`.

    Args:
        domain_id: the ROS domain of the graph.
        plan: the seed's :class:`~leapp_ros.plan.pipeline.PipelinePlan`.
        code: the inputs of each tick.
        form: one of :data:`FORMS`.
    """

    def __init__(self, domain_id: int, plan: Any, code: TickCode, form: str = "separate"):
        import rclpy
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Float32MultiArray, MultiArrayDimension, MultiArrayLayout, String

        from leapp_ros.node.executor import make_executor
        from leapp_ros.plan.pipeline import STATUS_TOPIC

        if form not in FORMS:
            raise ValueError(f"form must be one of {FORMS}, got {form!r}")
        self.code, self.form = code, form
        self._message_class = Float32MultiArray
        preprocess, policy = plan.node("preprocess"), plan.node("policy")
        ports = ("state", "velocity")
        sizes = tuple(preprocess.input(port).shape[0] for port in ports)
        if form == "packed":
            self.topics = [plan.resolve(preprocess.packed.topic)]
            self._bad = [bad_packed_messages(Float32MultiArray, sizes)]
        else:
            self.topics = [plan.resolve(preprocess.input(port).topic) for port in ports]
            self._bad = [bad_messages(Float32MultiArray, size) for size in sizes]
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node("soak_client", context=self.context)
        self._qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
        self._messages = [Float32MultiArray(), Float32MultiArray()]
        dims = [
            MultiArrayDimension(label=a, size=n, stride=n)
            for a, n in zip(ports, sizes, strict=True)
        ]
        self._packed = Float32MultiArray(layout=MultiArrayLayout(dim=dims))
        self._publishers: list[Any] = []
        self.ticks_sent = 0  # ticks published so far (the next tick's number)
        self.actions: list[Any] = []  # array.array per answer
        self.carried: list[str] = []  # the first layout label of each answer
        self.arrivals: list[float] = []
        self.sent_by_then: list[int] = []
        self.status = StatusTally()
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        action_topic = plan.resolve(policy.output("action").topic)
        self.node.create_subscription(Float32MultiArray, action_topic, self._on_action, reliable)
        latched = QoSProfile(
            depth=100,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        status_topic = f"{plan.namespace.rstrip('/')}/{STATUS_TOPIC}"
        self.node.create_subscription(String, status_topic, self._on_status, latched)
        self.executor = make_executor(self.context)
        self.executor.add_node(self.node)
        self.create_publishers()

    def _on_action(self, message: Any) -> None:
        self.actions.append(message.data)
        dims = message.layout.dim
        self.carried.append(dims[0].label if len(dims) else "")
        self.arrivals.append(time.monotonic())
        self.sent_by_then.append(self.ticks_sent)

    def _on_status(self, message: Any) -> None:
        self.status.add(json.loads(message.data))

    @property
    def publishing(self) -> bool:
        return bool(self._publishers)

    def create_publishers(self) -> None:
        """The input publishers (again, after :meth:`destroy_publishers`)."""
        self._publishers = [
            self.node.create_publisher(self._message_class, topic, self._qos)
            for topic in self.topics
        ]

    def destroy_publishers(self) -> None:
        """The input publishers disappear from the ROS graph."""
        for publisher in self._publishers:
            self.node.destroy_publisher(publisher)
        self._publishers = []

    def matched(self) -> bool:
        """Whether every input publisher has matched a subscription."""
        return bool(self._publishers) and all(
            publisher.get_subscription_count() > 0 for publisher in self._publishers
        )

    def publish_tick(self, tick: int) -> None:
        """Publish the inputs of ``tick``: state first, then velocity; or, packed, both in
        one message whose first label carries the tick."""
        residue = tick % self.code.levels
        if self.form == "packed":
            packed = self._packed
            packed.layout.dim[0].label = f"state@{tick}"
            packed.data = self.code.states[residue] + self.code.velocities[residue]
            self._publishers[0].publish(packed)
            self.ticks_sent = tick + 1
            return
        state, velocity = self._messages
        state.data = self.code.states[residue]
        velocity.data = self.code.velocities[residue]
        self._publishers[0].publish(state)
        self._publishers[1].publish(velocity)
        self.ticks_sent = tick + 1

    def publish_bad(self, kind: str) -> None:
        """One malformed message of ``kind`` on every input topic."""
        for publisher, messages in zip(self._publishers, self._bad, strict=True):
            publisher.publish(messages[kind])

    def prime(self, timeout_s: float = 60.0) -> None:
        """Publish until the graph answers, then forget the answers and the ticks sent."""
        deadline = time.monotonic() + timeout_s
        while not self.actions:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the graph never answered within {timeout_s:.0f} s")
            self.publish_tick(self.code.levels - 1)
            self.spin_until(time.monotonic() + 0.1)
        self.spin_until(time.monotonic() + 0.5)
        self.forget_answers()
        self.ticks_sent = 0

    def spin_until(self, deadline: float) -> None:
        """Handle callbacks until ``time.monotonic()`` reaches ``deadline``."""
        spin_once = self.executor.spin_once
        while (left := deadline - time.monotonic()) > 0:
            spin_once(timeout_sec=left)

    def answers(self) -> Answers:
        """Every action received, checked against eager PyTorch. Each is attributed to the
        latest ticks sent by its arrival whose residues it decodes to."""
        data = b"".join(a.tobytes() if len(a) == 6 else _NAN_ACTION for a in self.actions)
        states, velocities, wrong = self.code.check(np.frombuffer(data, np.float32).reshape(-1, 6))
        last = np.array(self.sent_by_then, np.int64) - 1
        levels = self.code.levels
        return Answers(
            np.array(self.arrivals),
            last - (last - states) % levels,
            last - (last - velocities) % levels,
            wrong,
            np.array([_tick(label) for label in self.carried], np.int64),
        )

    def forget_answers(self) -> None:
        self.actions.clear()
        self.carried.clear()
        self.arrivals.clear()
        self.sent_by_then.clear()

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()


def _tick(label: str) -> int:
    """The tick a label carries (``dim0@42``: 42), -1 for none."""
    from leapp_ros.messages.tick_label import label_tick

    tick = label_tick(label)
    return -1 if tick is None else tick
