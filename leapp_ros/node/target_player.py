"""Targets at a controller's rate: :class:`TargetPlayer` (one output port's targets between
results, by the formula of :mod:`leapp_ros.plan.output_rates`) and :class:`TargetPlayers` (a
node's players, their timers, limits and halting).

A node hands each result of a played port to its player (:meth:`TargetPlayers.take`) instead of
publishing it; the port's timer (``output_rate_hz``) then publishes one target per tick, each
limited by the port's ``min`` / ``max`` / ``max_step`` (counted ``clamped`` / ``step_limited``
as any result). The safe action, the e-stop and deactivate halt every player at once
(:meth:`TargetPlayers.halt`): no target follows until a new result, which starts from the last
value published (the safe value, when one was).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from leapp_ros.messages.multiarray import numpy_dtype
from leapp_ros.messages.topic_io import OutputWriter
from leapp_ros.node.rate_limited_log import one_line
from leapp_ros.plan.output_rates import OutputRate, played_port
from leapp_ros.plan.pipeline import OutputPlan

__all__ = ["TargetPlayer", "TargetPlayers", "output_writers"]

_EPSILON = 1e-9  # u within this of a whole number is that number (float steps)


class TargetPlayer:
    """One output port's targets between results (see the module documentation).

    Args:
        rate: the port's rate, interpolation, period and whether it is a chunk.
        dtype: the port's dtype (what each target is published as).
    """

    def __init__(self, rate: OutputRate, dtype: str):
        self.rate = rate
        self.dtype = numpy_dtype(dtype)
        self.points: np.ndarray | None = None  # c_0 .. c_(T-1), float64
        self.start: np.ndarray | None = None  # p: the value published before the result
        self.last: np.ndarray | None = None  # the value published last (after limits)
        self.step = 0  # i: targets published since the result
        self.playing = False

    def target(self, value: Any) -> None:
        """A new result: its points replace the rest of the current ones."""
        points = np.array(value, dtype=np.float64, copy=True)
        self.points = points if self.rate.chunk else points[np.newaxis]
        self.start = self.points[0] if self.last is None else self.last
        self.step = 0
        self.playing = True

    def next(self) -> np.ndarray:
        """The next target (the port's dtype, before limits)."""
        assert self.points is not None and self.start is not None
        self.step += 1
        points, count = self.points, len(self.points)
        steps = self.rate.steps
        if not steps:  # hold without a period: the one point
            return points[-1].astype(self.dtype)
        u = self.step / steps
        k = math.floor(u + _EPSILON)
        if self.rate.interpolate == "hold":
            return points[min(k, count - 1)].astype(self.dtype)
        if k >= count:
            return points[-1].astype(self.dtype)
        a = self.start if k == 0 else points[k - 1]
        b = points[k]
        return (a + (b - a) * max(u - k, 0.0)).astype(self.dtype)

    def published(self, value: Any) -> None:
        """``value`` went out on the port (a target, or the safe value)."""
        self.last = np.array(value, dtype=np.float64, copy=True)

    def halt(self) -> None:
        """No more targets until the next result."""
        self.playing = False


class TargetPlayers:
    """The played output ports of one pipeline node: a player and a timer each.

    Args:
        node: the ROS node (its ``create_timer``).
        data: the node's data path (:class:`~leapp_ros.node.data_path.NodeData`: its output
            plans, guard and counters).
        rates: the played ports (:func:`~leapp_ros.plan.output_rates.output_rates`).
        publish: ``publish(index, value)`` sends one target on output ``index``.
        warn: the node's rate-limited warning ``(key, text)``.
    """

    def __init__(
        self,
        node: Any,
        data: Any,
        rates: Sequence[OutputRate],
        publish: Callable[[int, Any], None],
        warn: Callable[[str, str], None],
    ):
        self.data = data
        self.publish = publish
        self.warn = warn
        self.players = {r.index: TargetPlayer(r, data.plan.outputs[r.index].dtype) for r in rates}
        self.guards = data.guard.hand_over(self.players) if data.guard is not None else {}
        self.timers = {}
        for rate in rates:
            timer = node.create_timer(1.0 / rate.rate_hz, self._ticker(rate.index))
            timer.cancel()  # started by the first result
            self.timers[rate.index] = timer

    @property
    def indices(self) -> frozenset[int]:
        return frozenset(self.players)

    def take(self, results: Sequence[Any]) -> list[Any]:
        """Hand the played ports' results to their players; ``results`` with None in their
        places (what is published at once)."""
        shown = list(results)
        for index, player in self.players.items():
            player.target(results[index])
            shown[index] = None
            timer = self.timers[index]
            if timer.is_canceled():
                timer.reset()
        return shown

    def halt(self, values: Sequence[Any] | None = None) -> None:
        """Stop every player at once; ``values`` are what each output published instead (the
        safe action; None where nothing), from which the next result starts."""
        for index, player in self.players.items():
            player.halt()
            self.timers[index].cancel()
            if values is not None and values[index] is not None:
                player.published(values[index])

    def _ticker(self, index: int) -> Callable[[], None]:
        player, guard, data = self.players[index], self.guards.get(index), self.data

        def tick() -> None:
            if not player.playing:
                self.timers[index].cancel()
                return
            value = player.next()
            if guard is not None:
                value, clamped, stepped = guard.apply(value)
                data.clamped += clamped
                data.step_limited += stepped
            try:
                self.publish(index, value)
            except Exception as e:  # never die of it: count, and try again next tick
                data.errors += 1
                port = data.plan.outputs[index].port
                self.warn(
                    f"\0target {data.name} {port}",
                    f"node {data.name!r}: could not publish a target of {port!r}: {one_line(e)}",
                )
                return
            player.published(value)

        return tick


def output_writers(
    outputs: Sequence[OutputPlan], rates: Sequence[OutputRate], *, raw: bool
) -> list[OutputWriter]:
    """One message writer per output port: a played chunk's writes one row (its messages
    carry one point each), any other port's the whole value."""
    played = {rate.index: rate for rate in rates}
    return [
        OutputWriter(played_port(port, played.get(index)), raw=raw)
        for index, port in enumerate(outputs)
    ]
