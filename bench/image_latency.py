"""Benchmark a camera pipeline as a live ROS 2 graph against a hand-written rclpy node pair.

    python bench/image_latency.py [--frames depth,rgb] [--rounds R] [--seconds S]
                                  [--deployment processes|composed|fused]

The pipeline (bench/image_export.py): an encoder (a small CNN, ONNX) on one camera frame, a
policy (TorchScript) on its latent and a ``sensor_msgs/JointState``, publishing joint targets;
per frame: a 480x640 ``32FC1`` depth frame, a 1280x720 ``rgb8`` one. A client
(bench/image_client.py) publishes frames at 30 Hz and joint states at 500 Hz and times, for each
frame, the command it produces. Graphs, each in processes of their own:

- leapp's graph, one process per node (``leapp-ros run``'s processes; ``--deployment``:
  composed in one process, or one fused node);
- the hand-written typed node pair of the same shape (bench/image_nodes.py): typed ``Image``
  subscription, ``np.frombuffer(msg.data)``, the same ONNX and TorchScript calls, the latent
  as a ``Float32MultiArray`` and the command as a ``Float64MultiArray``: the reference of the
  verdicts;
- the same pair in raw CDR (bench/image_nodes.py's ``raw`` form: the frame and the latent
  taken as bytes, the latent and the command published as bytes built by hand): information
  only, the cost outside the model calls of a node written for speed.

Each is checked as they start: the command for the client's frame and joint state equals
eager PyTorch's targets (within :data:`CHECK_TOLERANCE`). Then ``--rounds`` windows of
``--seconds`` per graph, alternating: latency from the frame's publish to its command (median,
p99), the graph's processes' CPU time (all threads) per answered frame, and the CPU time of
their model calls (the encoder's and the policy's), which each process times around exactly
those calls (bench/model_clock.py: leapp's processes run through it, the hand-written nodes
wrap their calls in it): subtracted from CPU per image, it leaves what each graph spends per
image outside the model calls. Verdicts: bench/image_report.py.

ROS discovery stays on this machine in a domain of its own (as bench/ros_latency.py).
"""

from __future__ import annotations

import argparse
import array
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from graph_client import descendants
from image_client import ImageClient, frame_transport
from image_export import FRAMES, JOINTS, Frame, ImageExport, export_image_pipeline
from image_nodes import hand_written_pair
from image_report import HAND, RAW, Result, leapp_label, report
from model_clock import FOLDER, timed_processes
from ros_latency import namespace_of, running_graph, use_own_domain

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
# leapp's processes run through bench/model_clock.py: python -m finds it
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH")])
)
CHECK_TOLERANCE = 1e-5


def inputs(frame: Frame) -> tuple[Any, Any, Any]:
    """The client's frame (pixels in the port's shape), joint positions and velocities."""
    import numpy as np

    random = np.random.default_rng(0)
    if frame.dtype == "uint8":
        pixels = random.integers(0, 256, frame.shape, dtype=np.uint8)
    else:
        pixels = random.uniform(0.2, 8.0, frame.shape).astype(np.float32)
    position = random.uniform(-1, 1, len(JOINTS)).astype(np.float32)
    velocity = random.uniform(-1, 1, len(JOINTS)).astype(np.float32)
    return pixels, position, velocity


def serialized(frame: Frame, pixels: Any, position: Any, velocity: Any) -> tuple[bytes, bytes]:
    """The CDR bytes of the frame's ``Image`` and of the ``JointState``."""
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import Image, JointState

    image = Image(height=frame.height, width=frame.width, encoding=frame.encoding)
    image.step = frame.width * frame.channels * pixels.dtype.itemsize
    image.data = array.array("B", pixels.tobytes())
    joints = JointState(name=list(JOINTS))
    joints.position = array.array("d", position.astype("f8").tobytes())
    joints.velocity = array.array("d", velocity.astype("f8").tobytes())
    return serialize_message(image), serialize_message(joints)


def subjects(export: ImageExport, deployment: Any) -> dict[str, Callable]:
    """leapp's graph in ``deployment`` and the hand-written pairs (typed, raw):
    ``start(namespace)`` is a context manager."""
    import leapp.spec
    from leapp_ros.plan.pipeline import make_plan
    from leapp_ros.run.deployment import GraphOptions
    from leapp_ros.run.processes import plan_processes

    spec = leapp.spec.load(export.spec_path)

    def leapp_graph(namespace: str):
        plan = make_plan(spec, namespace=namespace)
        processes = plan_processes(plan, GraphOptions(deployment, log_level="info"))
        return running_graph(timed_processes(processes))

    return {
        leapp_label(deployment.description): leapp_graph,
        HAND: lambda ns: hand_written_pair(export.spec_path, ns),
        RAW: lambda ns: hand_written_pair(export.spec_path, ns, "raw"),
    }


@contextlib.contextmanager
def checked_client(export: ImageExport, start: Callable, label: str) -> Iterator[ImageClient]:
    """A primed client of the graph ``start`` runs, its command checked against eager."""
    import numpy as np

    pixels, position, velocity = inputs(export.frame)
    frame_bytes, joint_bytes = serialized(export.frame, pixels, position, velocity)
    namespace = namespace_of(label)
    before = set(descendants(os.getpid()))
    with start(namespace):
        client = ImageClient(namespace, f"encoder/{export.frame.name}", frame_bytes, joint_bytes)
        client.pids = [p for p in descendants(os.getpid()) if p not in before]
        try:
            command = np.asarray(client.prime().data)
            expected = export.eager(pixels, position, velocity)
            difference = float(np.max(np.abs(command - expected)))
            if command.shape != expected.shape or difference > CHECK_TOLERANCE:
                raise SystemExit(
                    f"{label}: command {command} differs from eager PyTorch's {expected} "
                    f"by {difference:.3g}"
                )
            yield client
        finally:
            client.close()


def measure(export: ImageExport, deployment: Any, rounds: int, seconds: float) -> dict:
    """Every graph alive (leapp's in ``deployment``), ``rounds`` windows each, alternating (the
    order turns each round); each graph's :class:`Result` by its label."""
    with contextlib.ExitStack() as stack:
        clients = {
            label: stack.enter_context(checked_client(export, start, label))
            for label, start in subjects(export, deployment).items()
        }
        labels = list(clients)
        windows: dict[str, list] = {label: [] for label in labels}
        quiet: dict[str, list] = {label: [] for label in labels}
        for turn in range(rounds):
            first = turn % len(labels)
            for label in labels[first:] + labels[:first]:
                windows[label].append(clients[label].drive(seconds))
                quiet[label].append(clients[label].drive(seconds / 2, frames=False))
    return {label: result_of(windows[label], quiet[label]) for label in labels}


def result_of(windows: list, quiet: list) -> Result:
    """A graph's :class:`Result` from its windows with frames and without (joint states
    only): medians over the windows (see bench/image_report.py)."""
    joint_rate = statistics.median(w.cpu_s / w.seconds for w in quiet)  # CPU s per s
    answered = [w for w in windows if w.latencies]
    per_image = [w.cpu_s / len(w.latencies) * 1e6 for w in answered]
    beyond = [(w.cpu_s - joint_rate * w.seconds) / len(w.latencies) * 1e6 for w in answered]
    model = [w.model_s / len(w.latencies) * 1e6 for w in answered]
    return Result(
        tuple(latency for window in windows for latency in window.latencies),
        sum(window.lost for window in windows),
        statistics.median(per_image),
        joint_rate * 1e6,
        statistics.median(beyond),
        statistics.median(model),
        statistics.median(b - m for b, m in zip(beyond, model, strict=True)),
    )


def main(argv: list[str] | None = None) -> None:
    began = time.monotonic()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", default="depth,rgb", help="of: " + ", ".join(FRAMES))
    parser.add_argument("--rounds", type=int, default=6, help="windows per graph")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each window")
    parser.add_argument(
        "--deployment",
        default="processes",
        choices=["processes", "composed", "fused"],
        help="how leapp's graph runs (default: one process per node)",
    )
    args = parser.parse_args(argv)
    names = args.frames.split(",")
    unknown = [name for name in names if name not in FRAMES]
    if unknown:
        parser.error(f"--frames: no frame {unknown}; frames are {', '.join(FRAMES)}")
    from leapp_ros.run.deployment import Deployment

    use_own_domain()
    load_before = os.getloadavg()
    frames = {}
    with tempfile.TemporaryDirectory() as folder, frame_transport(Path(folder)):
        clocks = Path(folder) / "model_clock"
        clocks.mkdir()
        os.environ[FOLDER] = str(clocks)  # the graphs' processes count their model calls there
        for name in names:
            frame = FRAMES[name]
            export = export_image_pipeline(Path(folder), frame)
            results = measure(export, Deployment.parse(args.deployment), args.rounds, args.seconds)
            title = f"{frame.width}x{frame.height} {frame.encoding} ({name})"
            frames[title] = results
    load = " / ".join(
        f"{a:.1f}-{b:.1f}" for a, b in zip(load_before, os.getloadavg(), strict=True)
    )
    report(frames, f"{load} (1, 5, 15 min averages, before-after)")
    print(f"  (this run: {time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    main()
