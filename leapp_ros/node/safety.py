"""What keeps a node's commands safe: :class:`OutputGuard` (limits and safe action of one
pipeline node's outputs) and :class:`CommandGate` (whether a node may command now).

An :class:`OutputGuard` applies ``ports.<port>.min / max / max_step``
(:mod:`leapp_ros.plan.limits`) to every result before it is published or handed on, counts
what it changed (``clamped``, ``step_limited``) and remembers the last value of each port
that needs it (``hold``, ``max_step``); :meth:`OutputGuard.safe_values` is what the outputs
publish instead of commands.

A :class:`CommandGate` holds a node's operating state: lifecycle active or not, the e-stop,
the input watchdog (``input_timeout_ms``) and the rule that commands resume only on a fresh
set of inputs (one gathered wholly after an activation or an e-stop release). The nodes ask
it before each run; it knows nothing of ROS, so its rules are tested without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from leapp_ros.plan.limits import OutputLimits
from leapp_ros.plan.settings import StartupError

__all__ = ["CommandGate", "OutputGuard"]


class _PortGuard:
    """One output port's limits and last published value."""

    __slots__ = ("high", "index", "last", "limits", "low", "step", "track")

    def __init__(self, index: int, limits: OutputLimits):
        self.index, self.limits = index, limits
        self.low, self.high, self.step = limits.low, limits.high, limits.max_step
        self.track = limits.safe_action == "hold" or limits.max_step is not None
        self.last: np.ndarray | None = None

    def apply(self, value: np.ndarray) -> tuple[np.ndarray, bool, bool]:
        """``value`` limited; whether it was clamped, whether a step was limited."""
        limited, clamped, stepped = value, False, False
        if self.step is not None and self.last is not None:
            change = limited - self.last
            if np.any(np.abs(change) > self.step):
                stepped = True
                limited = self.last + np.clip(change, -self.step, self.step)
        if self.low is not None and np.any(limited < self.low):
            clamped = True
            limited = np.maximum(limited, self.low)
        if self.high is not None and np.any(limited > self.high):
            clamped = True
            limited = np.minimum(limited, self.high)
        if limited is not value:
            limited = limited.astype(value.dtype, copy=False)
        if self.track:
            self.last = np.array(limited, copy=True)  # the model may reuse its output buffers
        return limited, clamped, stepped


class OutputGuard:
    """The limits and safe action of one pipeline node's outputs (see the module
    documentation); :meth:`of` gives None for a node none of whose outputs sets any."""

    def __init__(self, width: int, ports: Sequence[_PortGuard]):
        self._width = width
        self._ports = tuple(ports)
        self._limited = tuple(p for p in self._ports if p.limits.limits or p.track)

    @classmethod
    def of(
        cls, node: str, outputs: Sequence[Any], limits: Mapping[str, OutputLimits]
    ) -> OutputGuard | None:
        """The guard of pipeline node ``node`` with output ports ``outputs`` (plans), None
        when no port has an entry in ``limits`` (by port name).

        Raises:
            StartupError: limits on a port whose dtype is not a NumPy float type.
        """
        ports = []
        for index, port in enumerate(outputs):
            entry = limits.get(port.port)
            if entry is None:
                continue
            if entry.limits and port.dtype not in ("float16", "float32", "float64"):
                raise StartupError(
                    f"node {node!r}: output {port.port!r} is {port.dtype}: "
                    f"ports.{port.port}.min / max / max_step apply to float outputs only"
                )
            if entry.safe_values is not None:  # the port's dtype, as its messages carry it
                entry = replace(entry, safe_values=entry.safe_values.astype(port.dtype))
            ports.append(_PortGuard(index, entry))
        return cls(len(outputs), ports) if ports else None

    def apply(self, results: list[Any], data: Any) -> list[Any]:
        """``results`` with every limit applied (in place), counted on ``data``."""
        clamped = stepped = False
        for port in self._limited:
            value, was_clamped, was_stepped = port.apply(results[port.index])
            results[port.index] = value
            clamped |= was_clamped
            stepped |= was_stepped
        if clamped:
            data.clamped += 1
        if stepped:
            data.step_limited += 1
        return results

    def safe_values(self) -> list[Any]:
        """What each output publishes as the safe action, None for nothing (``silent``, or
        ``hold`` before the first command)."""
        values: list[Any] = [None] * self._width
        for port in self._ports:
            action = port.limits.safe_action
            if action == "values":
                values[port.index] = port.limits.safe_values
            elif action == "hold":
                values[port.index] = port.last
        return values

    def published(self, values: Sequence[Any]) -> None:
        """Record safe values that were published (``max_step`` continues from them)."""
        for port in self._ports:
            if port.track and values[port.index] is not None:
                port.last = np.array(values[port.index], copy=True)

    def reset(self) -> None:
        """Forget the last commands (cleanup: a new configure starts afresh)."""
        for port in self._ports:
            port.last = None


class CommandGate:
    """Whether a node commands now (see the module documentation).

    Args:
        timeout_s: the input watchdog's timeout (None: off).
    """

    def __init__(self, timeout_s: float | None = None):
        self.timeout_s = timeout_s
        self.active = False  # lifecycle state active
        self.estop = False
        self.timed_out = False  # publishing the safe action for want of inputs
        self.last_set = 0.0  # monotonic time of the last valid set (or of activation)
        self.last_command = 0.0  # of the last run that published (or of activation): watched
        self.fresh_after = 0.0  # sets must be gathered after this monotonic time
        self.awaiting_fresh = False  # no set since the last activation or release
        self.held = False  # active, but waiting for the stand-in to watch this process

    @property
    def commanding(self) -> bool:
        """Active, not e-stopped and not held: valid sets run the model."""
        return self.active and not self.estop and not self.held

    @property
    def safe(self) -> bool:
        """Whether the node publishes its safe action instead of commands now."""
        return self.active and (self.estop or self.timed_out)

    def activate(self, now: float) -> None:
        self.active = True
        self.timed_out = False
        self.awaiting_fresh = True
        self.last_set = self.last_command = self.fresh_after = now

    def hold(self) -> None:
        """Hold commands back (until :meth:`unhold`): the node publishes nothing, not even
        its safe action, and its watchdog sleeps; the stand-in publishes that meanwhile."""
        self.held = True

    def unhold(self, now: float) -> bool:
        """End a hold: commands resume on a set gathered from now on; whether one held."""
        was = self.held
        self.held = False
        if was:
            self.awaiting_fresh = True
            self.last_set = self.last_command = self.fresh_after = now
        return was

    def deactivate(self) -> None:
        self.active = False
        self.timed_out = False

    def engage(self) -> bool:
        """Engage the e-stop; whether it was released before."""
        was = self.estop
        self.estop = True
        return not was

    def release(self, now: float) -> bool:
        """Release the e-stop (commands resume on a set gathered from now on); whether it
        was engaged."""
        was = self.estop
        self.estop = False
        if was:
            self.timed_out = False
            self.awaiting_fresh = True
            self.last_set = self.last_command = self.fresh_after = now
        return was

    def admit(self, now: float, stamps: Any, keys: Any) -> bool:
        """A valid set formed at ``now`` (``stamps[key]`` the arrival time of each of its
        ``keys``): True to run the model on it. False while inactive or e-stopped, and after
        an activation or a release until a set gathered wholly after it; ends a timeout."""
        if not self.active or self.estop or self.held:
            return False
        if self.awaiting_fresh:
            after = self.fresh_after
            if not all(stamps[key] > after for key in keys):
                return False
            self.awaiting_fresh = False
        self.last_set = now
        self.timed_out = False
        return True

    def overdue(self, now: float, oldest: float | None = None) -> bool:
        """Whether the watchdog fires at ``now``: active, no e-stop, and no command for
        ``timeout_s`` (no valid set came, or the model failed on those that did), or, on a
        timer, an input older than that (``oldest`` its arrival)."""
        if self.timeout_s is None or not self.commanding:
            return False
        since = self.last_command
        if oldest is not None:
            since = min(since, max(oldest, self.fresh_after))
        if now - since > self.timeout_s:
            self.timed_out = True
            return True
        return False
