"""Benchmark the seed pipeline as a live ROS 2 graph, against leapp.Pipeline.step in-process.

    python bench/ros_latency.py [--samples N] [--seconds S]

For each deployment shape it prints the figures below. "composed" is every pipeline node in one
process on one executor, with this benchmark's client node composed into that same process
(the way an in-process consumer such as a controller node sees the pipeline); "one process per
node" runs each pipeline node in its own process (``leapp-ros run``) and the client in this one.

- end-to-end latency from publishing ``state`` and ``velocity`` to receiving ``action``
  (median and p99 over ``--samples`` ping-pongs),
- the highest input rate (pairs per second) sustained with less than 1 % of actions lost,

and the same step's median in-process (``leapp.Pipeline.step``) with the ratio. Targets on this
project's 2-core reference machine: composed median <= 100 us, one process per node <= 300 us,
>= 1 kHz sustained. ROS discovery stays on this machine (``ROS_AUTOMATIC_DISCOVERY_RANGE=
LOCALHOST``) in a domain of its own (``ROS_DOMAIN_ID``, default derived from the process id).

Each mode is measured with the system's defaults, and with the nodes holding a CPU latency
request of ``--cpu-latency-us`` (default 0; the nodes' ``cpu_latency_us`` parameter); one
process per node also with each process pinned to a CPU of its own, round robin (``--pin-cpus``
of ``leapp-ros run``, the nodes' ``cpu_affinity``), without and with the request. See
``leapp_ros/cpu_settings.py``. Every message between processes has to wake an idle CPU; on a
virtual machine whose idle CPUs halt at once (this one: ``cpuidle haltpoll`` with
``guest_halt_poll_ns=0``) each wake-up is a trip through the hypervisor, which the request
avoids. The request needs write access to ``/dev/cpu_dma_latency`` (root); without it those
rows are skipped, with the reason.
"""

from __future__ import annotations

import argparse
import array
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))
from export import measure_step  # noqa: E402  (bench/export.py: Pipeline.step in-process)

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 80))

TARGETS_US = {"composed": 100.0, "one process per node": 300.0}
TARGET_RATE_HZ = 1000.0
RATES_HZ = (250, 500, 1000, 2000, 4000)


def export_seed(folder: Path) -> Path:
    import torch
    import torch_pipeline as seed

    import leapp

    torch.manual_seed(0)
    leapp.start(name="torch_pipeline", save_path=folder)
    seed.run_policy(seed.Policy().eval(), seed.preprocess(torch.zeros(6), torch.zeros(3)))
    leapp.stop()
    return leapp.compile_graph().path


class Client:
    """The test side: publishes the two inputs, counts and times ``action`` messages. With a
    ``spec``, the pipeline's nodes are composed into this process (with ``cpu_latency_us``)."""

    def __init__(self, namespace: str, spec=None, cpu_latency_us: int = -1):
        import rclpy
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Float32MultiArray

        from leapp_ros.executor import make_executor

        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=int(os.environ["ROS_DOMAIN_ID"]))
        self.node = rclpy.create_node("bench_client", context=self.context)
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        topic = f"{namespace}/preprocess"
        self.state_pub = self.node.create_publisher(Float32MultiArray, f"{topic}/state", reliable)
        self.velocity_pub = self.node.create_publisher(
            Float32MultiArray, f"{topic}/velocity", reliable
        )
        self.received = 0
        self.last_ns = 0
        self.node.create_subscription(
            Float32MultiArray, f"{namespace}/policy/action", self._on_action, reliable
        )
        self.executor = make_executor(self.context)
        self.executor.add_node(self.node)
        self.pipeline_nodes = (
            compose_pipeline(spec, namespace, self.context, cpu_latency_us) if spec else []
        )
        for node in self.pipeline_nodes:
            self.executor.add_node(node)
        self.state = Float32MultiArray(data=array.array("f", [0.1] * 6))
        self.velocity = Float32MultiArray(data=array.array("f", [0.2] * 3))

    def _on_action(self, _message) -> None:
        self.received += 1
        self.last_ns = time.perf_counter_ns()

    def publish_pair(self) -> None:
        self.state_pub.publish(self.state)
        self.velocity_pub.publish(self.velocity)

    def spin_until(self, count: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.received < count:
            if time.monotonic() > deadline:
                return False
            self.executor.spin_once(timeout_sec=0.01)
        return True

    def prime(self, timeout_s: float = 20.0) -> None:
        """Publish until the graph answers (best-effort subscriptions may drop the first)."""
        deadline = time.monotonic() + timeout_s
        while self.received == 0:
            if time.monotonic() > deadline:
                raise SystemExit("the graph never answered on policy/action")
            self.publish_pair()
            self.spin_until(1, 0.2)
        self.spin_until(self.received + 10**6, 0.3)  # drain late answers

    def latency_us(self, samples: int) -> tuple[float, float, int]:
        times, lost = [], 0
        for _ in range(samples):
            expected = self.received + 1
            began = time.perf_counter_ns()
            self.publish_pair()
            if self.spin_until(expected, 1.0):
                times.append((self.last_ns - began) / 1000.0)
            else:
                lost += 1
                self.received = expected
        times.sort()
        return statistics.median(times), times[int(len(times) * 0.99)], lost

    def loss_at(self, rate_hz: float, seconds: float) -> float:
        start = self.received
        period = 1.0 / rate_hz
        sent = 0
        began = time.perf_counter()
        while time.perf_counter() - began < seconds:
            self.publish_pair()
            sent += 1
            next_at = began + sent * period
            while time.perf_counter() < next_at:
                self.executor.spin_once(timeout_sec=0)
        self.spin_until(start + sent, 0.5)
        return 1.0 - (self.received - start) / sent

    def close(self) -> None:
        self.executor.shutdown()
        for node in [*self.pipeline_nodes, self.node]:
            node.destroy_node()
        self.context.try_shutdown()


def compose_pipeline(spec, namespace: str, context, cpu_latency_us: int) -> list:
    """Every pipeline node as a PipelineNode in ``context`` (what leapp_container builds)."""
    from rclpy.parameter import Parameter

    from leapp_ros.node import PipelineNode

    overrides = [
        Parameter("spec_path", Parameter.Type.STRING, str(spec.path)),
        Parameter("cpu_latency_us", Parameter.Type.INTEGER, cpu_latency_us),
    ]
    return [
        PipelineNode(
            model.name,
            namespace=namespace,
            context=context,
            spec=spec,
            parameter_overrides=overrides,
        )
        for model in spec.models
    ]


def exercise(client: Client, samples: int, seconds: float) -> dict:
    try:
        client.prime()
        median, p99, lost = client.latency_us(samples)
        sustained = 0
        for rate in RATES_HZ:
            if client.loss_at(rate, seconds) >= 0.01:
                break
            sustained = rate
    finally:
        client.close()
    return {"median": median, "p99": p99, "lost": lost, "sustained": sustained}


def measure_composed(
    path: Path, samples: int, seconds: float, cpu_latency_us: int, pin_cpus: bool
) -> dict:
    import leapp.spec
    from leapp_ros.plan import make_plan

    spec = leapp.spec.load(path)
    client = Client(make_plan(spec).namespace, spec, cpu_latency_us)
    return exercise(client, samples, seconds)


def measure_processes(
    path: Path, samples: int, seconds: float, cpu_latency_us: int, pin_cpus: bool
) -> dict:
    import leapp.spec
    from leapp_ros.plan import make_plan
    from leapp_ros.processes import plan_processes
    from leapp_ros.runner import RunningGraph

    plan = make_plan(leapp.spec.load(path))
    processes = plan_processes(
        plan, log_level="info", cpu_latency_us=cpu_latency_us, pin_cpus=pin_cpus
    )
    quiet = io.StringIO()
    graph = RunningGraph(processes, name=plan.namespace, stdout=quiet, stderr=quiet)
    with graph.start():
        if not graph.wait_ready(timeout_s=60):
            raise SystemExit(f"graph not ready: {graph.failure}\n{quiet.getvalue()[-2000:]}")
        return exercise(Client(plan.namespace), samples, seconds)


def main() -> None:
    from leapp_ros.cpu_settings import DEVICE, current_limit

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000, help="latency ping-pongs per mode")
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of each rate step")
    parser.add_argument(
        "--cpu-latency-us", type=int, default=0, help="the nodes' CPU latency request (0)"
    )
    args = parser.parse_args()
    requested = f"cpu_latency_us={args.cpu_latency_us}"
    settings = {  # label: (cpu_latency_us, pin_cpus)
        "system defaults": (-1, False),
        "pinned": (-1, True),
        requested: (args.cpu_latency_us, False),
        f"{requested}, pinned": (args.cpu_latency_us, True),
    }
    if not os.access(DEVICE, os.W_OK) or current_limit() is None:
        print(f"{requested}: not measured, {DEVICE} is not writable here (it needs root)")
        del settings[requested], settings[f"{requested}, pinned"]
    measure = {"composed": measure_composed, "one process per node": measure_processes}
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        path = export_seed(Path(folder))
        baseline, _ = measure_step(str(path), 20000)
        for mode, function in measure.items():
            for setting, (microseconds, pin) in settings.items():
                if pin and mode == "composed":
                    continue  # one process: nothing to spread over the CPUs
                results[mode, setting] = function(
                    path, args.samples, args.seconds, microseconds, pin
                )
    print(f"seed pipeline over ROS 2 (ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']}, localhost)")
    print(f"  leapp.Pipeline.step in-process: {baseline:6.1f} us median (the baseline)")
    print(
        f"  {'mode':<21} {'CPU settings':<26} {'median':>9} {'p99':>9} {'vs step':>8} "
        f"{'target':>8}  sustained (< 1 % loss)"
    )
    for (mode, setting), r in results.items():
        verdict = "met" if r["median"] <= TARGETS_US[mode] else "MISSED"
        lost = f"  ({r['lost']} lost)" if r["lost"] else ""
        print(
            f"  {mode:<21} {setting:<26} {r['median']:6.1f} us {r['p99']:6.1f} us "
            f"{r['median'] / baseline:7.1f}x  <= {TARGETS_US[mode]:.0f} us {verdict:<6}"
            f"  {r['sustained']} Hz{lost}"
        )
    print(
        f"  (rates tried: {', '.join(map(str, RATES_HZ))} Hz; target >= {TARGET_RATE_HZ:.0f} Hz)"
    )


if __name__ == "__main__":
    main()
