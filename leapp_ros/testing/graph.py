"""A pipeline's live ROS 2 graph under test: start it isolated, step it over real topics, stop it.

See :class:`GraphUnderTest` and the documentation of :mod:`leapp_ros.testing`.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

import torch

from leapp.errors import PipelineError
from leapp_ros.messages.multiarray import MessageError
from leapp_ros.plan.pipeline import PipelinePlan
from leapp_ros.run.processes import load_plan, plan_processes
from leapp_ros.run.runner import RunningGraph
from leapp_ros.testing.failures import (
    GraphAssertionError,
    OutputLines,
    StepTimeoutError,
    output_tail,
    step_timeout,
)
from leapp_ros.testing.probe import Probe, claim_domain_id, ros_env
from leapp_ros.testing.topics import (
    InputSender,
    OutputReader,
    driven_outputs,
    harness_parameters,
    input_senders,
    starved_nodes,
    topic_problems,
    unready,
)

__all__ = ["GraphAssertionError", "GraphUnderTest", "StepTimeoutError"]

logger = logging.getLogger(__name__)

_SLICE_S = 0.01  # longest single spin while waiting for outputs
_SETTLE_S = 0.2  # after the probe saw every endpoint, for the nodes to see each other too
_RESEND_S = 1.0  # a fed node silent this long lost its first message from another node


class GraphUnderTest:
    """An export running as a live ROS 2 graph, isolated on this machine, driven by a test.

    Use it as a context manager (``with GraphUnderTest(export) as graph:``) or call
    :meth:`start` and :meth:`close`; the package documentation of :mod:`leapp_ros.testing`
    describes what it does.

    Args:
        export: export folder, its YAML spec, or a :class:`~leapp_ros.plan.pipeline.PipelinePlan`.
        composed: every node in one process instead of one process per node.
        fused: the whole pipeline in one ``leapp_fused`` node, tick by tick.
        namespace: ROS namespace (default: the pipeline name).
        timeout_s: how long :meth:`start` waits for the graph to be ready.
        step_timeout_s: how long :meth:`step` waits for its outputs by default.
        log_level: ROS log level of the nodes.
        params_file: a ROS 2 parameters file for every node (the harness adds its QoS
            overrides to a copy of it).
        output: a stream that also receives the nodes' output lines (they are kept in
            memory anyway, see :attr:`output`).
        feedback_settle_s: after each step of a pipeline with feedback between nodes, how
            long the fed-back values get to reach their consumers before the next step.

    Raises:
        SpecError, PlanError: the export is missing, invalid, or cannot be mapped onto ROS.
    """

    def __init__(
        self,
        export: PipelinePlan | str | os.PathLike[str],
        *,
        composed: bool = False,
        fused: bool = False,
        namespace: str | None = None,
        timeout_s: float = 60.0,
        step_timeout_s: float = 10.0,
        log_level: str | None = None,
        params_file: str | os.PathLike[str] | None = None,
        output: TextIO | None = None,
        feedback_settle_s: float = 0.02,
    ):
        self.plan: PipelinePlan = load_plan(export, namespace, params_file=params_file)
        self.composed = composed
        self.fused = fused
        self.timeout_s = timeout_s
        self.step_timeout_s = step_timeout_s
        self.feedback_settle_s = feedback_settle_s
        self.domain_id: int | None = None
        self._options = (log_level, params_file)
        self._lines = OutputLines(output)
        self._lock: Any = None
        self._folder: Path | None = None
        self._graph: RunningGraph | None = None
        self._probe: Probe | None = None
        self._statuses: dict[str, dict[str, Any]] = {}
        # by "node/port": (topic, sender, publisher) and (topic, reader, inbox)
        self._inputs: dict[str, tuple[str, InputSender, Any]] = {}
        self._outputs: dict[str, tuple[str, OutputReader, list[Any]]] = {}
        inputs = [(node, port) for node in self.plan.nodes for port in node.inputs]
        self._feedback = any(port.kind == "feedback" for _, port in inputs)
        # Running nodes again gives the same outputs unless state or fed-back values change.
        self._rerun_safe = not any(port.kind in ("state", "feedback") for _, port in inputs)

    # --- life cycle ---------------------------------------------------------------------

    def __enter__(self) -> GraphUnderTest:
        return self.start()

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        self.close(check=error is None)

    def start(self) -> GraphUnderTest:
        """Start the graph and wait until every node is ready and every topic matched.

        Raises:
            GraphAssertionError: a process exited, or the graph was not ready within
                ``timeout_s``; the message has the reason and the nodes' last output lines.
        """
        if self._graph is not None:
            raise RuntimeError(f"graph {self.plan.namespace} was started already")
        try:
            self.domain_id, self._lock = claim_domain_id()
            self._folder = Path(tempfile.mkdtemp(prefix="leapp_graph_"))
            log_level, params_file = self._options
            params = harness_parameters(self.plan, self._folder / "params.yaml", params_file)
            processes = plan_processes(
                self.plan,
                composed=self.composed,
                fused=self.fused,
                log_level=log_level,
                params_file=params,
            )
            self._graph = RunningGraph(
                processes, name=self.plan.namespace, env=ros_env(self.domain_id, base={}),
                stdout=self._lines, stderr=self._lines,  # type: ignore[arg-type]
            ).start()  # fmt: skip
            self._probe = Probe(self.domain_id)
            self._create_endpoints(self._probe)
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
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
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
        return tuple(self._inputs)

    @property
    def outputs(self) -> tuple[str, ...]:
        """Every output of every node as ``"node/port"``."""
        return tuple(self._outputs)

    def step(
        self,
        inputs: Mapping[str, torch.Tensor],
        *,
        timeout_s: float | None = None,
        outputs: Iterable[str] | None = None,
    ) -> dict[str, torch.Tensor]:
        """Publish ``inputs`` and return one new value of every output they drive.

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
        messages = {topic: message for topic, (_, message) in self._messages(inputs).items()}
        awaited = self._awaited(inputs) if outputs is None else outputs
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
        publishers = {topic: publisher for topic, _, publisher in self._inputs.values()}
        unknown = sorted(set(messages) - set(publishers))
        if unknown:
            raise PipelineError(
                f"{', '.join(unknown)}: no external input topic of pipeline {self.plan.name!r}; "
                f"its input topics are {', '.join(sorted(publishers))}"
            )
        awaited = self._checked(outputs)
        before = {key: len(inbox) for key, (_, _, inbox) in self._outputs.items()}
        prepared = {topic: (publishers[topic], message) for topic, message in messages.items()}
        for publisher, message in prepared.values():
            publisher.publish(message)
        given = {key for key, (topic, _, _) in self._inputs.items() if topic in messages}
        timeout_s = self.step_timeout_s if timeout_s is None else timeout_s
        self._wait(awaited, before, timeout_s, prepared, given)
        if self._feedback and self.feedback_settle_s > 0:
            self.probe.spin_for(self.feedback_settle_s)
        return {key: self.latest(key) for key in awaited}

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
        awaited = self._checked(outputs)
        before = {key: len(inbox) for key, (_, _, inbox) in self._outputs.items()}
        timeout_s = self.step_timeout_s if timeout_s is None else timeout_s
        self._wait(awaited, before, timeout_s, {}, set())

    def received(self, key: str) -> list[torch.Tensor]:
        """Every value published on output ``key`` since the graph started."""
        _, reader, inbox = self._output(key)
        return [reader.from_message(message).clone() for message in inbox]

    def latest(self, key: str) -> torch.Tensor:
        """The newest value published on output ``key`` (IndexError when there is none)."""
        _, reader, inbox = self._output(key)
        return reader.from_message(inbox[-1]).clone()

    def spin(self, seconds: float) -> None:
        """Let the probe receive for ``seconds`` (raises when a node died)."""
        self._check_alive()
        self.probe.spin_for(seconds)

    def status(self) -> dict[str, dict[str, Any]]:
        """The latest ``_leapp/status`` record of every node (the nodes send one a second)."""
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
                      for topic, _, inbox in self._outputs.values()}  # fmt: skip
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

    def _create_endpoints(self, probe: Probe) -> None:
        for node in self.plan.nodes:
            for port in node.outputs:
                reader, topic = OutputReader(port), self.plan.resolve(port.topic)
                inbox = probe.subscribe(topic, reader.message_class)
                self._outputs[f"{node.name}/{port.port}"] = (topic, reader, inbox)
        for sender in input_senders(self.plan):
            topic = self.plan.resolve(sender.ports[0].topic or "")
            publisher = probe.publisher(topic, sender.message_class)
            for key in sender.keys:  # several keys when one message carries several ports
                self._inputs[key] = (topic, sender, publisher)
        # Last: a node's status reaching this reader proves that node has discovered every
        # reader created before it (discovery announces a participant's readers in order),
        # so its output publishers send to the probe from the first message on.
        self._statuses = probe.watch_status(self.plan.namespace)

    def _wait_ready(self, deadline: float) -> None:
        """Every node ready, every probe publisher matched, every topic's endpoints seen."""
        publishers = {topic: publisher for topic, _, publisher in self._inputs.values()}
        while late := unready(self.plan, self.probe.node, self._statuses, publishers, self.fused):
            self._check_alive()
            if time.monotonic() > deadline:
                raise GraphAssertionError(
                    f"graph {self.plan.namespace} was not ready within {self.timeout_s} s; "
                    f"still waiting for {', '.join(late)}{output_tail(self._lines)}"
                )
            self.probe.executor.spin_once(timeout_sec=0.05)
        self.probe.spin_for(_SETTLE_S)

    def _check_alive(self) -> None:
        graph = self._graph
        if graph is not None and (graph.failure is not None or graph.exit_code is not None):
            reason = graph.failure or f"it stopped with exit code {graph.exit_code}"
            raise GraphAssertionError(f"graph {self.plan.namespace} failed: {reason}")

    def _messages(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, tuple[Any, Any]]:
        """``{topic: (publisher, message)}``: one message per input topic."""
        unknown = [key for key in inputs if key not in self._inputs]
        if unknown:
            raise PipelineError(
                f"{', '.join(map(repr, unknown))}: not an external input of pipeline "
                f"{self.plan.name!r}; its external inputs are {', '.join(self._inputs)}"
            )
        messages: dict[str, tuple[Any, Any]] = {}
        for key in inputs:
            topic, sender, publisher = self._inputs[key]
            try:
                messages[topic] = (publisher, sender.to_message(inputs))
            except MessageError as e:
                raise PipelineError(f"input {key!r}: {e}") from e
        return messages

    def _awaited(self, inputs: Mapping[str, torch.Tensor]) -> list[str]:
        awaited = [key for key in driven_outputs(self.plan, inputs) if key in self._outputs]
        if not awaited:
            raise PipelineError(
                f"inputs {sorted(inputs)} make no node of pipeline {self.plan.name!r} fire "
                f"(a node needs all of its inputs); its external inputs are "
                f"{', '.join(self._inputs)}; or pass outputs=[...] to wait for"
            )
        return awaited

    def _checked(self, outputs: Iterable[str]) -> list[str]:
        keys = list(outputs)
        for key in keys:
            self._output(key)
        return keys

    def _wait(
        self,
        awaited: list[str],
        before: Mapping[str, int],
        timeout_s: float,
        messages: Mapping[str, tuple[Any, Any]],
        given: set[str],
    ) -> None:
        """Spin until each awaited output has a message more than ``before``.

        The probe's own messages always arrive (its publishers are matched, the node
        subscriptions reliable), and the nodes' publishers know the probe's subscriptions
        before they report ready. Only a first message from one node to another can be lost,
        if the graph is used right after the nodes discovered each other. So when a node fed
        by another has every input but stays silent for a while, ``messages`` are sent again,
        provided running the nodes again changes nothing (no state, no feedback)."""
        start = time.monotonic()
        resend_at = start + _RESEND_S
        pending = [(before[key], self._outputs[key][2]) for key in awaited]
        while any(len(inbox) <= count for count, inbox in pending):
            self._check_alive()
            now = time.monotonic()
            if now - start > timeout_s:
                raise step_timeout(self._outputs, awaited, before, timeout_s)
            if messages and self._rerun_safe and now > resend_at:
                resend_at = now + _RESEND_S
                new = {k for k, (_, _, inbox) in self._outputs.items() if len(inbox) > before[k]}
                if starved_nodes(self.plan, given, new):
                    logger.debug("%s: sending %s again", self.plan.namespace, sorted(messages))
                    for publisher, message in messages.values():
                        publisher.publish(message)
            self.probe.executor.spin_once(timeout_sec=_SLICE_S)

    def _output(self, key: str) -> tuple[str, OutputReader, list[Any]]:
        entry = self._outputs.get(key)
        if entry is None:
            raise PipelineError(
                f"{key!r}: not an output of pipeline {self.plan.name!r}; its outputs are "
                f"{', '.join(self._outputs)}"
            )
        return entry
