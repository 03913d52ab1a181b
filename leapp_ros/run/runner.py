"""Run a pipeline's ROS 2 graph without ``ros2 launch``: start, supervise and stop its processes.

Where ROS 2 comes from pip there is no launch system, so this module does its job for leapp
graphs: it starts (``python -m <module>``) the processes that
:func:`~leapp_ros.run.processes.plan_processes` gives for the graph's options, the same ones
``ros2 launch`` starts from ``pipeline.launch.py``. ::

    from leapp_ros.run.deployment import Deployment
    from leapp_ros.run.runner import run_graph

    with run_graph("exports/torch_pipeline", Deployment.COMPOSED,
                   env={"ROS_DOMAIN_ID": "7"}) as graph:
        if not graph.wait_ready(timeout_s=30):
            raise SystemExit(graph.failure or "not ready in time")
        ...  # talk to the /torch_pipeline/... topics
    # leaving the block stops every process

- Output: each line a process writes is passed on with its label in front (``[policy] ...``).
- Readiness: a process is ready once each of its pipeline nodes has published a ``ready``
  status record from that process (its ``pid``; model warmed up), whatever the log level: a
  hidden node of the runner watches ``_leapp/status``
  (:class:`~leapp_ros.run.status_watch.StatusWatch`). A record of an earlier start or of
  another process never counts. With ``autostart: false``: once ``ros2 lifecycle`` configured.
- Failure: a process that exits without being asked to is reported (label, pid, exit code or
  signal, its last stderr lines), the others are stopped and the exit code is 1 (2 when the
  process exited with 2, a node's code for a configuration problem). With ``restart=True`` it
  is started again after a backoff (0.5 s, doubling up to 8 s) instead, unless it exited with
  2 (a restart cannot fix that) or was restarted ``max_restarts`` times within ``window_s``
  seconds already (:class:`~leapp_ros.run.supervised_process.RestartPolicy`).
- Stop: SIGINT to every process (each runs in a process group of its own, so a terminal's
  Ctrl-C reaches the runner only), ``stop_timeout_s`` to exit, then SIGTERM, then SIGKILL.
  The exit code is 0 when every process exited with 0 (or, still starting, died of the
  signal itself). On Linux a child also gets SIGTERM should the runner die: none is orphaned.

:func:`serve` is what ``leapp-ros run`` calls: SIGINT and SIGTERM become a clean stop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from leapp_ros.plan.pipeline import PipelinePlan
from leapp_ros.run.deployment import Deployment, GraphOptions
from leapp_ros.run.output_relay import OutputRelay
from leapp_ros.run.processes import (
    STOP_TIMEOUT_S,
    ProcessPlan,
    describe_exit,
    graph_options,
    load_plan,
    plan_processes,
)
from leapp_ros.run.status_watch import ReadyNodes, StatusWatch
from leapp_ros.run.supervised_process import RestartPolicy, SupervisedProcess

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "RunningGraph",
    "make_graph",
    "run_graph",
    "serve",
]

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1  # a process failed, or did not stop cleanly
EXIT_USAGE = 2  # bad arguments, missing export, invalid spec (also a node's startup error)


class RunningGraph:
    """The processes of one graph, started, watched and stopped by one supervisor thread.

    :func:`run_graph` returns one already started. :meth:`wait_ready` blocks until every
    process is ready (their nodes' status records say so; with ``watch_status=False``, which
    starts no ROS participant here, as soon as every process runs); :meth:`stop` (or leaving
    a ``with`` block) stops them all and returns the exit code: 0 when each exited with 0, 1
    when one failed or had to be killed, 2 when one failed with exit code 2 (a node's
    startup/configuration error).
    """

    def __init__(
        self,
        processes: Sequence[ProcessPlan],
        *,
        name: str = "graph",
        env: Mapping[str, str] | None = None,
        restart: bool = False,
        restart_policy: RestartPolicy | None = None,
        stop_timeout_s: float = STOP_TIMEOUT_S,
        term_timeout_s: float = 3.0,
        python: str | None = None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        watch_status: bool = True,
    ):
        if not processes:
            raise ValueError(f"{name}: nothing to run (no processes given)")
        self.name = name
        self._children = [SupervisedProcess(p, p.argv(python)) for p in processes]
        self._env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
        self._restart = restart
        self._policy = restart_policy or RestartPolicy()
        self._timeouts = (stop_timeout_s, term_timeout_s, 2.0)
        self._output = OutputRelay(self._on_line, stdout, stderr)
        self._changed = threading.Condition()
        self._stop_reason: str | None = None
        self._hurry = False
        self._thread: threading.Thread | None = None
        self._graph_ready = False
        self._watch: StatusWatch | None = None
        self._ready = ReadyNodes() if watch_status else None  # None: ready means running
        self.failure: str | None = None  # why the graph stopped by itself, if it did
        self._failure_code = EXIT_FAILED
        self.exit_code: int | None = None  # set once every process has stopped

    def start(self) -> RunningGraph:
        """Start every process (from the supervisor thread) and return at once."""
        if self._thread is not None:
            raise RuntimeError(f"{self.name}: the graph was started already")
        if self._ready is not None:  # watch before any process starts: no record is missed
            namespaces = {child.plan.namespace for child in self._children}
            self._watch = StatusWatch(namespaces, self._env, self._on_status)
        self._thread = threading.Thread(target=self._supervise, name=f"runner {self.name}")
        self._thread.daemon = True
        self._thread.start()
        return self

    @property
    def pids(self) -> dict[str, int | None]:
        """The process id of every process by label (None while it is not running)."""
        return {c.plan.label: c.popen.pid if c.running else None for c in self._children}

    @property
    def commands(self) -> dict[str, list[str]]:
        """The command line of every process by label."""
        return {child.plan.label: list(child.argv) for child in self._children}

    def is_ready(self) -> bool:
        """Whether every process is running and ready."""
        with self._changed:
            return all(child.is_ready(self._ready) for child in self._children)

    def ready_nodes(self) -> dict[str, tuple[str, ...]]:
        """Per process (by label), its pipeline nodes that published a ``ready`` record from
        its current process (without watching: all of them while it runs)."""
        with self._changed:
            return {child.plan.label: child.ready_nodes(self._ready) for child in self._children}

    def wait_ready(self, timeout_s: float | None = None) -> bool:
        """Block until every process is ready; False on timeout or when the graph stopped
        first (:attr:`failure` then says why)."""
        with self._changed:
            done = lambda: self.exit_code is not None or self.is_ready()  # noqa: E731
            self._changed.wait_for(done, timeout_s)
            return self.exit_code is None and self.is_ready()

    def request_stop(self, reason: str = "stop requested") -> None:
        """Ask for a stop and return at once; safe in a signal handler. Asking again while
        the processes stop sends SIGTERM without waiting for SIGINT to work."""
        if self._stop_reason is not None:
            self._hurry = True
        else:
            self._stop_reason = reason

    def wait(self, timeout_s: float | None = None) -> int | None:
        """Block until every process has stopped; the exit code, or None on timeout."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self._thread is not None and self._thread.is_alive():
            left = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
            if left <= 0:
                return None
            self._thread.join(left)  # short joins let signal handlers run
        return self.exit_code

    def stop(self, timeout_s: float | None = None) -> int | None:
        """Stop every process (SIGINT, then SIGTERM, then SIGKILL); the exit code."""
        self.request_stop()
        return self.wait(timeout_s)

    def __enter__(self) -> RunningGraph:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- the supervisor thread: the only one that starts, reads, reaps and signals ---------

    def _supervise(self) -> None:
        code = EXIT_FAILED
        try:
            for child in self._children:
                self._spawn(child)
            while self._stop_reason is None and self.failure is None:
                self._output.pump(0.1)
                self._check_children()
            if self._stop_reason is not None and self.failure is None:
                logger.info("%s: %s; stopping every process", self.name, self._stop_reason)
            code = self._shutdown()
        except Exception as error:
            self.failure = f"{self.name}: the runner failed ({error!r}); killed every process"
            logger.exception("%s", self.failure)
            for child in self._children:
                child.signal(signal.SIGKILL)
        finally:
            for child in self._children:
                if child.popen is not None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        child.popen.wait(2.0)
            self._output.close()
            if self._watch is not None:  # after the processes: it took their last records
                self._watch.close()
            with self._changed:
                self.exit_code = code
                self._changed.notify_all()

    def _spawn(self, child: SupervisedProcess) -> None:
        with self._changed:  # a status record of the new process waits for its pid
            popen = child.start(self._env)
        self._output.watch(child, child.plan.label, popen)
        logger.info(
            "%s: started '%s' (pid %d): %s",
            self.name,
            child.plan.label,
            popen.pid,
            child.plan.describe_firing(),
        )
        logger.debug("%s: '%s' is %s", self.name, child.plan.label, shlex.join(child.argv))
        self._note_readiness(child)

    def _on_line(self, child: SupervisedProcess, text: str, is_stderr: bool) -> None:
        """Every line a process wrote (already passed on)."""
        child.read_line(text, is_stderr)

    def _on_status(self, record: dict[str, Any]) -> None:
        """A status record (from the watch's thread), for the process it names."""
        with self._changed:
            pid = self._ready.take(record) if self._ready is not None else None
            for child in self._children:
                if pid is not None and child.popen is not None and child.popen.pid == pid:
                    self._note_readiness(child)

    def _note_readiness(self, child: SupervisedProcess) -> None:
        with self._changed:
            if child.is_ready(self._ready) and not child.announced:
                child.announced = True
                if child.starts > 1 and self._ready is not None:  # (not watching: running)
                    logger.info("%s: '%s' is ready again", self.name, child.plan.label)
            if not self._graph_ready and self.is_ready():
                self._graph_ready = True
                if self._ready is not None:
                    logger.info("%s: graph ready (%d processes)", self.name, len(self._children))
            self._changed.notify_all()

    def _check_children(self) -> None:
        """Start restarts that are due; handle processes that exited by themselves."""
        for child in self._children:
            if child.restart_at is not None:
                if time.monotonic() >= child.restart_at:
                    self._spawn(child)
                continue
            code = None if child.popen is None else child.popen.poll()
            if code is None:
                continue
            assert child.popen is not None
            self._output.drain(child)
            what = f"{self.name}: '{child.plan.label}' (pid {child.popen.pid}) "
            what += f"{describe_exit(code)} unexpectedly"
            tail = child.last_stderr()
            action = self._restart_or_give_up(child, code)
            if child.restart_at is not None:
                logger.warning("%s; %s%s", what, action, tail)
                continue
            logger.error("%s; %s%s", what, action, tail)
            self.failure = what + tail
            self._failure_code = EXIT_USAGE if code == EXIT_USAGE else EXIT_FAILED
            return

    def _restart_or_give_up(self, child: SupervisedProcess, code: int) -> str:
        """Schedule a restart of ``child`` if allowed; what happens next, in words."""
        if not self._restart:
            return "stopping the graph"
        if code == EXIT_USAGE:
            return "exit code 2 is a configuration problem, not restarting; stopping the graph"
        return child.schedule_restart(self._policy)

    def _shutdown(self) -> int:
        """Stop every running process: SIGINT, then SIGTERM, then SIGKILL."""
        running = [c for c in self._children if c.running]
        signals = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
        for sig, timeout_s in zip(signals, self._timeouts, strict=True):
            left = [c for c in running if c.running]
            if not left:
                break
            if sig != signal.SIGINT:
                names = ", ".join(repr(c.plan.label) for c in left)
                logger.warning("%s: %s still running; sending %s", self.name, names, sig.name)
            for child in left:
                child.signal(sig)
            deadline = time.monotonic() + timeout_s
            while any(c.running for c in left) and time.monotonic() < deadline:
                if self._hurry and sig == signal.SIGINT:
                    break
                self._output.pump(0.05)
        for child in running:
            self._output.drain(child)
        # A process that had not yet installed its handlers dies of the signal itself.
        clean = (0, -signal.SIGINT, -signal.SIGTERM)
        unclean = [c for c in running if c.popen is not None and c.popen.returncode not in clean]
        for child in unclean:
            assert child.popen is not None and child.popen.returncode is not None
            logger.error(
                "%s: '%s' (pid %d) %s while stopping", self.name, child.plan.label,
                child.popen.pid, describe_exit(child.popen.returncode),
            )  # fmt: skip
        if self.failure is not None:
            return self._failure_code
        if unclean:
            return EXIT_FAILED
        logger.info("%s: every process stopped cleanly", self.name)
        return EXIT_OK


def make_graph(
    source: PipelinePlan | str | os.PathLike[str],
    options: GraphOptions | Deployment | None = None,
    *,
    restart: bool = False,
    env: Mapping[str, str] | None = None,
    restart_policy: RestartPolicy | None = None,
    stop_timeout_s: float = 10.0,
) -> RunningGraph:
    """The graph of ``source`` (export folder, YAML or plan) with ``options``, not started yet.

    Args:
        options: the deployment, namespace, log level, parameters file, CPU settings, remaps,
            nodes to run here and autostart (:class:`~leapp_ros.run.deployment.GraphOptions`;
            a :class:`~leapp_ros.run.deployment.Deployment` alone, or None, for the defaults).
        restart: start a failed process again (see :class:`RestartPolicy`).
        env: variables set for the processes on top of this process's environment (for
            example ``ROS_DOMAIN_ID``).
        restart_policy: limits and backoff of restarts (default ``RestartPolicy()``).
        stop_timeout_s: how long a stop waits after SIGINT before sending SIGTERM.

    Raises:
        SpecError, PlanError: see :func:`~leapp_ros.run.processes.load_plan` and
            :func:`~leapp_ros.run.processes.plan_processes`.
    """
    options = graph_options(options)
    plan = load_plan(source, options.namespace, params_file=options.params_file)
    return RunningGraph(
        plan_processes(plan, options),
        name=plan.namespace,
        env=env,
        restart=restart,
        restart_policy=restart_policy,
        stop_timeout_s=stop_timeout_s,
    )


def run_graph(
    source: PipelinePlan | str | os.PathLike[str],
    options: GraphOptions | Deployment | None = None,
    **supervision: Any,
) -> RunningGraph:
    """:func:`make_graph` with the same arguments, started: every process is starting when
    this returns; :meth:`RunningGraph.wait_ready` waits for them."""
    return make_graph(source, options, **supervision).start()


def serve(graph: RunningGraph) -> int:
    """Start ``graph`` and run it until SIGINT, SIGTERM or a failure; the exit code.

    Call it from the main thread: it installs signal handlers (restored on return). A second
    signal while the processes stop sends SIGTERM without waiting for SIGINT to work.
    """

    def handle(signum: int, _frame: object) -> None:
        graph.request_stop(f"{signal.Signals(signum).name} received")

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        graph.start()
        code = graph.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return EXIT_FAILED if code is None else code
