"""The closed loop of :mod:`support.closed_loop` through a policy switch: :class:`SwitchLoop`.

Until the take-over every command is checked as :class:`~support.closed_loop.ClosedLoop`
checks it (eager PyTorch of the running policy on the latest tick, after the limits). Once
:meth:`SwitchLoop.expect_take_over` named the policy the graph goes to, the first command that
is not the running policy's must be the first of the blend: command ``k`` (``k = 1 .. N``)
after the take-over is ``last + (k / N) * (eager_k - last)`` (``last`` the command published
before the take-over, ``eager_k`` eager PyTorch of that policy on the tick's inputs), then
``eager_k`` itself, each after the limits (``max_step`` from the previous command, clamped),
as :mod:`leapp_ros.node.ramp` and :mod:`leapp_ros.node.safety` apply them. A switch rolled back
on its first run goes to the running policy again, blended in the same way. Anything else is
wrong. The nodes' ``load`` parameter is set as ``ros2 param set`` sets it (:meth:`ask`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from support.closed_loop import TOLERANCE, ClosedLoop, limited
from support.sim import eager_targets

__all__ = ["SwitchLoop"]


class SwitchLoop(ClosedLoop):
    """:class:`~support.closed_loop.ClosedLoop` checking a take-over blended in over
    ``commands`` commands (see the module documentation). A hold (the watchdog's, on a tick
    the loaded machine made late) starts a blend too: the node blends its commands in again
    from the hold once inputs are back, and so does the check."""

    def __init__(self, graph: Any, policy: Any, arm: Any, commands: int):
        super().__init__(graph, policy, arm)
        self.commands = commands
        self.toward: Any = None  # the policy a take-over blends in (None: none expected)
        self.toward_raw: np.ndarray | None = None  # its eager targets on the latest tick
        self.blend: int | None = None  # commands of the blend in progress (None: none)
        self.start: np.ndarray | None = None  # where the blend in progress started
        self.takeover_tick: int | None = None
        self.takeover_command: int | None = None  # the node's run that took over, by count

    def expect_take_over(self, toward: Any) -> None:
        """From now on the graph may take over with ``toward`` (blended in)."""
        self.toward = toward
        self.takeover_tick = self.takeover_command = None

    def taken_over(self) -> bool:
        """Whether the take-over came and its blend is over."""
        return self.takeover_command is not None and self.blend is None

    def tick(self, **options: Any) -> None:
        if self.toward is not None:  # (the arm as the tick will read it)
            self.toward_raw = eager_targets(self.toward, self.arm.read())
        super().tick(**options)

    def commands_so_far(self) -> int:
        return sum(fault.count("command") for fault in self.faults)

    def _classify(self, value: np.ndarray) -> tuple[str, int | None, float]:
        candidate, last = self.candidate, self.last
        if candidate is not None and last is not None:
            tick, sent, raw = candidate
            if self.blend is not None and self._blended(value, raw, self.blend + 1):
                return self._taken(tick, sent, self.blend + 1)
            running = self.blend is None and np.allclose(
                value, limited(raw, last)[0], rtol=0, atol=TOLERANCE
            )
            if self.toward is not None and not running:  # the take-over's first command?
                held, self.start = self.start, last.astype(np.float64)
                if self._blended(value, self.toward_raw, 1):
                    self.takeover_tick = tick
                    self.takeover_command = self.commands_so_far() + 1
                    self.policy, self.toward = self.toward, None
                    return self._taken(tick, sent, 1)
                self.start = held
        kind = super()._classify(value)
        if kind[0] == "safe":  # commands come back blended in from the hold
            self.blend, self.start = 0, value.astype(np.float64)
        return kind

    def _blended(self, value: np.ndarray, target: np.ndarray, k: int) -> bool:
        """Whether ``value`` is command ``k`` of the blend from :attr:`start` to ``target``
        (eager, float32), after the limits."""
        weight = min(k / self.commands, 1.0)
        blended = self.start + weight * (target.astype(np.float64) - self.start)
        expected, clamped, stepped = limited(blended.astype(np.float32), self.last)
        if not np.allclose(value, expected, rtol=0, atol=TOLERANCE):
            return False
        self.clamped += clamped
        self.step_limited += stepped
        return True

    def _taken(self, tick: int, sent: float, k: int) -> tuple[str, int, float]:
        """Command ``k`` of a blend answered ``tick``."""
        self.blend = None if k >= self.commands else k
        self.candidate = None
        self.answered = max(self.answered, tick)
        self.fresh_limits = False
        return "command", tick, sent

    def ask(self, path: Any) -> list[Any]:
        """Set ``load`` to ``path`` on every ROS node of the graph; the answers' futures."""
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter

        namespace = self.graph.plan.namespace
        names = ["leapp_fused"] if self.graph.fused else [n.name for n in self.graph.plan.nodes]
        futures = []
        probe = self.graph.probe
        for name in names:
            client = probe.node.create_client(SetParameters, f"{namespace}/{name}/set_parameters")
            probe.spin_until(client.service_is_ready, 20, client.srv_name)
            load = Parameter("load", Parameter.Type.STRING, str(path)).to_parameter_msg()
            futures.append(client.call_async(SetParameters.Request(parameters=[load])))
        return futures

    def switch_state(self) -> str | None:
        """The state of the last switch of the node publishing the commands."""
        record = self.latest_status().get("policy", {})
        return (record.get("switch") or {}).get("state")
