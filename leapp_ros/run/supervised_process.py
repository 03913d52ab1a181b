"""One process of a running graph: what its supervisor knows of it, and when it starts again.

:class:`~leapp_ros.run.runner.RunningGraph` keeps one :class:`SupervisedProcess` per
:class:`~leapp_ros.run.processes.ProcessPlan`: the ``Popen`` of its current start, its last
stderr lines (for the report when it exits unexpectedly), and its recent restarts, which a
:class:`RestartPolicy` limits. It is ready when each of its pipeline nodes published a
``ready`` status record from its current process (:meth:`SupervisedProcess.is_ready`): a
record of an earlier start, or of another process, never counts. Only the graph's supervisor
thread changes it. No rclpy import.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections import deque
from collections.abc import Container, Mapping
from dataclasses import dataclass, field

from leapp_ros.run.processes import ProcessPlan, start_process

__all__ = ["RestartPolicy", "SupervisedProcess"]

_TAIL_LINES = 20


@dataclass(frozen=True)
class RestartPolicy:
    """At most ``max_restarts`` restarts of a process within ``window_s`` seconds; the first
    after ``backoff_s``, each next one after twice as long, up to ``max_backoff_s``."""

    max_restarts: int = 5
    window_s: float = 60.0
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    def delay(self, recent: int) -> float:
        """The wait before the restart that follows ``recent`` restarts within the window."""
        return min(self.backoff_s * 2**recent, self.max_backoff_s)


@dataclass(eq=False)
class SupervisedProcess:
    """State of one supervised process, from one start to the next."""

    plan: ProcessPlan
    argv: list[str]
    popen: subprocess.Popen[bytes] | None = None
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=_TAIL_LINES))
    restarts: deque[float] = field(default_factory=deque)  # when each recent restart happened
    restart_at: float | None = None  # a restart is due at this time.monotonic()
    starts: int = 0
    announced: bool = False  # its readiness since the last start was logged

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def ready_nodes(self, ready: Container[tuple[int, str]] | None) -> tuple[str, ...]:
        """Its pipeline nodes that are ready: ``(pid, node)`` of its current process is in
        ``ready`` (None: every node while it runs); none while it is not running."""
        if not self.running:
            return ()
        assert self.popen is not None
        pid = self.popen.pid
        nodes = self.plan.pipeline_nodes
        return tuple(node for node in nodes if ready is None or (pid, node) in ready)

    def is_ready(self, ready: Container[tuple[int, str]] | None) -> bool:
        """Running, and each of its pipeline nodes is ready (:meth:`ready_nodes`)."""
        return self.running and self.ready_nodes(ready) == self.plan.pipeline_nodes

    def start(self, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        """Start the process (again), forgetting its last stderr lines and any restart that
        was due."""
        self.tail.clear()
        self.restart_at, self.announced = None, False
        self.starts += 1
        self.popen = start_process(self.argv, env)
        return self.popen

    def read_line(self, text: str, is_stderr: bool) -> None:
        """Take a line the process wrote: stderr lines are kept (the last few)."""
        if is_stderr:
            self.tail.append(text)

    def last_stderr(self) -> str:
        """Its last stderr lines as an indented block for a report ('' when there are none)."""
        lines = "".join(f"\n    {line}" for line in self.tail)
        return f"\n  its last stderr lines:{lines}" if lines else ""

    def schedule_restart(self, policy: RestartPolicy) -> str:
        """Set :attr:`restart_at` if ``policy`` allows another restart now; what happens next,
        in words."""
        now = time.monotonic()
        while self.restarts and now - self.restarts[0] > policy.window_s:
            self.restarts.popleft()
        if len(self.restarts) >= policy.max_restarts:
            return (
                f"it was restarted {len(self.restarts)} times within {policy.window_s:.0f} s "
                "already; stopping the graph"
            )
        delay = policy.delay(len(self.restarts))
        self.restarts.append(now)
        self.restart_at = now + delay
        return (
            f"restarting it in {delay:.1f} s (restart {len(self.restarts)} of at most "
            f"{policy.max_restarts} within {policy.window_s:.0f} s)"
        )

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to its process group, if it is running."""
        if self.running:
            assert self.popen is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)  # pgid == pid (start_new_session)
