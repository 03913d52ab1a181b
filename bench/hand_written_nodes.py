"""Hand-written rclpy policy nodes of a pipeline's shape: the graphs users compare leapp's with.

What a user writes without leapp, in two forms:

- typed (the usual one): a plain rclpy node per pipeline node that subscribes to its inputs as
  ``Float32MultiArray`` messages, and once every input of this tick arrived, converts them
  with ``np.frombuffer(message.data, np.float32)``, calls the node's exported artifact and
  publishes the result as a ``Float32MultiArray`` (``array.array("f", result.tobytes())``);
- raw CDR (what a skilled user writes to skip rclpy's message conversion): the same node with
  ``create_subscription(Float32MultiArray, topic, callback, qos, raw=True)``, whose callback
  gets the serialized CDR ``bytes``; :func:`float32_view` parses the encapsulation header, the
  layout and the sequence length by hand and returns ``np.frombuffer(payload, np.float32,
  count, offset)``, a view of the bytes; the result goes out as ``publisher.publish(bytes)``,
  the CDR of a ``Float32MultiArray`` built by hand (:func:`float32_encoder`). Both are checked
  against rclpy's own serialization when such a node starts (:func:`check_float32_cdr`).

Neither checks NaN or layouts. The artifacts are called the plain way, with one thread each:

- TorchScript: ``torch.jit.load``, ``torch.set_num_threads(1)``, the module called on
  ``torch.from_numpy`` tensors under ``torch.no_grad()``;
- ONNX: ``onnxruntime.InferenceSession`` (1 intra-op, 1 inter-op thread),
  ``session.run(None, {input name: array})``.

Topics, message sizes and QoS are those of the leapp graph
(:func:`leapp_ros.plan.pipeline.make_plan`: publishers reliable, subscriptions best effort,
depth 1), the executor the one leapp's nodes use
(:func:`leapp_ros.node.executor.make_executor`), so the graphs differ by what each node does
per message only:

- :func:`chain_of`: one hand-written node per pipeline node, wired like the pipeline;
- :func:`single_of`: one node from the pipeline's external inputs to its last output, calling
  every artifact in one callback (for a chain of nodes, each fed by the one before).

Composed: :func:`make_hand_written_node` on the client's context. One process per node
(:func:`node_processes` starts them)::

    python bench/hand_written_nodes.py NAME --namespace NS --input TOPIC:SIZE ...
        --output TOPIC:SIZE --artifact BACKEND:PATH ... [--raw]

which prints :data:`READY` once its topics exist and runs until SIGINT/SIGTERM, on the same
process skeleton as leapp's nodes (:func:`leapp_ros.node.executor.run_nodes`).
"""

from __future__ import annotations

import argparse
import array
import contextlib
import itertools
import os
import signal
import struct
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graph_client import Port, ends_of, float_count

READY = "hand-written node {name} ready"  # printed by a node's process once its topics exist


@dataclass(frozen=True)
class HandWrittenNode:
    """A hand-written node: it subscribes to ``inputs`` and publishes ``output``; once every
    input has a new message it calls the ``(backend, path)`` of ``artifacts`` in order, each
    on the previous one's output, the first on its inputs. ``raw``: it takes and sends
    serialized CDR bytes instead of message objects."""

    name: str
    inputs: tuple[Port, ...]
    output: Port
    artifacts: tuple[tuple[str, str], ...]
    raw: bool = False

    def argv(self, namespace: str) -> list[str]:
        topic, size = self.output
        return [
            sys.executable,
            __file__,
            self.name,
            f"--namespace={namespace}",
            *(f"--input={topic}:{size}" for topic, size in self.inputs),
            f"--output={topic}:{size}",
            *(f"--artifact={backend}:{path}" for backend, path in self.artifacts),
            *(["--raw"] if self.raw else []),
        ]


def _artifact(node: Any, directory: Path) -> tuple[str, str]:
    parameters = node.model.parameters
    if parameters.backend not in LOADERS:
        raise ValueError(f"no hand-written call for {node.name}'s backend {parameters.backend!r}")
    return parameters.backend, str(directory / parameters.model_path)


def chain_of(plan: Any, directory: Path, raw: bool = False) -> tuple[HandWrittenNode, ...]:
    """One hand-written node per node of ``plan`` (a
    :class:`leapp_ros.plan.pipeline.PipelinePlan`), named and wired like it, calling its artifact
    (in the export folder ``directory``); ``raw``: the raw CDR form."""
    return tuple(
        HandWrittenNode(
            node.name,
            tuple((port.topic, float_count(port)) for port in node.inputs if port.triggers),
            (node.outputs[0].topic, float_count(node.outputs[0])),
            (_artifact(node, directory),),
            raw,
        )
        for node in plan.nodes
    )


def single_of(plan: Any, directory: Path, raw: bool = False) -> HandWrittenNode:
    """One hand-written node doing the whole of ``plan`` in one callback: a chain whose first
    node reads the external inputs and every later node the first output of the one before;
    ``raw``: the raw CDR form."""
    for before, node in itertools.pairwise(plan.nodes):
        sources = [port.source for port in node.inputs if port.kind != "external"]
        if sources != [f"{before.name}/{before.outputs[0].port}"]:
            raise ValueError(f"{node.name} is not fed by {before.name} alone; not a chain")
    if any(port.kind != "external" for port in plan.nodes[0].inputs):
        raise ValueError(f"{plan.nodes[0].name} has inputs other than external ones")
    ends = ends_of(plan)
    artifacts = tuple(_artifact(node, directory) for node in plan.nodes)
    return HandWrittenNode("hand_written", ends.inputs, ends.output, artifacts, raw)


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


CDR_LITTLE_ENDIAN = b"\x00\x01\x00\x00"  # encapsulation header: plain CDR, little-endian
_U32 = struct.Struct("<I")


def float32_view(payload: bytes) -> Any:
    """The ``data`` of the serialized ``Float32MultiArray`` ``payload`` as a read-only float32
    NumPy view of it: after the 4-byte encapsulation header, ``layout.dim`` (a sequence of
    ``{string label, uint32 size, uint32 stride}``), ``layout.data_offset`` (uint32), then the
    data's length (uint32) and its floats (4-aligned, as every field here)."""
    import numpy as np

    if payload[:4] != CDR_LITTLE_ENDIAN:
        raise ValueError(f"not little-endian plain CDR: header {payload[:4].hex()}")
    (dims,) = _U32.unpack_from(payload, 4)
    offset = 8
    for _ in range(dims):
        (label,) = _U32.unpack_from(payload, offset)  # its length, the NUL included
        offset = (offset + 4 + label + 3) & ~3  # past the label, aligned for size and stride
        offset += 8
    (count,) = _U32.unpack_from(payload, offset + 4)  # after layout.data_offset
    return np.frombuffer(payload, np.float32, count, offset + 8)


def float32_encoder(size: int) -> Callable[[Any], bytes]:
    """``encode(values)``: the CDR bytes of a ``Float32MultiArray`` with an empty layout and
    the ``size`` float32 ``values`` (a NumPy array) as data."""
    prefix = CDR_LITTLE_ENDIAN + struct.pack("<III", 0, 0, size)  # no dims, data_offset, length

    def encode(values: Any) -> bytes:
        return prefix + values.tobytes()

    return encode


def check_float32_cdr() -> None:
    """Raise unless :func:`float32_encoder` writes what rclpy's ``serialize_message`` writes,
    and :func:`float32_view` reads what it writes, with and without layout dims."""
    import numpy as np
    from rclpy.serialization import deserialize_message, serialize_message
    from std_msgs.msg import Float32MultiArray, MultiArrayDimension

    values = np.arange(1, 6, dtype=np.float32) / 3
    message = Float32MultiArray(data=array.array("f", values.tobytes()))
    encoded = float32_encoder(values.size)(values)
    if encoded != serialize_message(message):
        raise RuntimeError("float32_encoder disagrees with serialize_message; the bench is wrong")
    decoded = deserialize_message(encoded, Float32MultiArray)
    if np.frombuffer(decoded.data, np.float32).tolist() != values.tolist():
        raise RuntimeError("deserialize_message reads other values; float32_encoder is wrong")
    for labels in ((), ("x",), ("ab", "joints_1")):
        message.layout.dim = [MultiArrayDimension(label=t, size=5, stride=5) for t in labels]
        message.layout.data_offset = len(labels)
        if float32_view(serialize_message(message)).tolist() != values.tolist():
            raise RuntimeError(f"float32_view misreads a layout of dims {labels}; it is wrong")


def make_hand_written_node(node: HandWrittenNode, namespace: str, context: Any) -> Any:
    """The rclpy node of ``node`` in ``namespace`` on ``context``."""
    from rclpy.node import Node
    from std_msgs.msg import Float32MultiArray

    from leapp_ros.plan.pipeline import PUBLISHER_QOS, SUBSCRIPTION_QOS
    from leapp_ros.plan.settings import qos_profile

    call = load_calls(node.artifacts)
    ros_node = Node(node.name, namespace=namespace, context=context)
    topic, size = node.output
    publish = ros_node.create_publisher(
        Float32MultiArray, topic, qos_profile(PUBLISHER_QOS)
    ).publish
    receiver = _raw_receiver if node.raw else _typed_receiver
    on_message = receiver(len(node.inputs), call, publish, size)
    for index, (topic, _) in enumerate(node.inputs):
        ros_node.create_subscription(
            Float32MultiArray,
            topic,
            on_message(index),
            qos_profile(SUBSCRIPTION_QOS),
            raw=node.raw,
        )
    return ros_node


def _typed_receiver(inputs: int, call: Callable, publish: Callable, size: int) -> Callable:
    """``on_message(index)``: the callback of input ``index`` of a typed node."""
    import numpy as np
    from std_msgs.msg import Float32MultiArray

    latest: list[Any] = [None] * inputs  # this tick's messages

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

    return receiver


def _raw_receiver(inputs: int, call: Callable, publish: Callable, size: int) -> Callable:
    """``on_message(index)``: the callback of input ``index`` of a raw CDR node (it gets and
    publishes ``bytes``)."""
    check_float32_cdr()
    # torch.from_numpy warns once about a view of immutable bytes; the module only reads it
    warnings.filterwarnings("ignore", "The given NumPy array is not writable")
    encode = float32_encoder(size)
    latest: list[bytes | None] = [None] * inputs  # this tick's payloads

    def receiver(index: int) -> Callable[[bytes], None]:
        def on_message(payload: bytes) -> None:
            latest[index] = payload
            if any(given is None for given in latest):
                return
            arrays = [float32_view(given) for given in latest]
            latest[:] = [None] * len(latest)
            publish(encode(call(arrays)))

        return on_message

    return receiver


@contextlib.contextmanager
def node_processes(nodes: Sequence[HandWrittenNode], namespace: str) -> Iterator[None]:
    """Each of ``nodes`` in a Python process of its own, every one ready when this enters;
    stopped with SIGINT when it leaves."""
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
                    raise SystemExit(f"hand-written node {node.name} not ready: {error[-2000:]}")
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


def parse_port(text: str) -> Port:
    topic, _, size = text.rpartition(":")
    return topic, int(size)


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
    parser.add_argument("--raw", action="store_true", help="take and send serialized CDR bytes")
    args = parser.parse_args(argv)
    node = HandWrittenNode(
        args.name, tuple(args.input), args.output, tuple(args.artifact), args.raw
    )

    from leapp_ros.node.executor import run_nodes

    def build(context: Any, nodes: list[Any]) -> None:
        nodes.append(make_hand_written_node(node, args.namespace, context))
        print(READY.format(name=node.name), flush=True)

    return run_nodes("hand_written_nodes", [sys.argv[0]], build, whole_process=True)


if __name__ == "__main__":
    sys.exit(main())
