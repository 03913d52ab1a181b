"""The closed loop of :mod:`support.closed_loop` for a command port that ramps in
(``ports.joint_targets.blend_s`` and ``blend_from: joint_pos``, no limits on the targets):
:class:`BlendedLoop` checks every blended command against the ramp's formula.

After an event that starts a blend (an activation, a latch or e-stop release, a watchdog
recovery, a restarted node's handover), the node's ``k``-th command of ``N`` is
``m + (k / N) * (e_k - m)`` (``m`` the measured joint positions its first command started from,
``e_k`` eager PyTorch on the tick that command answers), the ``N``-th ``e_N`` itself, as
:mod:`leapp_ros.node.ramp` documents. The loop expects a blend wherever commands resume: at
the first command ever and at the first command after a safe action (the hold); ``m`` is the
position of one of the ticks sent last (the newest JointState the node had taken) or, with
none, the last command. A command that resumes without a blend is noted
(:attr:`BlendedLoop.unblended`); one that fits neither a blend, eager PyTorch nor the hold
is wrong.

Each blend is a :class:`Ramp`: where it started, its commands, each step published (from the
value before it: the arm's servo target) and the step the blend allows (for ``k = 1``
``|m - p| + |e_1 - m| / N``, ``p`` the value before it; then
``|e_k - m| / N + (k - 1) / N * |e_k - e_(k-1)|``, element by element: the difference of two
consecutive commands of the formula), and the step a command without the blend would have
made (``|e_1 - p|``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leapp_ros.testing import GraphUnderTest
from support.closed_loop import TOLERANCE, ClosedLoop
from support.sim import Arm

__all__ = ["BlendedLoop", "Ramp"]

STARTS = 3000  # the ticks whose positions a blend may start from (a minute at 50 Hz): the
# newest JointState a node took can be old (a restarted node's subscription takes its first
# messages late)


@dataclass
class Ramp:
    """One blend of ``commands`` commands from ``start`` (``origin``: the tick whose position
    it is, or the last command), published after ``previous``, during fault ``fault``."""

    commands: int
    start: np.ndarray
    origin: str
    previous: np.ndarray
    fault: str
    first_tick: int
    done: int = 0
    interrupted: bool = False  # a safe action came before its last command
    steps: list[float] = field(default_factory=list)  # the largest element of each step
    bounds: list[float] = field(default_factory=list)  # of what the blend allows
    over: list[str] = field(default_factory=list)  # steps beyond what the blend allows
    unblended: float = 0.0  # the largest element of the step without a blend
    _eager: np.ndarray | None = None

    def expected(self, eager: np.ndarray) -> np.ndarray:
        """The next command for eager PyTorch's ``eager``, by the formula."""
        k = self.done + 1
        target = eager.astype(np.float64)
        if k >= self.commands:
            return target
        return (self.start + (k / self.commands) * (target - self.start)).astype(np.float32)

    def take(self, value: np.ndarray, eager: np.ndarray, previous: np.ndarray) -> None:
        """The next command came: ``value`` for ``eager``, published after ``previous``."""
        k = self.done + 1
        target, n = eager.astype(np.float64), self.commands
        if k == 1:
            allowed = np.abs(self.start - previous) + np.abs(target - self.start) / n
            self.unblended = float(np.max(np.abs(target - previous)))
        else:
            moved = np.abs(target - self._eager)
            allowed = np.abs(target - self.start) / n + (k - 1) / n * moved
        step = np.abs(value - previous)
        if np.any(step > allowed + 2 * TOLERANCE):
            self.over.append(f"command {k}: step {step.tolist()} > {allowed.tolist()}")
        self.steps.append(float(np.max(step)))
        self.bounds.append(float(np.max(allowed)))
        self.done, self._eager = k, target

    @property
    def complete(self) -> bool:
        return self.done >= self.commands

    def summary(self) -> dict[str, Any]:
        return {
            "commands": self.done,
            "of": self.commands,
            "from": self.origin,
            "first_tick": self.first_tick,
            "largest_step_rad": round(max(self.steps), 4),
            "bound_rad": round(max(self.bounds), 4),
            "unblended_step_rad": round(self.unblended, 4),
        }


class BlendedLoop(ClosedLoop):
    """:class:`~support.closed_loop.ClosedLoop` whose commands ramp in over ``commands``
    commands (see the module documentation)."""

    def __init__(self, graph: GraphUnderTest, policy: Any, arm: Arm, *, commands: int):
        self.commands = commands
        super().__init__(graph, policy, arm)

    def _init_checks(self) -> None:
        super()._init_checks()
        self.positions: deque[tuple[int, np.ndarray]] = deque(maxlen=STARTS)
        self.ramps: list[Ramp] = []
        self.ramp: Ramp | None = None  # the blend in progress
        self.resuming = True  # the next command resumes: a blend starts
        self.unblended: list[str] = []  # resumptions without a blend
        self.fastest = 0.0  # the largest joint speed the arm had at a tick (rad/s)
        self.safe_ticks: dict[str, tuple[int, float]] = {}  # per fault: its first safe action
        self.notes: dict[str, dict[str, Any]] = {}  # per fault: what the test noted of it
        self.largest_lag = 0  # ticks between the latest tick sent when a command arrived and
        # the one it answered
        self._starts: tuple[int, np.ndarray] | None = None  # positions stacked, at a tick
        self.applied = np.array(self.arm.data.ctrl, dtype=np.float64)  # the pose it started at

    def tick(self, **options: Any) -> None:
        reading = self.arm.read()
        self.positions.append((self.ticks, reading.position.copy()))
        self.fastest = max(self.fastest, float(np.max(np.abs(reading.velocity))))
        super().tick(**options)

    def _on_command(self, message: Any, info: Any = None) -> None:
        super()._on_command(message, info)
        fault = self.faults[-1]
        if fault.first_safe is not None and fault.name not in self.safe_ticks:
            self.safe_ticks[fault.name] = (self.ticks, fault.first_safe)

    def _answered(self, candidate: tuple[int, float, np.ndarray]) -> tuple[str, int, float]:
        tick, sent, _ = candidate
        self._take(tick)
        self.largest_lag = max(self.largest_lag, self.newest - tick)
        return "command", tick, sent

    def _start(self, value: np.ndarray, eager: np.ndarray) -> tuple[str, np.ndarray] | None:
        """The start of a blend whose first command for ``eager`` is ``value``: the position
        of a tick sent (the newest that fits), else the last command; None if none fits."""
        newest = self.positions[-1][0] if self.positions else -1
        if self._starts is None or self._starts[0] != newest:  # stacked once a tick
            positions = [position for _, position in reversed(self.positions)]
            empty = np.empty((0, len(self.applied)))
            self._starts = (newest, np.stack(positions) if positions else empty)
        start = self._starts[1]
        if self.last is not None:
            start = np.concatenate([start, self.last.astype(np.float64)[None]])
        if not len(start):
            return None
        first = (start + (eager.astype(np.float64) - start) / self.commands).astype(np.float32)
        fits = np.all(np.abs(first - value) <= TOLERANCE, axis=1)
        if not fits.any():
            return None
        index = int(np.argmax(fits))
        if index < len(self.positions):
            origin = f"tick {self.positions[len(self.positions) - 1 - index][0]}"
        else:
            origin = "last command"
        return origin, start[index]

    def _classify(self, value: np.ndarray) -> tuple[str, int | None, float]:
        candidates = self.candidates()
        previous = np.asarray(self.applied, dtype=np.float64)
        if self.ramp is not None:  # the blend goes on
            for candidate in candidates:
                if _close(value, self.ramp.expected(candidate[2])):
                    self.ramp.take(value, candidate[2], previous)
                    if self.ramp.complete:
                        self.ramp = None
                    return self._answered(candidate)
        elif self.resuming:  # a blend starts (from a measured position, or the last command)
            for candidate in candidates:
                found = self._start(value, candidate[2])
                if found is not None:
                    origin, start = found
                    ramp = Ramp(
                        self.commands, start, origin, previous, self.faults[-1].name, candidate[0]
                    )
                    ramp.take(value, candidate[2], previous)
                    self.ramps.append(ramp)
                    self.ramp = None if ramp.complete else ramp
                    self.resuming = False
                    return self._answered(candidate)
            for candidate in candidates:
                if _close(value, candidate[2]):
                    self.unblended.append(f"tick {candidate[0]} ({self.faults[-1].name})")
                    self.resuming = False
                    return self._answered(candidate)
        else:
            for candidate in candidates:
                if _close(value, candidate[2]):
                    return self._answered(candidate)
        if self.last is not None and _close(value, self.last):
            if self.ramp is not None:
                self.ramp.interrupted = True
                self.ramp = None
            self.resuming = True
            return "safe", None, 0.0
        expected = "none" if not candidates else candidates[0][2].tolist()
        blend = "no blend" if self.ramp is None else f"blend command {self.ramp.done + 1}"
        self.wrong.append(
            f"message {sum(len(f.arrivals) for f in self.faults) + 1} (during fault "
            f"{self.faults[-1].name!r}, tick {self.ticks}, {blend}): {value.tolist()}; eager "
            f"{expected}, the hold {None if self.last is None else self.last.tolist()}; "
            f"{self.nearest_eager(value)}"
        )
        return "wrong", None, 0.0

    def nearest_eager(self, value: np.ndarray) -> str:
        """As :meth:`ClosedLoop.nearest_eager`, or the kept tick whose eager output ``value``
        starts a blend to (a blend that started on an old tick)."""
        for tick, raw in reversed(self.eager):
            found = self._start(value, raw)
            if found is not None:
                return (
                    f"the first command of a blend from {found[0]} for tick {tick}, "
                    f"{self.newest - tick} tick(s) before the latest sent when it arrived "
                    f"(tick {self.newest})"
                )
        return super().nearest_eager(value)

    def ramps_of(self, fault: str) -> list[Ramp]:
        return [ramp for ramp in self.ramps if ramp.fault == fault]


def _close(value: np.ndarray, expected: np.ndarray) -> bool:
    return bool(np.allclose(value, expected, rtol=0, atol=TOLERANCE))
