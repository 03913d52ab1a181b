"""Plain rclpy echo nodes of a pipeline's shape: the topics the benches' reference graphs use.

An echo node subscribes to one ``Float32MultiArray`` topic per input and, once each of them
has a new message, publishes one ``Float32MultiArray`` of its output's size (zeros, from one
preallocated message): the plumbing of a pipeline node without the model. The topics, message
sizes and QoS are those of the leapp graph (:func:`leapp_ros.plan.pipeline.make_plan`: publishers
reliable, subscriptions best effort, depth 1), the executor the one leapp's nodes use
(:func:`leapp_ros.node.executor.make_executor`), so the difference between the two graphs is
leapp's own cost and the model calls. bench/hand_written_nodes.py's nodes take their topics
from these and add the model calls; bench/ros_latency.py runs those, and raw echoes as the
floor of each mode, :func:`chain_of` for the chain modes and :func:`hop_of` for the fused ones
(information: no model, no checks, no conversion; what no Python graph of that shape on this
executor and middleware gets below).

- :func:`chain_of`: one echo node per pipeline node, wired like the pipeline;
- :func:`hop_of`: one echo node from the pipeline's external inputs to its last output
  (client -> one node -> client).

Composed: :func:`make_echo_node` on the client's context. One process per node
(:func:`reference_processes` starts them, these and bench/hand_written_nodes.py's)::

    python bench/rclpy_reference.py NAME --namespace NS --input TOPIC:SIZE ... --output TOPIC:SIZE

which prints ``reference node NAME ready`` once its topics exist and runs until SIGINT/SIGTERM,
on the same process skeleton as leapp's nodes (:func:`leapp_ros.node.executor.run_nodes`).
"""

from __future__ import annotations

import argparse
import array
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

READY = "reference node {name} ready"  # printed by a reference process


@dataclass(frozen=True)
class EchoNode:
    """An echo node: ``inputs`` and ``output`` are ``(relative topic, float count)``;
    ``raw``: its subscriptions take the serialized CDR (``raw=True``) and it publishes
    prebuilt CDR bytes (the floor of a raw data path: no conversion at all)."""

    name: str
    inputs: tuple[tuple[str, int], ...]
    output: tuple[str, int]
    raw: bool = False

    def argv(self, namespace: str) -> list[str]:
        ports = [f"--input={topic}:{size}" for topic, size in self.inputs]
        topic, size = self.output
        return [
            sys.executable,
            __file__,
            self.name,
            f"--namespace={namespace}",
            *ports,
            f"--output={topic}:{size}",
            *(["--raw"] if self.raw else []),
        ]


def _size(port: Any) -> int:
    if port.message_type != "std_msgs/msg/Float32MultiArray":
        raise ValueError(f"the echo reference only knows Float32MultiArray, not {port}")
    count = 1
    for extent in port.shape:
        count *= extent
    return count


def chain_of(plan: Any) -> tuple[EchoNode, ...]:
    """One echo node per node of ``plan`` (a :class:`leapp_ros.plan.pipeline.PipelinePlan`),
    named and wired like it; each publishes its first output."""
    return tuple(
        EchoNode(
            node.name,
            tuple((port.topic, _size(port)) for port in node.inputs if port.triggers),
            (node.outputs[0].topic, _size(node.outputs[0])),
        )
        for node in plan.nodes
    )


def hop_of(plan: Any) -> EchoNode:
    """One echo node from the external inputs of ``plan``'s first node to the first output of
    its last node."""
    first, last = plan.nodes[0], plan.nodes[-1]
    inputs = tuple((port.topic, _size(port)) for port in first.inputs if port.kind == "external")
    return EchoNode("hop", inputs, (last.outputs[0].topic, _size(last.outputs[0])))


def make_echo_node(echo: EchoNode, namespace: str, context: Any) -> Any:
    """The rclpy node of ``echo`` in ``namespace`` on ``context``."""
    from rclpy.node import Node
    from std_msgs.msg import Float32MultiArray

    from leapp_ros.plan.pipeline import PUBLISHER_QOS, SUBSCRIPTION_QOS
    from leapp_ros.plan.settings import qos_profile

    node = Node(echo.name, namespace=namespace, context=context)
    topic, size = echo.output
    publisher = node.create_publisher(Float32MultiArray, topic, qos_profile(PUBLISHER_QOS))
    message = Float32MultiArray(data=array.array("f", bytes(4 * size)))
    if echo.raw:
        from rclpy.serialization import serialize_message

        message = serialize_message(message)
    fresh = [False] * len(echo.inputs)
    publish = publisher.publish

    def receiver(index: int):
        def on_message(_message: Any) -> None:
            fresh[index] = True
            if all(fresh):
                fresh[:] = [False] * len(fresh)
                publish(message)

        return on_message

    for index, (topic, _) in enumerate(echo.inputs):
        node.create_subscription(
            Float32MultiArray,
            topic,
            receiver(index),
            qos_profile(SUBSCRIPTION_QOS),
            raw=echo.raw,
        )
    return node


@contextlib.contextmanager
def reference_processes(nodes: tuple[Any, ...], namespace: str) -> Iterator[None]:
    """Each reference node (an :class:`EchoNode`, or anything with a ``name`` and an
    ``argv(namespace)`` whose process prints :data:`READY`) in a python process of its own,
    every one ready when this enters."""
    import select

    from leapp_ros.run.processes import start_process

    started = [start_process(node.argv(namespace), os.environ) for node in nodes]
    try:
        deadline = time.monotonic() + 90
        for node, process in zip(nodes, started, strict=True):
            ready, text = READY.format(name=node.name).encode(), b""
            while ready not in text:
                left = deadline - time.monotonic()
                if left <= 0 or process.poll() is not None:
                    error = process.stderr.read().decode() if process.poll() is not None else ""
                    raise SystemExit(f"reference node {node.name} not ready: {error[-2000:]}")
                if select.select([process.stdout], [], [], left)[0]:
                    text += os.read(process.stdout.fileno(), 4096)
        yield
    finally:
        for process in started:
            process.send_signal(signal.SIGINT)
        for process in started:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def parse_port(text: str) -> tuple[str, int]:
    topic, _, size = text.rpartition(":")
    return topic, int(size)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--input", type=parse_port, action="append", required=True)
    parser.add_argument("--output", type=parse_port, required=True)
    parser.add_argument("--raw", action="store_true", help="take and send serialized CDR bytes")
    args = parser.parse_args(argv)
    echo = EchoNode(args.name, tuple(args.input), args.output, args.raw)

    from leapp_ros.node.executor import run_nodes

    def build(context: Any, nodes: list[Any]) -> None:
        nodes.append(make_echo_node(echo, args.namespace, context))
        print(READY.format(name=echo.name), flush=True)

    return run_nodes("rclpy_reference", [sys.argv[0]], build, whole_process=True)


if __name__ == "__main__":
    sys.exit(main())
