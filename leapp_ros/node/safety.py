"""What keeps a node's commands safe: :class:`OutputGuard` (ramp-in, limits, out-of-domain
check and safe action of one pipeline node's outputs) and :class:`CommandGate` (whether a
node may command now).

An :class:`OutputGuard` blends each result in after an event that starts a ramp
(``ports.<port>.blend_s``, :mod:`leapp_ros.node.ramp`), then applies ``ports.<port>.min /
max / max_step`` (:mod:`leapp_ros.plan.limits`) to it before it is published or handed on,
counts what it changed (``clamped``, ``step_limited``) and remembers the last value of each
port that needs it (``hold``, ``max_step``, a ramp's start); :meth:`OutputGuard.out_of_domain`
finds a raw result outside the ``min`` / ``max`` of a port whose ``on_out_of_domain`` is not
``clamp``; :meth:`OutputGuard.safe_values` is what the outputs publish instead of commands.

A :class:`CommandGate` holds a node's operating state: lifecycle active or not, the e-stop,
the out-of-domain latch, the input watchdog (``input_timeout_ms``) and the rule that commands
resume only on a fresh set of inputs (one gathered wholly after an activation, an e-stop
release or a latch release). The nodes ask it before each run; it knows nothing of ROS, so
its rules are tested without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from leapp_ros.node.domain_guard import Violation, element_names, first_outside
from leapp_ros.node.ramp import PortRamp, blend_commands
from leapp_ros.plan.limits import OutputLimits
from leapp_ros.plan.settings import StartupError

__all__ = ["CommandGate", "OutputGuard"]


class _PortGuard:
    """One output port's limits and last published value."""

    __slots__ = ("high", "index", "last", "limits", "low", "names", "ramp", "step", "track")

    def __init__(self, index: int, limits: OutputLimits, ramp: PortRamp | None = None):
        self.index, self.limits, self.ramp = index, limits, ramp
        clamps = limits.clamps
        self.low = limits.low if clamps else None
        self.high = limits.high if clamps else None
        self.step = limits.max_step
        self.track = limits.safe_action == "hold" or limits.max_step is not None or bool(ramp)
        self.last: np.ndarray | None = None
        self.names: tuple[str, ...] | None = None  # element names, for out-of-domain reports

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

    def __init__(self, width: int, ports: Sequence[_PortGuard], node: str = ""):
        self._width = width
        self._node = node
        self._ports = tuple(ports)
        self._limited = tuple(
            p for p in self._ports if p.limits.limits or p.track or p.ramp is not None
        )
        self._played: frozenset[int] = frozenset()  # limited target by target as played
        self._guarded = tuple(p for p in self._ports if p.limits.on_out_of_domain != "clamp")
        self.ramps = tuple(p for p in self._ports if p.ramp is not None)
        self.unstarted: list[str] = []  # ports whose blend found no start (the node says so)
        self.was_blending = False  # at the last report

    @classmethod
    def of(
        cls,
        node: str,
        outputs: Sequence[Any],
        limits: Mapping[str, OutputLimits],
        rate_hz: float | None = None,
    ) -> OutputGuard | None:
        """The guard of pipeline node ``node`` with output ports ``outputs`` (plans), None
        when no port has an entry in ``limits`` (by port name); ``rate_hz`` (the node's rate)
        turns a port's ``blend_s`` into commands.

        Raises:
            StartupError: limits on a port whose dtype is not a NumPy float type, or a
                ``blend_s`` without a known rate.
        """
        ports = []
        for index, port in enumerate(outputs):
            entry = limits.get(port.port)
            if entry is None:
                continue
            shaping = entry.limits or entry.blend_s or entry.on_out_of_domain != "clamp"
            if shaping and port.dtype not in ("float16", "float32", "float64"):
                raise StartupError(
                    f"node {node!r}: output {port.port!r} is {port.dtype}: ports.{port.port}."
                    "min / max / max_step / blend_s apply to float outputs only"
                )
            if entry.safe_values is not None:  # the port's dtype, as its messages carry it
                entry = replace(entry, safe_values=entry.safe_values.astype(port.dtype))
            ports.append(_PortGuard(index, entry, _ramp(node, port, entry, rate_hz)))
        return cls(len(outputs), ports, node) if ports else None

    @classmethod
    def of_node(
        cls, node: Any, limits: Mapping[str, OutputLimits], rate_hz: float | None
    ) -> OutputGuard | None:
        """:meth:`of` the outputs of pipeline node ``node`` (a plan), their elements named
        (for out-of-domain reports) as their messages or the spec name them."""
        guard = cls.of(node.name, node.outputs, limits, rate_hz)
        if guard is not None:
            specs = {port.name: port for port in node.model.outputs}
            guard.name_elements(
                {o.port: element_names(specs.get(o.port), o.binding) for o in node.outputs}
            )
        return guard

    def apply(self, results: list[Any], data: Any) -> list[Any]:
        """``results`` blended in (during a ramp) and with every limit applied (in place),
        counted on ``data``; a played port's result is blended only (its player limits each
        target it publishes)."""
        clamped = stepped = False
        played = self._played
        for port in self._limited:
            value = results[port.index]
            if port.ramp is not None:
                value, unstarted = port.ramp.blend(value, port.last)
                if unstarted:
                    self.unstarted.append(port.limits.port)
            if port.index not in played:
                value, was_clamped, was_stepped = port.apply(value)
                clamped |= was_clamped
                stepped |= was_stepped
            results[port.index] = value
        if clamped:
            data.clamped += 1
        if stepped:
            data.step_limited += 1
        return results

    def hand_over(self, indices: Any) -> dict[int, _PortGuard]:
        """The guards of the outputs at ``indices`` (those that have one), which
        :meth:`apply` leaves alone from now on: their targets are limited one by one as they
        are published (:mod:`leapp_ros.node.target_player`); a ramp-in still blends their
        results, before the player interpolates between them."""
        taken = {port.index: port for port in self._ports if port.index in indices}
        self._played = frozenset(taken)
        return taken

    def out_of_domain(self, results: Sequence[Any]) -> Violation | None:
        """The first raw result outside ``min`` / ``max`` of a port whose
        ``on_out_of_domain`` is ``drop`` or ``safe`` (None: none)."""
        for port in self._guarded:
            limits = port.limits
            found = first_outside(results[port.index], limits.low, limits.high)
            if found is not None:
                element, bound, limit, value = found
                names = port.names
                name = names[element] if names and element < len(names) else str(element)
                action = limits.on_out_of_domain
                return Violation(
                    self._node, "output", limits.port, name, value, bound, limit, action
                )
        return None

    @property
    def latches(self) -> bool:
        """Whether an output's ``on_out_of_domain`` is ``safe``."""
        return any(p.limits.on_out_of_domain == "safe" for p in self._guarded)

    def begin_blends(self, from_last: bool = False) -> None:
        """Blend the next commands of every port with ``blend_s`` in (a ramp-in; with
        ``from_last`` from the last command, not the measured position)."""
        for port in self.ramps:
            port.ramp.begin(from_last)  # type: ignore[union-attr]

    def awaiting_start(self) -> list[str]:
        """The ports whose pending blend waits for its first measured position
        (:meth:`~leapp_ros.node.ramp.PortRamp.awaits_start`)."""
        return [p.limits.port for p in self.ramps if p.ramp.awaits_start(p.last)]  # type: ignore[union-attr]

    def blending(self) -> dict[str, Any]:
        """Per port with a blend pending or in progress, its progress
        (:meth:`~leapp_ros.node.ramp.PortRamp.progress`)."""
        found = {}
        for port in self.ramps:
            progress = port.ramp.progress()  # type: ignore[union-attr]
            if progress is not None:
                found[port.limits.port] = progress
        return found

    def name_elements(self, names: Mapping[str, tuple[str, ...] | None]) -> None:
        """Give the ports their element names (by port name), for out-of-domain reports."""
        for port in self._ports:
            port.names = names.get(port.limits.port)

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


def _ramp(node: str, port: Any, limits: OutputLimits, rate_hz: float | None) -> PortRamp | None:
    """The ramp of an output port with ``blend_s`` (None without)."""
    if not limits.blend_s:
        return None
    if not rate_hz:
        raise StartupError(
            f"node {node!r}: ports.{port.port}.blend_s counts the node's commands at its rate, "
            "and no rate is known: set rate_hz (or export with graph_configs frequency)"
        )
    return PortRamp(blend_commands(limits.blend_s, rate_hz), tuple(port.shape))


class CommandGate:
    """Whether a node commands now (see the module documentation).

    Args:
        timeout_s: the input watchdog's timeout (None: off).
    """

    def __init__(self, timeout_s: float | None = None):
        self.timeout_s = timeout_s
        self.active = False  # lifecycle state active
        self.estop = False
        self.latched = False  # an out-of-domain value latched the safe action
        self.timed_out = False  # publishing the safe action for want of inputs
        self.last_set = 0.0  # monotonic time of the last valid set (or of activation)
        self.last_command = 0.0  # of the last run that published (or of activation): watched
        self.fresh_after = 0.0  # sets must be gathered after this monotonic time
        self.awaiting_fresh = False  # no set since the last activation or release
        self.held = False  # active, but waiting for the stand-in to watch this process

    @property
    def commanding(self) -> bool:
        """Active, not e-stopped, not latched, not held: valid sets run the model."""
        return self.active and not self.estop and not self.latched and not self.held

    @property
    def safe(self) -> bool:
        """Whether the node publishes its safe action instead of commands now."""
        return self.active and (self.estop or self.latched or self.timed_out)

    @property
    def stopped(self) -> bool:
        """E-stopped or latched: the safe action every period, whatever comes in."""
        return self.estop or self.latched

    def activate(self, now: float) -> None:
        self.active = True
        self.latched = False
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
            self._fresh(now)
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
            self._fresh(now)
        return was

    def latch(self) -> bool:
        """Latch the safe action (an out-of-domain value); whether it was not latched."""
        was = self.latched
        self.latched = True
        return not was

    def unlatch(self, now: float) -> bool:
        """Release the latch (commands resume on a set gathered from now on); whether it
        was latched."""
        was = self.latched
        self.latched = False
        if was:
            self._fresh(now)
        return was

    def _fresh(self, now: float) -> None:
        self.timed_out = False
        self.awaiting_fresh = True
        self.last_set = self.last_command = self.fresh_after = now

    def admit(self, now: float, stamps: Any, keys: Any) -> bool:
        """A valid set formed at ``now`` (``stamps[key]`` the arrival time of each of its
        ``keys``): True to run the model on it. False while inactive or e-stopped, and after
        an activation or a release until a set gathered wholly after it; ends a timeout."""
        if not self.active or self.estop or self.latched or self.held:
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
