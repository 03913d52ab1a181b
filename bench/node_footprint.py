"""Peak memory, time to ready and time to stop of one pipeline node process, against a plain
rclpy node.

    python bench/node_footprint.py [--repeat N] [--messages M]

Exports the seed pipeline (examples/torch_pipeline.py: ``preprocess`` TorchScript, ``policy``
ONNX) and starts, one at a time, each node as its own process
(``python -m leapp_ros.node.pipeline_node``), and a plain rclpy + onnxruntime node doing the
policy's work by hand (subscribe
``Float32MultiArray`` obs, run the same ``policy.onnx`` with one thread, publish the action).
For each process it prints:

- ready: seconds from starting the process to its ready line (the leapp node logs it once its
  model is loaded and warmed up and its topics exist; the plain node prints it at the same
  point);
- peak RSS: the kernel's high-water mark of resident memory (``VmHWM``) after ``--messages``
  inputs went through the node and came back;
- stop s: seconds from SIGINT to the process's exit (the leapp nodes say goodbye on their
  status topic, then end without the interpreter's teardown; the plain node is stopped as
  ``rclpy.spin`` is, by KeyboardInterrupt, and ends with a normal interpreter exit);

medians over ``--repeat`` starts, and the ratios of the leapp ONNX node to the plain node.
Targets on this project's 2-core reference machine: an ONNX-only node <= 120 MB and ready
<= 1 s (it never imports torch); TorchScript nodes import torch, as they must. ROS discovery
stays on this machine in a domain of its own.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 80))

TARGET_MB = 120.0
TARGET_READY_S = 1.0
NAMESPACE = "/torch_pipeline"


def export_seed(folder: Path) -> Path:
    import torch

    import leapp

    sys.path.insert(0, str(ROOT / "examples"))
    import torch_pipeline as seed

    torch.manual_seed(0)
    policy = seed.Policy().eval()
    leapp.start(name="torch_pipeline", save_path=folder)
    seed.run_policy(policy, seed.preprocess(torch.zeros(6), torch.zeros(3)))
    leapp.stop()
    return leapp.compile_graph().path.parent


def plain_node(model: str) -> None:
    """The reference: what a hand-written rclpy + onnxruntime node for the policy does."""
    import numpy as np
    import onnxruntime
    import rclpy
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from std_msgs.msg import Float32MultiArray

    rclpy.init()
    node = Node("policy", namespace=NAMESPACE)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    session.run(None, {name: np.zeros(9, np.float32)})
    publisher = node.create_publisher(Float32MultiArray, "policy/action", 1)

    def on_obs(message: Float32MultiArray) -> None:
        (action,) = session.run(None, {name: np.frombuffer(message.data, np.float32)})
        publisher.publish(Float32MultiArray(data=array.array("f", action.tobytes())))

    reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(Float32MultiArray, "preprocess/obs", on_obs, reliable)
    print("plain node ready", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        rclpy.spin(node)


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def measure(argv: list[str], ready_text: str, drive) -> tuple[float, float, int, float]:
    """Start ``argv``, wait for ``ready_text``, drive it, SIGINT it; (ready s, peak RSS MB,
    replies, stop s)."""
    started = time.monotonic()
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT
    )
    try:
        for line in process.stdout:  # type: ignore[union-attr]
            if ready_text in line:
                ready = time.monotonic() - started
                break
        else:
            raise RuntimeError(f"{argv} ended before it was ready")
        replies = drive()
        rss = peak_rss_mb(process.pid)
        stopping = time.monotonic()
        process.send_signal(signal.SIGINT)
        process.wait(timeout=10)
        return ready, rss, replies, time.monotonic() - stopping
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


class Driver:
    """A probe node feeding one node process and counting its replies."""

    def __init__(self, messages: int):
        import rclpy
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Float32MultiArray

        self.messages = messages
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("footprint_driver", context=self.context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.message = Float32MultiArray
        self.publishers = {
            topic: self.node.create_publisher(Float32MultiArray, f"{NAMESPACE}/{topic}", reliable)
            for topic in ("preprocess/state", "preprocess/velocity", "preprocess/obs")
        }
        self.replies: dict[str, int] = {}
        for topic in ("preprocess/obs", "policy/action"):
            self.node.create_subscription(
                Float32MultiArray, f"{NAMESPACE}/{topic}", self._count(topic), reliable
            )

    def _count(self, topic: str):
        def on_message(_: object) -> None:
            self.replies[topic] = self.replies.get(topic, 0) + 1

        return on_message

    def drive(self, inputs: dict[str, int], output: str):
        """A function sending ``messages`` rounds of ``inputs`` (topic -> size), each after
        the previous round's ``output`` came back (or 1 s passed)."""

        def run() -> int:
            publishers = [self.publishers[topic] for topic in inputs]
            deadline = time.monotonic() + 20
            topic = f"{NAMESPACE}/{output}"
            while any(p.get_subscription_count() == 0 for p in publishers) or (
                self.node.count_publishers(topic) == 0
            ):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no subscriber for {list(inputs)} or publisher of {topic}")
                self.executor.spin_once(timeout_sec=0.01)
            end = time.monotonic() + 0.3  # the node's side of discovery too
            while time.monotonic() < end:
                self.executor.spin_once(timeout_sec=0.01)
            self.replies.clear()
            for count in range(self.messages):
                for topic, size in inputs.items():
                    data = array.array("f", [0.1 * count] * size)
                    self.publishers[topic].publish(self.message(data=data))
                wait = time.monotonic() + 0.2
                while self.replies.get(output, 0) <= count and time.monotonic() < wait:
                    self.executor.spin_once(timeout_sec=0.005)
            return self.replies.get(output, 0)

        return run

    def close(self) -> None:
        self.node.destroy_node()
        self.context.try_shutdown()


def params_file(folder: Path) -> Path:
    """Reliable subscriptions for the nodes (no message of the benchmark is lost)."""
    path = folder / "params.yaml"
    topics = ("preprocess/state", "preprocess/velocity", "preprocess/obs")
    lines = ["/**:", "  ros__parameters:", "    qos_overrides:"]
    for topic in topics:
        lines += [
            f"      {NAMESPACE}/{topic}:",
            "        subscription:",
            "          reliability: reliable",
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="starts of each process")
    parser.add_argument("--messages", type=int, default=200, help="inputs per start")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        export = export_seed(Path(tmp))
        params = params_file(Path(tmp))
        driver = Driver(args.messages)

        def leapp_node(node: str) -> list[str]:
            return [sys.executable, "-m", "leapp_ros.node.pipeline_node", "--ros-args", "-r",
                    f"__node:={node}", "-r", f"__ns:={NAMESPACE}", "-p",
                    f"spec_path:={export}", "--params-file", str(params)]  # fmt: skip

        cases = {
            "leapp_node policy (onnx)": (
                leapp_node("policy"),
                "leapp node 'policy' ready",
                driver.drive({"preprocess/obs": 9}, "policy/action"),
            ),
            "plain rclpy + onnxruntime node": (
                [sys.executable, __file__, "--plain-node", str(export / "policy.onnx")],
                "plain node ready",
                driver.drive({"preprocess/obs": 9}, "policy/action"),
            ),
            "leapp_node preprocess (jit)": (
                leapp_node("preprocess"),
                "leapp node 'preprocess' ready",
                driver.drive({"preprocess/state": 6, "preprocess/velocity": 3}, "preprocess/obs"),
            ),
        }
        results: dict[str, list[tuple[float, float, int, float]]] = {n: [] for n in cases}
        for _ in range(args.repeat):  # interleaved, so drifts of the machine hit all alike
            for name, (argv, ready_text, drive) in cases.items():
                results[name].append(measure(argv, ready_text, drive))
                print(f"{name}: {results[name][-1]}", file=sys.stderr, flush=True)
        driver.close()
    print(f"{'process':34} {'ready s':>8} {'peak RSS MB':>12} {'replies':>9} {'stop s':>7}")
    medians = {}
    for name, runs in results.items():
        ready = statistics.median(r[0] for r in runs)
        rss = statistics.median(r[1] for r in runs)
        replies = min(r[2] for r in runs)
        stop = statistics.median(r[3] for r in runs)
        medians[name] = (ready, rss, stop)
        print(f"{name:34} {ready:8.2f} {rss:12.1f} {replies:5d}/{args.messages} {stop:7.2f}")
    onnx, plain = medians["leapp_node policy (onnx)"], medians["plain rclpy + onnxruntime node"]
    print(
        f"leapp onnx node / plain node: ready {onnx[0] / plain[0]:.2f}x, "
        f"peak RSS {onnx[1] / plain[1]:.2f}x, stop {onnx[2] / plain[2]:.2f}x"
    )
    print(
        f"targets: onnx node <= {TARGET_MB:.0f} MB ({'met' if onnx[1] <= TARGET_MB else 'MISSED'})"
        f", ready <= {TARGET_READY_S:.0f} s ({'met' if onnx[0] <= TARGET_READY_S else 'MISSED'})"
    )
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--plain-node":
        plain_node(sys.argv[2])
        sys.exit(0)
    sys.exit(main())
