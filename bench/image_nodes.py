"""The hand-written rclpy node pairs that bench/image_latency.py compares leapp's camera graph
with: what a user writes without leapp, in two forms.

``typed``, as rclpy's tutorials show (the reference of the verdicts):

- encoder: subscribes to the frame as a typed ``sensor_msgs/Image``, views its pixels with
  ``np.frombuffer(msg.data, dtype).reshape(shape)``, calls the encoder's ONNX model
  (``session.run``, 1 intra-op and 1 inter-op thread) and publishes the latent as a
  ``Float32MultiArray`` (``array.array("f", latent.tobytes())``);
- policy: keeps the last typed ``sensor_msgs/JointState``; on each latent, if a joint state
  came since its last command, calls the TorchScript policy (``torch.set_num_threads(1)``,
  ``torch.from_numpy`` under ``torch.no_grad()``) on the latent, positions and velocities (in
  the message's joint order: no name mapping) and publishes the targets as a
  ``Float64MultiArray``.

``raw``, as a skilled user writes them for speed (information only: the least a Python node
pays around the same model calls): the frame and the latent taken as CDR bytes
(``raw=True``), the pixels an ``np.frombuffer`` view of the bytes' tail (where an Image's
``data`` lies), the latent read at its fixed offset, the latent and the targets published as
CDR bytes built with ``struct`` (read back by rclpy as the node starts),
and glibc told to keep frame-sized buffers (:func:`leapp_ros.node.frame_memory.keep_frame_buffers`,
as a leapp node with a frame input does); the joint states stay typed, as in ``typed``.

Topics and QoS are leapp's plan's (publishers reliable, subscriptions best effort, depth 1),
the executor leapp's (:func:`leapp_ros.node.executor.make_executor`). Neither node checks
sizes, encodings or NaN. Each runs in a process of its own::

    python bench/image_nodes.py encoder|policy --namespace NS --spec SPEC [--form raw]

which prints :data:`READY` once its topics exist and runs until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import math
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from model_clock import timed

READY = "hand-written {name} ready"
ROLES = ("encoder", "policy")
FORMS = ("typed", "raw")
_CDR_LE = b"\x00\x01\x00\x00"  # the encapsulation header of little-endian CDR
_LATENT_AT = 16  # a Float32MultiArray's data: header, empty dim list, data_offset, length


def multiarray_cdr(values: Any) -> bytes:
    """The CDR bytes of a ``Float32MultiArray`` (float32 ``values``) or
    ``Float64MultiArray`` (float64), with no layout dimensions."""
    head = _CDR_LE + struct.pack("<III", 0, 0, values.size)
    pad = b"\0" * 4 if values.dtype.itemsize == 8 else b""  # doubles start 8-aligned
    return head + pad + values.tobytes()


def _checked_cdr(message_type: Any, values: Any) -> None:
    """Stop unless rclpy reads :func:`multiarray_cdr`'s bytes back as ``values`` (and as
    long as what it serializes: the padding's bytes are arbitrary)."""
    from rclpy.serialization import deserialize_message, serialize_message

    built = multiarray_cdr(values)
    read = deserialize_message(built, message_type)
    size = len(serialize_message(message_type(data=values.tolist())))
    if list(read.data) != values.tolist() or read.layout.dim or len(built) != size:
        raise SystemExit(f"hand-built CDR of {message_type.__name__} differs from rclpy's")


def _artifact(spec: Any, name: str) -> str:
    model = spec.model(name)
    return str(Path(spec.directory) / model.parameters.model_path)


def encoder_node(spec: Any, namespace: str, context: Any, form: str = "typed") -> Any:
    """The hand-written encoder of ``spec`` (its ``encoder`` node) on ``context``, in
    ``form``."""
    import numpy as np
    import onnxruntime
    from rclpy.node import Node
    from sensor_msgs.msg import Image
    from std_msgs.msg import Float32MultiArray

    from leapp_ros.plan.pipeline import PUBLISHER_QOS, SUBSCRIPTION_QOS
    from leapp_ros.plan.settings import qos_profile

    port = spec.model("encoder").inputs[0]
    shape, dtype = tuple(port.shape), np.dtype(port.dtype)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        _artifact(spec, "encoder"), options, providers=["CPUExecutionProvider"]
    )
    name = session.get_inputs()[0].name
    run = timed(session.run)  # the model call, its CPU time counted (bench/model_clock.py)
    node = Node("encoder", namespace=namespace, context=context)
    publish = node.create_publisher(
        Float32MultiArray, "encoder/latent", qos_profile(PUBLISHER_QOS)
    ).publish

    topic, qos = f"encoder/{port.name}", qos_profile(SUBSCRIPTION_QOS)
    if form == "raw":
        from leapp_ros.node.frame_memory import keep_frame_buffers

        keep_frame_buffers()
        _checked_cdr(Float32MultiArray, np.arange(3, dtype=np.float32))
        count = math.prod(shape)
        size = count * dtype.itemsize

        def on_bytes(payload: bytes) -> None:
            pixels = np.frombuffer(payload, dtype, count, len(payload) - size).reshape(shape)
            latent = run(None, {name: pixels})[0]
            publish(multiarray_cdr(latent))

        node.create_subscription(Image, topic, on_bytes, qos, raw=True)
        return node

    def on_image(message: Any) -> None:
        pixels = np.frombuffer(message.data, dtype).reshape(shape)
        latent = run(None, {name: pixels})[0]
        publish(Float32MultiArray(data=array.array("f", latent.tobytes())))

    node.create_subscription(Image, topic, on_image, qos)
    return node


def policy_node(spec: Any, namespace: str, context: Any, form: str = "typed") -> Any:
    """The hand-written policy of ``spec`` (its ``policy`` node) on ``context``, in
    ``form``."""
    import numpy as np
    import torch
    from rclpy.node import Node
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float32MultiArray, Float64MultiArray

    from leapp_ros.plan.pipeline import PUBLISHER_QOS, SUBSCRIPTION_QOS
    from leapp_ros.plan.settings import qos_profile

    torch.set_num_threads(1)
    module = torch.jit.load(_artifact(spec, "policy")).eval()
    node = Node("policy", namespace=namespace, context=context)
    publish = node.create_publisher(
        Float64MultiArray, "policy/targets", qos_profile(PUBLISHER_QOS)
    ).publish
    joints: list[Any] = [None]  # the last joint state not used yet

    @timed  # the model call, its CPU time counted (bench/model_clock.py)
    def infer(*arrays: Any) -> Any:
        with torch.no_grad():
            return module(*(torch.from_numpy(a) for a in arrays)).numpy()

    def on_joints(message: Any) -> None:
        joints[0] = message

    def on_latent(message: Any) -> None:
        state = joints[0]
        if state is None:
            return
        joints[0] = None
        latent = np.frombuffer(message.data, np.float32)
        position = np.asarray(state.position, np.float32)
        velocity = np.asarray(state.velocity, np.float32)
        data = infer(latent, position, velocity).astype(np.float64)
        publish(Float64MultiArray(data=array.array("d", data.tobytes())))

    def on_latent_bytes(payload: bytes) -> None:
        state = joints[0]
        if state is None:
            return
        joints[0] = None
        latent = np.frombuffer(payload, np.float32, offset=_LATENT_AT)
        position = np.asarray(state.position, np.float32)
        velocity = np.asarray(state.velocity, np.float32)
        publish(multiarray_cdr(infer(latent, position, velocity).astype(np.float64)))

    qos = qos_profile(SUBSCRIPTION_QOS)
    node.create_subscription(JointState, "policy/joint_states", on_joints, qos)
    if form == "raw":
        _checked_cdr(Float64MultiArray, np.arange(3, dtype=np.float64))
        node.create_subscription(
            Float32MultiArray, "encoder/latent", on_latent_bytes, qos, raw=True
        )
    else:
        node.create_subscription(Float32MultiArray, "encoder/latent", on_latent, qos)
    return node


BUILDERS = {"encoder": encoder_node, "policy": policy_node}


@contextlib.contextmanager
def hand_written_pair(spec_path: Path, namespace: str, form: str = "typed") -> Iterator[list[int]]:
    """Both nodes of ``form`` in processes of their own, ready; yields their pids; SIGINT on
    leaving."""
    import select

    from leapp_ros.run.processes import start_process

    argv = [sys.executable, __file__, "--namespace", namespace, "--spec", str(spec_path)]
    argv += ["--form", form]
    started = [start_process([*argv, "--role", role], os.environ) for role in ROLES]
    try:
        deadline = time.monotonic() + 90
        for role, process in zip(ROLES, started, strict=True):
            ready, text = READY.format(name=role).encode(), b""
            while ready not in text:
                left = deadline - time.monotonic()
                if left <= 0 or process.poll() is not None:
                    error = process.stderr.read().decode() if process.poll() is not None else ""
                    raise SystemExit(f"hand-written {role} not ready: {error[-2000:]}")
                if select.select([process.stdout], [], [], left)[0]:
                    text += os.read(process.stdout.fileno(), 4096)
        yield [process.pid for process in started]
    finally:
        for process in started:
            process.send_signal(signal.SIGINT)
        for process in started:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=ROLES, required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--spec", required=True)
    parser.add_argument("--form", choices=FORMS, default="typed")
    args = parser.parse_args(argv)

    import leapp.spec
    from leapp_ros.node.executor import run_nodes

    spec = leapp.spec.load(args.spec)

    def build(context: Any, nodes: list[Any]) -> None:
        nodes.append(BUILDERS[args.role](spec, args.namespace, context, args.form))
        print(READY.format(name=args.role), flush=True)

    return run_nodes("image_nodes", [sys.argv[0]], build, whole_process=True)


if __name__ == "__main__":
    sys.exit(main())
