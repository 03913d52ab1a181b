"""Ramp-in of one command output (``ports.<port>.blend_s``, :mod:`leapp_ros.plan.limits`):
:class:`PortRamp`.

After an event that starts a blend (an activation, an e-stop release, a watchdog recovery, a
guard release, a policy switch: :meth:`PortRamp.begin`), the port's next commands move from a
*start* to the policy's target. The start is taken at the blend's first command: the measured
position (``blend_from``: the newest message of that input, element by element by name) when
one has come, else the last value the port published (a command or the safe action); with
neither the blend is skipped (the policy's target goes out at once), except where a measured
position is to come (:meth:`PortRamp.awaits_start`: ``blend_from`` is set, its input has
delivered nothing yet, the port published nothing): the node then does not command until one
has come (a restarted process whose subscriptions take their first messages late). A policy
switch starts from the last value published whatever ``blend_from`` says: the command goes on
from there (unless a blend that starts from the measured position, an activation's, is pending
still).

The weight counts the node's own commands, not time: ``N = ceil(blend_s * rate_hz)`` (the
node's rate, ``rate_hz`` or ``pipeline.configs.frequency``), and the ``k``-th command of the
blend (``k = 1 .. N``) publishes ``start + (k / N) * (target_k - start)``, the ``N``-th the
policy's target itself; commands then follow the policy. A stalled input cannot make a
command jump: a blend advances only with commands. Limits (``max_step``, ``min`` / ``max``)
apply on top, to the blended value. Knows nothing of ROS.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["PortRamp", "blend_commands"]

Measured = Callable[[], "np.ndarray | None"]  # the newest measured start, or None


def blend_commands(blend_s: float, rate_hz: float) -> int:
    """The commands a blend of ``blend_s`` seconds takes at ``rate_hz`` (at least 1)."""
    return max(1, math.ceil(blend_s * rate_hz - 1e-9))


class PortRamp:
    """The blend of one output port (see the module documentation).

    Args:
        commands: ``N``, the commands one blend takes.
        shape: the port's shape (a start of its last axis is broadcast over it).
        measured: the newest measured position in the port's element order, or None (set
            once the node subscribed to ``blend_from``).
    """

    __slots__ = (
        "commands",
        "done",
        "from_",
        "from_last",
        "measured",
        "pending",
        "shape",
        "start",
    )

    def __init__(self, commands: int, shape: tuple[int, ...], measured: Measured | None = None):
        self.commands = commands
        self.shape = shape
        self.measured = measured
        self.pending = False  # a blend starts at the next command
        self.from_last = False  # the pending blend starts from the last value published
        self.start: np.ndarray | None = None  # the blend in progress starts here
        self.done = 0  # commands of the blend in progress published so far
        self.from_ = ""  # where the blend in progress started: "measured" or "last command"

    def begin(self, from_last: bool = False) -> None:
        """Blend the next commands in (the start is taken at the first of them: with
        ``from_last`` the last value published, unless a blend from the measured position is
        pending already, else as the module documentation says)."""
        self.from_last = from_last and (self.from_last or not self.pending)
        self.pending = True

    def awaits_start(self, last: np.ndarray | None) -> bool:
        """Whether a blend is pending whose start is still to come: the port reads a measured
        position and none has come, and it published nothing (``last`` None)."""
        return (
            self.pending and last is None and self.measured is not None and self.measured() is None
        )

    def blend(self, target: Any, last: np.ndarray | None) -> tuple[Any, bool]:
        """The command for the policy's ``target`` (``last``: the value the port published
        last, or None); whether a blend could not start for want of a start."""
        if self.pending:
            self.pending = False
            measured = self.measured if not self.from_last else None
            start = measured() if measured is not None else None
            self.from_ = "measured"
            if start is None:
                start, self.from_ = last, "last command"
            if start is None:
                self.start = None
                return target, True
            self.start = np.broadcast_to(np.asarray(start, dtype=np.float64), self.shape)
            self.done = 0
        if self.start is None:
            return target, False
        self.done += 1
        if self.done >= self.commands:
            self.start = None  # this one is the policy's own target: the blend is over
            return target, False
        weight = self.done / self.commands
        value = self.start + weight * (np.asarray(target, dtype=np.float64) - self.start)
        return value.astype(np.asarray(target).dtype, copy=False), False

    def progress(self) -> dict[str, Any] | None:
        """``{"command": k, "of": N, "weight": k / N, "from": ...}`` of the blend pending or
        in progress (``k`` the commands published so far), None when there is none."""
        if self.pending:
            return {"command": 0, "of": self.commands, "weight": 0.0, "from": "next command"}
        if self.start is None:
            return None
        weight = self.done / self.commands
        return {"command": self.done, "of": self.commands, "weight": weight, "from": self.from_}
