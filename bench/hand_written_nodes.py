"""Hand-written rclpy policy nodes of a pipeline's shape: the graph users compare leapp's with.

What a user writes without leapp: a plain rclpy node per pipeline node that subscribes to its
inputs, and once every input of this tick arrived, converts the messages with
``np.frombuffer(message.data, np.float32)``, calls the node's exported artifact and publishes
the result as a ``Float32MultiArray`` (``array.array("f", result.tobytes())``; no NaN checks,
no layout). The artifacts are called the plain way, with one thread each:

- TorchScript: ``torch.jit.load``, ``torch.set_num_threads(1)``, the module called on
  ``torch.from_numpy`` tensors under ``torch.no_grad()``;
- ONNX: ``onnxruntime.InferenceSession`` (1 intra-op, 1 inter-op thread),
  ``session.run(None, {input name: array})``.

Topics, message sizes, QoS and executor are those of bench/rclpy_reference.py's echo nodes
(the leapp graph's, from :func:`leapp_ros.plan.pipeline.make_plan`), so each hand-written
graph differs from the echo graph of its shape by the model calls only:

- :func:`chain_of`: one hand-written node per pipeline node, wired like the pipeline;
- :func:`single_of`: one node from the pipeline's external inputs to its last output, calling
  every artifact in one callback (for a chain of nodes, each fed by the one before).

Composed: :func:`make_hand_written_node` on the client's context. One process per node
(bench/rclpy_reference.py's :func:`reference_processes` starts them)::

    python bench/hand_written_nodes.py NAME --namespace NS --input TOPIC:SIZE ...
        --output TOPIC:SIZE --artifact BACKEND:PATH ...

which prints bench/rclpy_reference.py's ``READY`` line once its topics exist and runs until
SIGINT/SIGTERM, on the same process skeleton as the echo nodes.
"""

from __future__ import annotations

import argparse
import array
import itertools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rclpy_reference import READY, EchoNode, hop_of, parse_port
from rclpy_reference import chain_of as echo_chain_of


@dataclass(frozen=True)
class HandWrittenNode:
    """A hand-written node: the topics of ``echo``; it calls the ``(backend, path)`` of
    ``artifacts`` in order, each on the previous one's output, the first on its inputs."""

    echo: EchoNode
    artifacts: tuple[tuple[str, str], ...]

    @property
    def name(self) -> str:
        return self.echo.name

    def argv(self, namespace: str) -> list[str]:
        topic, size = self.echo.output
        return [
            sys.executable,
            __file__,
            self.name,
            f"--namespace={namespace}",
            *(f"--input={topic}:{size}" for topic, size in self.echo.inputs),
            f"--output={topic}:{size}",
            *(f"--artifact={backend}:{path}" for backend, path in self.artifacts),
        ]


def _artifact(node: Any, directory: Path) -> tuple[str, str]:
    parameters = node.model.parameters
    if parameters.backend not in LOADERS:
        raise ValueError(f"no hand-written call for {node.name}'s backend {parameters.backend!r}")
    return parameters.backend, str(directory / parameters.model_path)


def chain_of(plan: Any, directory: Path) -> tuple[HandWrittenNode, ...]:
    """One hand-written node per node of ``plan`` (a
    :class:`leapp_ros.plan.pipeline.PipelinePlan`), named and wired like it, calling its artifact
    (in the export folder ``directory``)."""
    return tuple(
        HandWrittenNode(echo, (_artifact(node, directory),))
        for echo, node in zip(echo_chain_of(plan), plan.nodes, strict=True)
    )


def single_of(plan: Any, directory: Path) -> HandWrittenNode:
    """One hand-written node doing the whole of ``plan`` in one callback: a chain whose first
    node reads the external inputs and every later node the first output of the one before."""
    for before, node in itertools.pairwise(plan.nodes):
        sources = [port.source for port in node.inputs if port.kind != "external"]
        if sources != [f"{before.name}/{before.outputs[0].port}"]:
            raise ValueError(f"{node.name} is not fed by {before.name} alone; not a chain")
    if any(port.kind != "external" for port in plan.nodes[0].inputs):
        raise ValueError(f"{plan.nodes[0].name} has inputs other than external ones")
    hop = hop_of(plan)
    echo = EchoNode("hand_written", hop.inputs, hop.output)
    return HandWrittenNode(echo, tuple(_artifact(node, directory) for node in plan.nodes))


def load_jit(path: str) -> Callable[[list[Any]], Any]:
    """``call(arrays)``: the TorchScript module at ``path`` on ``arrays``, as a numpy array."""
    import torch

    torch.set_num_threads(1)
    module = torch.jit.load(path).eval()

    def call(arrays: list[Any]) -> Any:
        with torch.no_grad():
            result = module(*[torch.from_numpy(values) for values in arrays])
        return result.numpy()

    return call


def load_onnx(path: str) -> Callable[[list[Any]], Any]:
    """``call(arrays)``: the ONNX model at ``path`` on ``arrays`` (its inputs in order), its
    first output."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [given.name for given in session.get_inputs()]

    def call(arrays: list[Any]) -> Any:
        return session.run(None, dict(zip(names, arrays, strict=True)))[0]

    return call


LOADERS = {"jit": load_jit, "onnx": load_onnx}


def load_calls(artifacts: Sequence[tuple[str, str]]) -> Callable[[list[Any]], Any]:
    """The artifacts' calls, each on the previous one's output, as one ``call(arrays)``."""
    calls = [LOADERS[backend](path) for backend, path in artifacts]
    if len(calls) == 1:
        return calls[0]

    def call(arrays: list[Any]) -> Any:
        for one in calls:
            arrays = [one(arrays)]
        return arrays[0]

    return call


def make_hand_written_node(node: HandWrittenNode, namespace: str, context: Any) -> Any:
    """The rclpy node of ``node`` in ``namespace`` on ``context``."""
    import numpy as np
    from rclpy.node import Node
    from std_msgs.msg import Float32MultiArray

    from leapp_ros.plan.pipeline import PUBLISHER_QOS, SUBSCRIPTION_QOS
    from leapp_ros.plan.settings import qos_profile

    call = load_calls(node.artifacts)
    ros_node = Node(node.name, namespace=namespace, context=context)
    publish = ros_node.create_publisher(
        Float32MultiArray, node.echo.output[0], qos_profile(PUBLISHER_QOS)
    ).publish
    latest: list[Any] = [None] * len(node.echo.inputs)  # this tick's messages

    def receiver(index: int) -> Callable[[Any], None]:
        def on_message(message: Any) -> None:
            latest[index] = message
            if any(given is None for given in latest):
                return
            arrays = [np.frombuffer(given.data, np.float32) for given in latest]
            latest[:] = [None] * len(latest)
            result = call(arrays)
            publish(Float32MultiArray(data=array.array("f", result.tobytes())))

        return on_message

    for index, (topic, _) in enumerate(node.echo.inputs):
        ros_node.create_subscription(
            Float32MultiArray, topic, receiver(index), qos_profile(SUBSCRIPTION_QOS)
        )
    return ros_node


def _artifact_argument(text: str) -> tuple[str, str]:
    backend, _, path = text.partition(":")
    if backend not in LOADERS or not path:
        raise argparse.ArgumentTypeError(f"expected BACKEND:PATH, BACKEND one of {list(LOADERS)}")
    return backend, path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--input", type=parse_port, action="append", required=True)
    parser.add_argument("--output", type=parse_port, required=True)
    parser.add_argument("--artifact", type=_artifact_argument, action="append", required=True)
    args = parser.parse_args(argv)
    node = HandWrittenNode(
        EchoNode(args.name, tuple(args.input), args.output), tuple(args.artifact)
    )

    from leapp_ros.node.executor import run_nodes

    def build(context: Any, nodes: list[Any]) -> None:
        nodes.append(make_hand_written_node(node, args.namespace, context))
        print(READY.format(name=node.name), flush=True)

    return run_nodes("hand_written_nodes", [sys.argv[0]], build, whole_process=True)


if __name__ == "__main__":
    sys.exit(main())
