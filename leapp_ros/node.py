"""One pipeline node as a ROS 2 node: the ``leapp_node`` executable and :class:`PipelineNode`.

Start one node of an export::

    leapp_node --ros-args -r __node:=preprocess -r __ns:=/torch_pipeline \\
        -p spec_path:=exports/torch_pipeline [-p firing:=timer -p rate_hz:=50.0]

(or ``python -m leapp_ros.node ...``). The node loads the spec (checking every artifact's
sha256), maps it with :func:`leapp_ros.plan.make_plan` under its own namespace, loads and warms
up its model, subscribes to one topic per input and advertises one per output, then runs the
model whenever its firing rule says so and publishes every output.

The ROS parameters (``spec_path``, ``firing``, ``rate_hz``, ``max_input_age``,
``cpu_latency_us``, ``cpu_affinity``, ``on_nonfinite``, ``ports.<port>.*``, ``qos_overrides``)
are documented in :mod:`leapp_ros.settings`; all are read once at startup.

Feedback inputs (another node's output, consumed on the next tick) never trigger and start
from ``pipeline.initial_values`` (a safetensors file keyed ``<node>/<port>``); state inputs (the
node's own output fed back) stay inside the node: each run's output is the next run's input.

A malformed message (wrong length or layout, a JointState lacking a joint) is dropped,
counted and logged (at most once a second per topic); an exception in the model is counted
and logged (at most once a second) and the node keeps running. Created with an intra-process
bus (composed), it exchanges values with the other pipeline nodes of its process directly
(:mod:`leapp_ros.intra_process`). Every node publishes its status as JSON
(``std_msgs/String``) on ``_leapp/status`` (reliable, transient local, depth 1) when ready
and then every second::

    {"node": "preprocess", "state": "ready", "runs": 12, "received": 24, "dropped": 0,
     "stale": 0, "errors": 0, "nonfinite_inputs": 0, "nonfinite_outputs": 0, "cpu_latency_us":
     null, "cpu_affinity": null, "subscribers": {"/torch_pipeline/preprocess/obs": 1}}

(``cpu_latency_us``: the CPU latency request held, ``cpu_affinity``: the CPUs pinned to, null
for none; ``subscribers``: the subscriptions each output's publisher matched, so a tester
knows when every hop is connected) and ``"state": "stopping"`` once on shutdown; it logs
``leapp node '<name>' ready`` when ready. Exit codes: 0 after SIGINT/SIGTERM, 2 for a startup
problem (one error line on stderr).
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos_overriding_options import QoSOverridingOptions
from std_msgs.msg import String

from leapp.errors import LeappError
from leapp.spec import Spec
from leapp_ros.cpu_settings import CpuLatencyRequest, CpuSettingsError, pin_process
from leapp_ros.executor import node_main
from leapp_ros.intra_process import IntraProcessBus, publish_through
from leapp_ros.messages import MessageError
from leapp_ros.node_log import RateLimitedLog, one_line
from leapp_ros.plan import METADATA_QOS, STATUS_TOPIC, make_plan
from leapp_ros.settings import (
    StartupError,
    declare_parameters,
    declare_port_overrides,
    firing_rule,
    initial_values,
    load_spec,
    qos_profile,
)
from leapp_ros.topic_io import OutputWriter, TopicReader, float_ports, nonfinite, topic_readers

__all__ = ["PipelineNode", "StartupError", "main"]

PROGRAM = "leapp_node"
STATUS_PERIOD_S = 1.0
STOP_ACK_TIMEOUT_S = 0.5

USAGE = f"""usage: {PROGRAM} --ros-args -r __node:=<node> [-r __ns:=/<namespace>]
                  -p spec_path:=<export folder or yaml> [-p pipeline_node:=<node>]
                  [-p firing:=inputs|timer] [-p rate_hz:=<Hz>] [-p max_input_age:=<s>]
                  [--params-file <file>] [--log-level <level>]
Runs one node of an exported leapp pipeline as a ROS 2 node."""


class PipelineNode(Node):
    """A ROS 2 node running one node of an exported pipeline (see the module documentation).

    Args:
        node_name: the ROS node name (a ``-r __node:=`` remap wins over it).
        namespace: the ROS namespace (a ``-r __ns:=`` remap wins over it).
        context: the rclpy context (default: the global one).
        spec: an already loaded spec of ``spec_path`` (a container loads it once for all).
        parameter_overrides: parameter values that win over command-line ones.
        cli_args: ROS arguments of this node only (``--ros-args -r __node:=policy ...``).
        use_global_arguments: False to ignore the process's own ROS arguments (a node loaded
            into a component container takes only those of its load request).
        bus: the intra-process bus of the process (:mod:`leapp_ros.intra_process`): values
            go to and come from the other pipeline nodes on it without the middleware.

    Raises:
        StartupError: the spec, the model, the parameters or the initial values are unusable;
            the message names the node and says what to do. The node is destroyed then.
    """

    def __init__(
        self,
        node_name: str = "leapp_node",
        *,
        namespace: str | None = None,
        context: Any = None,
        spec: Spec | None = None,
        parameter_overrides: Sequence[Parameter] = (),
        cli_args: Sequence[str] | None = None,
        use_global_arguments: bool = True,
        bus: IntraProcessBus | None = None,
    ):
        super().__init__(
            node_name,
            namespace=namespace,
            context=context,
            parameter_overrides=list(parameter_overrides),
            cli_args=None if cli_args is None else list(cli_args),
            use_global_arguments=use_global_arguments,
        )
        self._runs = self._received = self._dropped = self._stale = self._errors = 0
        self._nonfinite_inputs = self._nonfinite_outputs = 0
        self._warnings = RateLimitedLog(self.get_logger())
        self._leapp_timers: list[Any] = []
        self._cpu_latency: CpuLatencyRequest | None = None
        self._cpu_affinity: tuple[int, ...] | None = None
        self._bus = bus
        self._bus_exits: list[Any] = []  # what leaves the bus when the node is destroyed
        try:
            self._start(spec)
        except BaseException:
            self.destroy_node()
            raise

    # --- startup ------------------------------------------------------------------------

    def _start(self, spec: Spec | None) -> None:
        settings = declare_parameters(self)
        self.pipeline_node = str(settings["pipeline_node"] or self.get_name())
        if settings["cpu_affinity"]:
            try:
                self._cpu_affinity = pin_process(settings["cpu_affinity"])
            except CpuSettingsError as e:
                problem = f"node {self.pipeline_node!r}: parameter cpu_affinity: {e}"
                raise StartupError(problem) from e
            self.get_logger().info(f"running on CPUs {list(self._cpu_affinity)}")
        try:
            self._load(spec, settings)
        except StartupError:
            raise
        except LeappError as e:
            raise StartupError(f"node {self.pipeline_node!r}: {e}") from e
        self._create_entities()
        self._request_cpu_latency(settings["cpu_latency_us"])
        self._publish_status("ready")
        self.get_logger().debug(f"firing {self.firing}")
        for name in self._ready_names():
            self.get_logger().info(f"leapp node '{name}' ready")

    def _load(self, spec: Spec | None, settings: dict[str, Any]) -> None:
        """Load the spec and the model; plan the topics and the firing rule."""
        if spec is None:
            spec = load_spec(str(settings["spec_path"]))
        names = [model.name for model in spec.models]
        if self.pipeline_node not in names:
            raise StartupError(
                f"pipeline {spec.name!r} has no node {self.pipeline_node!r} (the ROS node "
                f"name, or parameter pipeline_node); its nodes are {', '.join(names)}: "
                "name one with -r __node:=<node> or -p pipeline_node:=<node>"
            )
        ports = declare_port_overrides(self, spec.model(self.pipeline_node))
        plan = make_plan(spec, namespace=self.get_namespace(), ports={self.pipeline_node: ports})
        self.plan = plan.node(self.pipeline_node)
        self.firing = firing_rule(self.plan, settings)
        self._publish_nonfinite = settings["on_nonfinite"] == "publish"
        from leapp_ros.node_model import load_node_model

        self._model = load_node_model(spec, self.pipeline_node)
        initial = initial_values(plan.initial_values, self.plan)
        self._readers = topic_readers(self.plan.inputs)
        self._writers = [OutputWriter(port) for port in self.plan.outputs]
        inputs = self.plan.inputs
        self._values: list[Any] = [initial.get(i) for i in range(len(inputs))]
        self._float_inputs = float_ports(inputs)
        self._float_outputs = float_ports(self.plan.outputs)
        self._stamps = [-math.inf] * len(inputs)
        self._triggers = frozenset(i for i, port in enumerate(inputs) if port.triggers)
        self._pending = set(self._triggers)
        self._state_links = tuple(
            (self.plan.outputs.index(self.plan.output(port.source.split("/", 1)[1])), i)
            for i, port in enumerate(inputs)
            if port.kind == "state" and port.source is not None
        )

    def _create_entities(self) -> None:
        overrides = QoSOverridingOptions.with_default_policies()
        for reader in self._readers:
            subscription = self.create_subscription(
                reader.message_class,
                reader.topic,
                self._on_message_callback(reader),
                qos_profile(self.plan.inputs[reader.indices[0]].qos),
                qos_overriding_options=overrides,
            )
            reader.resolved = subscription.topic_name  # after remapping: the name users see
            if self._bus is not None:
                deliver = self._on_value_callback(reader)
                self._bus_exits.append(self._bus.subscribe(reader.resolved, deliver))
        self._output_publishers = [
            self.create_publisher(
                writer.message_class,
                port.topic,
                qos_profile(port.qos),
                qos_overriding_options=overrides,
            )
            for port, writer in zip(self.plan.outputs, self._writers, strict=True)
        ]
        self._stamped = any(writer.stamped for writer in self._writers)
        self._topics = [publisher.topic_name for publisher in self._output_publishers]
        self._publish_through = None
        if self._bus is not None:
            self._bus_exits += [self._bus.advertise(topic) for topic in self._topics]
            self._publish_through = partial(
                publish_through, self._bus, self._topics, self._output_publishers,
                self._writers,
            )  # fmt: skip
        self._create_status_and_timers()

    def _create_status_and_timers(self) -> None:
        self._status = self.create_publisher(String, STATUS_TOPIC, qos_profile(METADATA_QOS))
        self._leapp_timers.append(self.create_timer(STATUS_PERIOD_S, self._on_status_timer))
        if self.firing.mode == "timer" and self.firing.rate_hz:
            self._leapp_timers.append(self.create_timer(1.0 / self.firing.rate_hz, self._on_timer))

    def _request_cpu_latency(self, microseconds: int) -> None:
        if microseconds < 0:
            return
        try:
            self._cpu_latency = CpuLatencyRequest(microseconds)
        except CpuSettingsError as e:
            self.get_logger().warning(
                f"node {self.pipeline_node!r}: cpu_latency_us is {microseconds}, but {e}"
            )
            return
        self.get_logger().info(f"holding a CPU latency request of {microseconds} us")

    def destroy_node(self) -> None:
        """Destroy the node, leave the intra-process bus and end the CPU latency request."""
        while self._bus_exits:
            self._bus_exits.pop()()
        if self._cpu_latency is not None:
            self._cpu_latency.release()
        super().destroy_node()

    # --- data path ----------------------------------------------------------------------

    def _on_message_callback(self, reader: TopicReader) -> Any:
        topic, read, accept = reader.topic or "", reader.read, self._accept_callback(reader)
        produced_here = self._bus.produces if self._bus is not None else None

        def on_message(message: Any) -> None:
            if produced_here is not None and produced_here(reader.resolved):
                return  # the middleware's copy of a value the bus delivered already
            self._received += 1
            try:
                decoded = read(message)
            except Exception as e:  # MessageError, or one no codec expected: never die of it
                self._dropped += 1
                problem = e if isinstance(e, MessageError) else one_line(e)
                self._warn(topic, f"dropped a message on {reader.resolved}: {problem}")
                return
            accept(decoded)

        return on_message

    def _on_value_callback(self, reader: TopicReader) -> Any:
        """What the intra-process bus calls with another node's output value."""
        accept, count = self._accept_callback(reader), len(reader.indices)

        def on_value(value: Any) -> None:
            self._received += 1
            accept([value] * count)

        return on_value

    def _accept_callback(self, reader: TopicReader) -> Any:
        """Takes the decoded values of a topic's ports: checks, stores, fires."""
        indices = reader.indices
        values, stamps, pending = self._values, self._stamps, self._pending
        triggers = [i for i in indices if i in self._triggers]
        on_inputs = self.firing.mode == "inputs"
        monotonic = time.monotonic
        check = () if self._publish_nonfinite else [
            n for n, index in enumerate(indices) if index in self._float_inputs
        ]  # fmt: skip

        def accept(decoded: list[Any]) -> None:
            if check and (bad := nonfinite(decoded, check)):
                self._nonfinite_inputs += 1
                ports = [self.plan.inputs[indices[n]].port for n in bad]
                self._warn(
                    "\0nonfinite-in",
                    f"node {self.pipeline_node!r}: dropped a message on {reader.resolved}: "
                    f"input(s) {ports} hold NaN or infinite values (on_nonfinite: drop)",
                )
                return
            now = monotonic()
            for index, value in zip(indices, decoded, strict=True):
                values[index] = value
                stamps[index] = now
            if triggers and on_inputs:
                pending.difference_update(triggers)
                if not pending:
                    self._fire_on_inputs(now)

        return accept

    def _fire_on_inputs(self, now: float) -> None:
        age = self.firing.max_input_age_s
        if age:
            old = [i for i in self._triggers if now - self._stamps[i] > age]
            if old:
                self._stale += 1
                self._pending.update(old)
                return
        self._pending.update(self._triggers)
        self._run()

    def _on_timer(self) -> None:
        if any(value is None for value in self._values):
            return  # not every input has arrived yet
        age = self.firing.max_input_age_s
        if age:
            now = time.monotonic()
            if any(now - self._stamps[i] > age for i in self._triggers):
                self._stale += 1
                return
        self._run()

    def _run(self) -> None:
        try:
            # The readers checked every value against its port; no second check here.
            results = self._model.call(self._values)
            if not self._publish_nonfinite and (bad := nonfinite(results, self._float_outputs)):
                self._nonfinite_outputs += 1
                ports = [self.plan.outputs[i].port for i in bad]
                self._warn(
                    "\0nonfinite-out",
                    f"node {self.pipeline_node!r}: output(s) {ports} hold NaN or infinite "
                    "values; nothing was published (on_nonfinite: drop)",
                )
                return
            for output, index in self._state_links:
                self._values[index] = results[output]
            stamp = self.get_clock().now().to_msg() if self._stamped else None
            if self._publish_through is not None:
                self._publish_through(results, stamp)
            else:
                for publisher, writer, value in zip(
                    self._output_publishers, self._writers, results, strict=True
                ):
                    publisher.publish(writer.write(value, stamp))
        except Exception as e:
            self._errors += 1
            self._warn(
                "\0model",
                f"node {self.pipeline_node!r}: the model failed and this run was skipped: "
                f"{one_line(e)} (the full error is logged at debug level)",
            )
            self.get_logger().debug(f"{type(e).__name__}: {e}")
            return
        self._runs += 1

    # --- status -------------------------------------------------------------------------

    def status(self, state: str = "ready") -> dict[str, Any]:
        """The status record this node publishes on ``_leapp/status``."""
        return {
            "node": self.pipeline_node,
            "state": state,
            "runs": self._runs,
            "received": self._received,
            "dropped": self._dropped,
            "stale": self._stale,
            "errors": self._errors,
            "nonfinite_inputs": self._nonfinite_inputs,
            "nonfinite_outputs": self._nonfinite_outputs,
            "cpu_latency_us": self._cpu_latency.microseconds if self._cpu_latency else None,
            "cpu_affinity": list(self._cpu_affinity) if self._cpu_affinity else None,
            "subscribers": {
                publisher.topic_name: publisher.get_subscription_count()
                for publisher in getattr(self, "_output_publishers", ())
            },
        }

    def stop(self) -> None:
        """Stop firing and publish the ``stopping`` status (call before destroying the node)."""
        for timer in self._leapp_timers:
            timer.cancel()
        self._publish_status("stopping")
        # reliable: give subscribers (a supervisor) a moment to acknowledge the last word
        self._status.wait_for_all_acked(Duration(seconds=STOP_ACK_TIMEOUT_S))
        for record in self._status_records("stopping"):
            self.get_logger().info(f"leapp node '{record['node']}' stopping: {record}")

    def _on_status_timer(self) -> None:  # no parameters: rclpy would pass a TimerInfo
        self._publish_status("ready")

    def _publish_status(self, state: str) -> None:
        for record in self._status_records(state):
            self._status.publish(String(data=json.dumps(record)))

    def _status_records(self, state: str) -> list[dict[str, Any]]:
        return [self.status(state)]

    def _ready_names(self) -> list[str]:
        return [self.pipeline_node]

    def _warn(self, key: str, text: str) -> None:
        """Log ``text`` unless ``key`` was logged less than a second ago."""
        self._warnings.warning(key, text)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``leapp_node``; ``argv`` is the whole command line (default sys.argv)."""
    return node_main(PROGRAM, USAGE, lambda context: PipelineNode(context=context), argv)


if __name__ == "__main__":
    sys.exit(main())
