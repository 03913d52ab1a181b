"""``leapp_stand_in``: the safe action of a node process that died, published in its place.

A pipeline node that stops commanding publishes its outputs' safe action itself
(``ports.<port>.safe_action``); a process killed by SIGKILL, a segfault in a native library or
the OOM killer publishes nothing, and the controller downstream gets silence. The stand-in is
one more process of the graph (:func:`~leapp_ros.run.processes.plan_processes` adds it when
some output has a ``hold`` or ``values`` safe action, so ``leapp-ros run``, ``pipeline.launch.py``
and generated packages start it alike)::

    leapp_stand_in EXPORT --namespace /torch_pipeline --deployment processes \\
        [--nodes policy] [--params-file robot.yaml] --ros-args -r __node:=_leapp_stand_in ...

It reads the nodes' status records (``_leapp/status``) to learn each node's process id and
whether it is active, watches each of those processes (a Linux pidfd, woken the moment the
process ends), and when one ends without its orderly goodbye (:mod:`leapp_ros.run.coverage`)
it publishes, at once and then once per the node's period, the safe action of each of that
node's outputs (:mod:`leapp_ros.run.safe_outputs`) on the output's topic, with its message type
and QoS, until a record from a new process says the node is active again. Meanwhile
``/diagnostics`` has an ERROR status under the node's own name (``<ns>/<node>``) naming the dead
process and how it ended (the exit code or signal when the process could still be read, else
"ended"), and the stand-in's own record on ``_leapp/stand_in`` (JSON, reliable, transient
local) lists the processes it watches and the nodes it covers.

The executor's thread takes the status records; the watch's thread
(:class:`~leapp_ros.run.process_watch.ProcessWatch`) waits for the processes to end and for
the next safe action to be due, and publishes it: the first one right after the process ended,
whatever the executor is busy with. A node's ``stopping`` record comes before its process ends
(the node waits for it to be acknowledged); should it be taken only after the stand-in saw the
process end, it ends the cover then.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from leapp_ros.messages.topic_io import OutputWriter, now_stamp
from leapp_ros.plan.pipeline import (
    DIAGNOSTICS_TOPIC,
    STAND_IN_TOPIC,
    STATUS_TOPIC,
    SUBSCRIPTION_QOS,
    PipelinePlan,
)
from leapp_ros.plan.settings import qos_profile
from leapp_ros.run.coverage import Coverage
from leapp_ros.run.process_watch import ProcessWatch
from leapp_ros.run.processes import STAND_IN_NAME, load_plan
from leapp_ros.run.safe_outputs import SafeOutput

__all__ = ["StandIn", "main"]

PROGRAM = "leapp_stand_in"
DIAGNOSTICS_PERIOD_S = 1.0
_ERROR = b"\x02"


class StandIn(Node):
    """The stand-in node (see the module documentation) for ``outputs`` of ``plan``'s nodes
    ``nodes`` (those of this host)."""

    def __init__(
        self,
        plan: PipelinePlan,
        outputs: Sequence[SafeOutput],
        nodes: Sequence[str],
        *,
        context: Any = None,
        node_name: str = STAND_IN_NAME,
    ):
        super().__init__(
            node_name, namespace=plan.namespace, context=context, start_parameter_services=False
        )
        self._plan = plan
        self._coverage = Coverage(nodes)
        self._outputs: dict[str, list[tuple[SafeOutput, Any, OutputWriter]]] = {}
        self._held: dict[str, Any] = {}  # topic -> last message seen (hold)
        self._due: dict[str, float] = {}  # covered node -> when its safe action is due next
        self._period: dict[str, float] = {}  # node -> how often it publishes its safe action
        self._report_due = 0.0  # when /diagnostics is due next while covering
        self._lock = threading.Lock()  # the executor's thread and the watch's thread
        self._published: dict[str, int] = {}  # covered node -> safe action messages
        for safe in outputs:
            writer = OutputWriter(safe.output)
            publisher = self.create_publisher(
                writer.message_class, safe.output.topic, qos_profile(safe.output.qos)
            )
            self._outputs.setdefault(safe.node, []).append((safe, publisher, writer))
            self._period[safe.node] = min(self._period.get(safe.node, 1e9), safe.period_s)
            if safe.action == "hold":
                topic = safe.output.topic
                self.create_subscription(
                    writer.message_class,
                    topic,
                    lambda message, topic=topic: self._held.__setitem__(topic, message),
                    qos_profile(SUBSCRIPTION_QOS),
                )
        durable = QoSProfile(
            history=HistoryPolicy.KEEP_LAST,
            depth=100,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        self.create_subscription(String, STATUS_TOPIC, self._on_status, durable)
        durable_one = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._record = self.create_publisher(String, STAND_IN_TOPIC, durable_one)
        self._diagnostics = self.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, 10)
        self._watch = ProcessWatch(self._on_ended, self._on_tick)
        self._publish_record()
        self.get_logger().info(
            f"stand-in for {', '.join(sorted(self._outputs)) or 'no node'}: publishes the safe "
            "action of a node whose process dies"
        )

    # --- status records (the executor's thread) --------------------------------------------

    def _on_status(self, message: Any) -> None:
        try:
            record = json.loads(message.data)
        except ValueError:
            return
        if not isinstance(record, dict):
            return
        with self._lock:
            before = self._coverage.watching()
            for node in self._coverage.take(record):
                self._uncover(node, record)
            if self._coverage.watching() != before:
                self._watch.want(set(self._coverage.pids()))
                self._publish_record()

    # --- ended processes and what is due (the watch's thread) -------------------------------

    def _on_ended(self, pid: int, how: str, orderly: bool) -> None:
        with self._lock:
            now = time.monotonic()
            covered = self._coverage.ended(pid, now, how, orderly=orderly)
            for node in covered:  # the safe action first, then the words
                self._published[node] = 0
                self._publish_safe_action(node)
            for node in covered:
                self._cover(node, now)
            self._publish_record()

    def _on_tick(self) -> float | None:
        """Publish what is due; the seconds until the next (None: nothing is covered)."""
        with self._lock:
            if not self._due:
                return None
            now = time.monotonic()
            for node, due in list(self._due.items()):
                if due <= now:
                    self._publish_safe_action(node)
                    self._due[node] = max(due + self._period[node], now)
            if self._report_due <= now:
                self._report_covers()
                self._report_due = now + DIAGNOSTICS_PERIOD_S
            return max(min(*self._due.values(), self._report_due) - now, 0.0)

    def _cover(self, node: str, now: float) -> None:
        """Log a new cover; its next safe action is one period after the first."""
        cover = self._coverage.covers[node]
        outputs = self._outputs.get(node, [])
        topics = ", ".join(publisher.topic_name for _, publisher, _ in outputs) or "none"
        self.get_logger().error(
            f"node {node!r}: process {cover.pid} {cover.how} without its goodbye; publishing "
            f"the safe action of {topics} until it is back and active"
        )
        if outputs:
            self._due[node] = now + self._period[node]
        self._report_due = now

    def _uncover(self, node: str, record: dict[str, Any]) -> None:
        self._due.pop(node, None)
        count = self._published.pop(node, 0)
        back = "said stopping after all" if record.get("state") == "stopping" else "is active"
        self.get_logger().info(
            f"node {node!r}: process {record.get('pid')} {back}; the stand-in stopped after "
            f"{count} safe action message(s)"
        )
        self._publish_record()

    def _publish_safe_action(self, node: str) -> None:
        if node not in self._coverage.covers:
            return
        stamp = now_stamp(self.get_clock(), False)
        sent = False
        for safe, publisher, writer in self._outputs.get(node, []):
            try:
                if safe.action == "values":
                    publisher.publish(writer.write(safe.limits.safe_values, stamp))
                    sent = True
                elif (held := self._held.get(safe.output.topic)) is not None:
                    if hasattr(held, "header"):
                        held.header.stamp = stamp
                    publisher.publish(held)
                    sent = True
            except Exception as e:  # never die of it: say so, and try again next period
                self.get_logger().error(
                    f"could not publish the safe action on {publisher.topic_name}: {e}",
                    throttle_duration_sec=1.0,
                )
        if sent:
            self._published[node] = self._published.get(node, 0) + 1

    # --- what it says ------------------------------------------------------------------------

    def _report_covers(self) -> None:
        covers = self._coverage.covers
        if not covers:
            return
        array = DiagnosticArray()
        array.header.stamp = self.get_clock().now().to_msg()
        now = time.monotonic()
        for node, cover in sorted(covers.items()):
            topics = [publisher.topic_name for _, publisher, _ in self._outputs.get(node, [])]
            array.status.append(
                DiagnosticStatus(
                    level=_ERROR,
                    name=f"{self._plan.namespace.rstrip('/')}/{node}",
                    hardware_id=self._plan.name,
                    message=f"process {cover.pid} {cover.how} without its goodbye: the "
                    f"stand-in publishes the safe action ({', '.join(topics) or 'none'})",
                    values=[
                        KeyValue(key="pid", value=str(cover.pid)),
                        KeyValue(key="ended", value=cover.how),
                        KeyValue(key="covered_s", value=f"{now - cover.since:.3f}"),
                        KeyValue(key="safe_actions", value=str(self._published.get(node, 0))),
                    ],
                )
            )
        self._diagnostics.publish(array)

    def _publish_record(self) -> None:
        covers = self._coverage.covers
        record = {
            "name": self.get_fully_qualified_name(),
            "pid": os.getpid(),
            "nodes": self._coverage.nodes,
            "watching": self._coverage.watching(),
            "covering": {
                node: {"pid": cover.pid, "how": cover.how} for node, cover in covers.items()
            },
            "outputs": {
                node: [publisher.topic_name for _, publisher, _ in entries]
                for node, entries in sorted(self._outputs.items())
            },
        }
        self._record.publish(String(data=json.dumps(record)))

    def stop(self) -> None:
        """Stop watching; the covered nodes' safe action once more as the last word."""
        self._watch.close()
        with self._lock:
            for node in list(self._coverage.covers):
                self._publish_safe_action(node)

    def destroy_node(self) -> None:
        watch = getattr(self, "_watch", None)  # (none when the constructor failed)
        if watch is not None:
            watch.close()
        super().destroy_node()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Publishes the safe action of a leapp pipeline node whose process died, "
        "until it is back and active.",
        epilog="Arguments after --ros-args go to ROS as usual.",
    )
    parser.add_argument("export", help="export folder of the pipeline, or its YAML spec")
    parser.add_argument("--namespace", help="ROS namespace of the nodes (default: the pipeline)")
    parser.add_argument("--deployment", default="processes", help="processes, composed, fused")
    parser.add_argument("--nodes", help="comma-separated pipeline nodes of this host (all)")
    parser.add_argument("--params-file", help="the nodes' ROS 2 parameters file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``leapp_stand_in``; ``argv`` is the whole command line (default
    sys.argv: then the call is the process's whole life)."""
    from rclpy.utilities import remove_ros_args

    from leapp_ros.node.executor import run_nodes, startup_failure
    from leapp_ros.plan.selection import node_names, select_nodes
    from leapp_ros.run.deployment import GraphOptions
    from leapp_ros.run.safe_outputs import plan_safe_outputs

    args = list(sys.argv if argv is None else argv)
    try:
        ours = remove_ros_args(args)[1:]
    except Exception as e:  # rcl could not parse the ROS arguments
        return startup_failure(PROGRAM, f"invalid ROS arguments: {e}")
    try:
        given = _parser().parse_args(ours)
    except SystemExit as e:  # --help (0) or a usage error (argparse printed it; 2)
        return int(e.code or 0)

    def build(context: Any, nodes: list[Any]) -> None:
        options = GraphOptions(
            deployment=given.deployment,
            namespace=given.namespace,
            params_file=given.params_file,
            nodes=node_names(given.nodes) if given.nodes else None,
        )
        plan = load_plan(given.export, options.namespace, params_file=options.params_file)
        held = [node.name for node in select_nodes(plan, options.nodes)]
        outputs = plan_safe_outputs(plan, options)
        nodes.append(StandIn(plan, outputs, held, context=context))

    return run_nodes(PROGRAM, args, build, whole_process=argv is None)


if __name__ == "__main__":
    sys.exit(main())
