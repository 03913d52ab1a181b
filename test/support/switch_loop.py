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
    ``commands`` commands (see the module documentation)."""

    def __init__(self, graph: Any, policy: Any, arm: Any, commands: int):
        super().__init__(graph, policy, arm)
        self.commands = commands
        self.toward: Any = None  # the policy a take-over blends in (None: none expected)
        self.toward_raw: np.ndarray | None = None  # its eager targets on the latest tick
        self.blended = 0  # commands of the blend so far (0: no take-over seen yet)
        self.start: np.ndarray | None = None
        self.takeover_tick: int | None = None
        self.takeover_command: int | None = None  # the node's run that took over, by count

    def expect_take_over(self, toward: Any) -> None:
        """From now on the graph may take over with ``toward`` (blended in)."""
        self.toward, self.blended, self.start = toward, 0, None
        self.takeover_tick = self.takeover_command = None

    def switched(self) -> None:
        """The take-over is over: ``toward`` is the running policy."""
        assert self.blended >= self.commands, f"{self.blended} commands of the blend only"
        self.policy, self.toward = self.toward, None

    def tick(self, **options: Any) -> None:
        if self.toward is not None:  # (the arm as the tick will read it)
            self.toward_raw = eager_targets(self.toward, self.arm.read())
        super().tick(**options)

    def commands_so_far(self) -> int:
        return sum(fault.count("command") for fault in self.faults)

    def _classify(self, value: np.ndarray) -> tuple[str, int | None, float]:
        if self.toward is None or self.candidate is None or self.last is None:
            return super()._classify(value)
        tick, sent, raw = self.candidate
        if self.blended == 0:
            if np.allclose(value, limited(raw, self.last)[0], rtol=0, atol=TOLERANCE):
                return super()._classify(value)  # the running policy's: not yet
            start = self.last.astype(np.float64)
        else:
            start = self.start
        k = self.blended + 1
        target = self.toward_raw.astype(np.float64)
        blended = start + min(k / self.commands, 1.0) * (target - start)
        expected, clamped, stepped = limited(blended.astype(np.float32), self.last)
        if not np.allclose(value, expected, rtol=0, atol=TOLERANCE):
            return super()._classify(value)  # wrong (noted there), or the hold
        if self.blended == 0:
            self.start, self.takeover_tick = start, tick
            self.takeover_command = self.commands_so_far() + 1
        self.blended = k
        self.candidate = None
        self.answered = max(self.answered, tick)
        self.clamped += clamped
        self.step_limited += stepped
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
