"""A pipeline's live ROS 2 graph under test: start it isolated, step it over real topics, stop it.

See :class:`GraphUnderTest` and the documentation of :mod:`leapp_ros.testing`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

import torch

from leapp_ros.plan.pipeline import PipelinePlan
from leapp_ros.run.deployment import Deployment, GraphOptions
from leapp_ros.run.processes import graph_options, load_plan, plan_processes
from leapp_ros.run.runner import RunningGraph
from leapp_ros.testing.delivery import receipt_gaps, unready_nodes
from leapp_ros.testing.endpoints import Endpoints
from leapp_ros.testing.failures import (
    GraphAssertionError,
    OutputLines,
    StepTimeoutError,
    output_tail,
    step_timeout,
)
from leapp_ros.testing.probe import Probe, claim_domain_id, ros_env
from leapp_ros.testing.topics import feedback_topics, topic_problems

__all__ = ["GraphAssertionError", "GraphUnderTest", "StepTimeoutError"]

_SLICE_S = 0.01  # longest single spin while waiting for outputs


class GraphUnderTest:
    """An export running as a live ROS 2 graph, isolated on this machine, driven by a test.

    Use it as a context manager (``with GraphUnderTest(export) as graph:``) or call
    :meth:`start` and :meth:`close`; the package documentation of :mod:`leapp_ros.testing`
    describes what it does.

    Args:
        export: export folder, its YAML spec, or a :class:`~leapp_ros.plan.pipeline.PipelinePlan`.
        options: how the graph starts, as ``leapp-ros run`` and ``pipeline.launch.py`` start
            it (:class:`~leapp_ros.run.deployment.GraphOptions`: deployment, namespace, log
            level, parameters file given to the nodes as it is, QoS overrides included: the
            harness changes nothing about the nodes); a
            :class:`~leapp_ros.run.deployment.Deployment` alone, or None, for the defaults.
        timeout_s: how long :meth:`start` waits for the graph to be ready.
        step_timeout_s: how long :meth:`step` waits for its outputs by default.
        restart: start a process that died again, as ``leapp-ros run --restart`` does
            (:class:`~leapp_ros.run.supervised_process.RestartPolicy`); False: a process
            that dies fails the graph.
        output: a stream that also receives the nodes' output lines (they are kept in
            memory anyway, see :attr:`output`).

    Raises:
        SpecError, PlanError: the export is missing, invalid, or cannot be mapped onto ROS.
    """

    def __init__(
        self,
        export: PipelinePlan | str | os.PathLike[str],
        options: GraphOptions | Deployment | None = None,
        *,
        timeout_s: float = 60.0,
        step_timeout_s: float = 10.0,
        restart: bool = False,
        output: TextIO | None = None,
    ):
        self.options = graph_options(options)
        self.plan: PipelinePlan = load_plan(
            export, self.options.namespace, params_file=self.options.params_file
        )
        self.timeout_s = timeout_s
        self.step_timeout_s = step_timeout_s
        self.restart = restart
        self.domain_id: int | None = None
        self._lines = OutputLines(output)
        self._lock: Any = None
        self._graph: RunningGraph | None = None
        self._probe: Probe | None = None
        self._statuses: dict[str, dict[str, Any]] = {}
        self._endpoints: Endpoints | None = None
        # values fed back from node to node over topics (a fused node keeps them in memory)
        self._feedback = bool(feedback_topics(self.plan)) and not self.fused

    @property
    def deployment(self) -> Deployment:
        """How the graph runs: one process per node, composed or fused."""
        return self.options.deployment

    @property
    def fused(self) -> bool:
        """Whether one ``leapp_fused`` node runs the whole pipeline."""
        return self.options.deployment is Deployment.FUSED

    # --- life cycle ---------------------------------------------------------------------

    def __enter__(self) -> GraphUnderTest:
        return self.start()

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        self.close(check=error is None)

    def start(self) -> GraphUnderTest:
        """Start the graph and wait until every node is ready and every hop is matched both
        ways (the probe's publishers with the nodes' subscriptions, the nodes with each
        other, the nodes' publishers with the probe's subscriptions: see
        :func:`~leapp_ros.testing.delivery.connection_gaps`).

        Raises:
            GraphAssertionError: a process exited, or the graph was not ready within
                ``timeout_s``; the message has the reason and the nodes' last output lines.
        """
        if self._graph is not None:
            raise RuntimeError(f"graph {self.plan.namespace} was started already")
        try:
            self.domain_id, self._lock = claim_domain_id()
            self._graph = RunningGraph(
                plan_processes(self.plan, self.options),
                name=self.plan.namespace,
                env=ros_env(self.domain_id, base={}),
                restart=self.restart,
                stdout=self._lines,  # type: ignore[arg-type]
                stderr=self._lines,  # type: ignore[arg-type]
                watch_status=False,  # the probe watches the status records
            ).start()
            self._probe = Probe(self.domain_id)
            self._endpoints = Endpoints(self.plan, self._probe)
            self._statuses = self._probe.watch_status(self.plan.namespace)
            self._wait_ready(time.monotonic() + self.timeout_s)
        except BaseException:
            self.close(check=False)
            raise
        return self

    def close(self, check: bool = True) -> None:
        """Stop every process, close the probe and release the domain id (safe to repeat).

        Raises:
            GraphAssertionError: (with ``check``) a node had died, or a process did not exit
                with code 0 on SIGINT.
        """
        code, failure = None, None
        if self._graph is not None:  # before the probe, which acknowledges the last statuses
            code = self._graph.stop(timeout_s=60.0)
            failure = self._graph.failure
            self._graph = None
        if self._probe is not None:
            self._probe.close()
            self._probe = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None
        if check and code is not None and code != 0:
            reason = failure or "a process did not exit cleanly on SIGINT"
            raise GraphAssertionError(
                f"graph {self.plan.namespace} stopped with exit code {code}: {reason}"
                f"{output_tail(self._lines)}"
            )

    @property
    def output(self) -> str:
        """The last lines the nodes wrote, each prefixed with its process label."""
        return "\n".join(self._lines.lines)

    @property
    def pids(self) -> dict[str, int | None]:
        """The process id of every process of the graph by label (None once stopped)."""
        return {} if self._graph is None else self._graph.pids

    @property
    def probe(self) -> Probe:
        """The test-side node (to publish or subscribe more, or to spin)."""
        if self._probe is None:
            raise RuntimeError(f"graph {self.plan.namespace} is not running")
        return self._probe

    # --- stepping -----------------------------------------------------------------------

    @property
    def inputs(self) -> tuple[str, ...]:
        """The external inputs as ``"node/port"``: the keys :meth:`step` takes."""
        return tuple(self.endpoints.inputs)

    @property
    def outputs(self) -> tuple[str, ...]:
        """Every output of every node as ``"node/port"``."""
        return tuple(self.endpoints.outputs)

    @property
    def endpoints(self) -> Endpoints:
        """The probe's publishers and subscriptions of the graph's topics."""
        if self._endpoints is None:
            raise RuntimeError(f"graph {self.plan.namespace} is not running")
        return self._endpoints

    def step(
        self,
        inputs: Mapping[str, torch.Tensor],
        *,
        timeout_s: float | None = None,
        outputs: Iterable[str] | None = None,
    ) -> dict[str, torch.Tensor]:
        """Publish ``inputs`` and return one new value of every output they drive.

        Each input goes out once, on a hop matched both ways, and the step returns once the
        nodes that fire on it published (having taken it), so the next step never overwrites
        it in a node's one-message queue: every input is used exactly once.

        Args:
            inputs: ``{"node/port": tensor}`` for external inputs (dtype and shape of the port).
            timeout_s: how long to wait for the outputs (default ``step_timeout_s``).
            outputs: the ``"node/port"`` outputs to wait for; default: every output of every
                node that fires on these inputs (a node fires when each of its external and
                data-flow inputs is given or produced in this step).

        Returns:
            ``{"node/port": tensor}``: the newest message of each awaited output.

        Raises:
            PipelineError: an unknown input, a tensor that does not fit its port, or inputs
                that make no node fire.
            StepTimeoutError: an awaited output did not publish within ``timeout_s`` (what the
                nodes hold is unknown afterwards: start a new graph).
            GraphAssertionError: a node died.
        """
        messages = self.endpoints.messages(inputs)
        awaited = self.endpoints.awaited(inputs) if outputs is None else outputs
        return self.send(messages, outputs=awaited, timeout_s=timeout_s)

    def send(
        self,
        messages: Mapping[str, Any],
        *,
        outputs: Iterable[str],
        timeout_s: float | None = None,
    ) -> dict[str, torch.Tensor]:
        """:meth:`step` with messages already made: ``{absolute input topic: rclpy message or
        its CDR bytes}`` (a recorded message, joints in any order), waiting for ``outputs``.
        Raises as :meth:`step` does (PipelineError: a topic is no external input topic)."""
        awaited = self.endpoints.checked(outputs)
        before = self.endpoints.counts()
        self.endpoints.publish(messages)
        timeout_s = self.step_timeout_s if timeout_s is None else timeout_s
        self._wait(awaited, before, timeout_s)
        if self._feedback:  # the fed-back values reach their consumers before the next step
            self.wait_received(timeout_s=timeout_s)
        return {key: self.latest(key) for key in awaited}

    def publish(self, values: Mapping[str, Any]) -> None:
        """Publish without waiting: ``{"node/port": tensor}`` as :meth:`step` takes them,
        and ``{absolute input topic: message or CDR bytes}`` as :meth:`send` does.

        A node's subscription keeps one message (depth 1, best effort: its deployed QoS),
        so wait for an event that shows the node took it (an output, :meth:`wait_received`)
        before publishing on the same topic again.

        Raises:
            PipelineError: an unknown input or topic, or a tensor that does not fit its port.
        """
        tensors = {key: value for key, value in values.items() if not key.startswith("/")}
        messages = self.endpoints.messages(tensors)
        messages.update({key: value for key, value in values.items() if key.startswith("/")})
        self.endpoints.publish(messages)

    def wait_received(self, *, timeout_s: float | None = None) -> dict[str, dict[str, Any]]:
        """Spin until every node's status counts as taken every message the harness sent on
        its inputs and every message the nodes publishing there ran for
        (:func:`~leapp_ros.testing.delivery.receipt_gaps`); return :meth:`status`.

        The records are then exact for everything sent so far: a node that must not answer
        an input shows the same ``runs`` as before it, and what it did publish has been
        published (a node publishes inside the callback that takes its input).

        Raises:
            GraphAssertionError: a topic still short of messages after ``timeout_s`` (a
                message lost, or a node that died), naming each.
        """
        timeout_s = self.step_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while gaps := receipt_gaps(self._statuses, self.endpoints.sent):
            self._check_alive()
            if time.monotonic() > deadline:
                raise GraphAssertionError(
                    f"graph {self.plan.namespace}: the nodes did not take every message "
                    f"within {float(timeout_s)} s: {'; '.join(gaps)}"
                )
            self.probe.executor.spin_once(timeout_sec=_SLICE_S)
        return self.status()

    def replay(self, bag: str | os.PathLike[str], **options: Any) -> Any:
        """Replay a bag through the graph and compare: :func:`leapp_ros.testing.replay.replay`
        (its options), a :class:`~leapp_ros.testing.replay.ReplayReport`."""
        from leapp_ros.testing.replay import replay

        return replay(self, bag, **options)

    def wait_for(self, outputs: Iterable[str], *, timeout_s: float | None = None) -> None:
        """Spin until every output in ``outputs`` (``"node/port"``) got a new message.

        Raises:
            StepTimeoutError, GraphAssertionError: see :meth:`step`.
        """
        awaited = self.endpoints.checked(outputs)
        before = self.endpoints.counts()
        timeout_s = self.step_timeout_s if timeout_s is None else timeout_s
        self._wait(awaited, before, timeout_s)

    def received(self, key: str) -> list[torch.Tensor]:
        """Every value published on output ``key`` since the graph started."""
        _, reader, inbox = self.endpoints.output(key)
        return [reader.from_message(message).clone() for message in inbox]

    def latest(self, key: str) -> torch.Tensor:
        """The newest value published on output ``key`` (IndexError when there is none)."""
        _, reader, inbox = self.endpoints.output(key)
        return reader.from_message(inbox[-1]).clone()

    def spin(self, seconds: float) -> None:
        """Let the probe receive for ``seconds`` (raises when a node died)."""
        self._check_alive()
        self.probe.spin_for(seconds)

    def status(self) -> dict[str, dict[str, Any]]:
        """The latest ``_leapp/status`` record of every node (the nodes send one a second and
        one soon after each change: a counter, a matched endpoint, the e-stop)."""
        self.probe.executor.spin_once(timeout_sec=0)
        return {node: dict(status) for node, status in self._statuses.items()}

    def expect_topics(self, timeout_s: float = 10.0) -> dict[str, str]:
        """Check the live ROS graph against the plan; ``{topic: type}`` of every data topic.

        Every planned topic must exist with exactly its planned type, be published by its
        node and subscribed by every consuming node (rclpy graph API); no other topic may
        appear under the namespace (besides ``_leapp/status``); and the newest message
        received on each output must have the planned shape (its layout dims). Waits up to
        ``timeout_s`` for the graph to settle.

        Raises:
            GraphAssertionError: listing every difference.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            latest = {topic: (inbox[-1] if inbox else None)
                      for topic, _, inbox in self.endpoints.outputs.values()}  # fmt: skip
            publisher = "leapp_fused" if self.fused else None
            problems = topic_problems(self.plan, self.probe.node, latest, publisher)
            if not problems or time.monotonic() > deadline:
                break
            self.spin(0.05)
        if problems:
            listing = "\n".join(f"  - {problem}" for problem in problems)
            raise GraphAssertionError(
                f"the ROS graph under {self.plan.namespace} differs from the plan of "
                f"{self.plan.spec_path}:\n{listing}"
            )
        return dict(self.plan.topics())

    # --- internals ----------------------------------------------------------------------

    def _wait_ready(self, deadline: float) -> None:
        """Every node ready and every hop matched both ways (see :meth:`start`)."""
        nodes = [node.name for node in self.plan.nodes]

        def late() -> list[str]:
            waiting = unready_nodes(self._statuses, nodes)
            if waiting:
                return [f"nodes {waiting} to be ready"]
            return self.probe.connection_gaps(self.plan.namespace)

        while gaps := late():
            self._check_alive()
            if time.monotonic() > deadline:
                raise GraphAssertionError(
                    f"graph {self.plan.namespace} was not ready within {self.timeout_s} s; "
                    f"still waiting for {'; '.join(gaps)}{output_tail(self._lines)}"
                )
            self.probe.executor.spin_once(timeout_sec=0.05)

    def _check_alive(self) -> None:
        graph = self._graph
        if graph is not None and (graph.failure is not None or graph.exit_code is not None):
            reason = graph.failure or f"it stopped with exit code {graph.exit_code}"
            raise GraphAssertionError(f"graph {self.plan.namespace} failed: {reason}")

    def _wait(self, awaited: list[str], before: Mapping[str, int], timeout_s: float) -> None:
        """Spin until each awaited output has a message more than ``before``. Nothing is sent
        again (see :mod:`leapp_ros.testing.delivery`)."""
        outputs = self.endpoints.outputs
        start = time.monotonic()
        pending = [(before[key], outputs[key][2]) for key in awaited]
        while any(len(inbox) <= count for count, inbox in pending):
            self._check_alive()
            if time.monotonic() - start > timeout_s:
                raise step_timeout(outputs, awaited, before, timeout_s)
            self.probe.executor.spin_once(timeout_sec=_SLICE_S)
