"""Benchmark the seed pipeline as a live ROS 2 graph, against references measured in the same run.

    python bench/ros_latency.py [--samples N] [--rounds R] [--seconds S] [--no-extras]

Deployment shapes ("modes"), each driven by this benchmark's client node, which publishes
``state`` and ``velocity`` and times the ``action`` that comes back:

- composed: every pipeline node in one process on one executor, with the client composed into
  that same process (the way an in-process consumer such as a controller node sees it);
- one process per node: each pipeline node in its own process (``leapp-ros run``), the client
  in this one;
- fused: the whole pipeline in one node (``leapp_ros.fused.FusedPipelineNode``), composed with
  the client, and in a process of its own (skipped, with the reason, where that module is
  missing).

References, measured in this run on this machine (no figure of another machine is printed):

- plain rclpy echo graphs of the same shape (bench/rclpy_reference.py: the same topics,
  message sizes, QoS and executor, no model): the chain (one echo node per pipeline node) and
  the hop pair (client -> one echo node -> client), each composed and across processes;
- the bare model calls (bench/bare_calls.py: hand-written, and the cheapest entries) and
  ``leapp.Pipeline.step``.

Floors: composed = plain composed chain + bare calls; one process per node = plain chain across
processes + bare calls; fused = hop pair (composed, resp. own process) + 1.5 x Pipeline.step.
Bare calls are the cheapest entries for the verdicts (the hand-written form's floor is printed
beside). Limits: composed <= 1.3x its floor, one process per node <= 1.2x, fused <= 1.0x, and
>= 1 kHz sustained with < 1 % of actions lost in every mode.

Latencies (median and p99 over ``--samples`` ping-pongs) of all subjects with the system's
defaults are taken in ``--rounds`` alternating rounds, the in-process calls between them, so
that the noise of a shared machine hits all alike; the sustained rate is tried one subject at a
time (``--seconds`` per rate step). Optional extra rows, after those and one at a time: the
nodes holding a CPU latency request of ``--cpu-latency-us`` (the nodes' ``cpu_latency_us``;
needs write access to ``/dev/cpu_dma_latency``, else skipped with the reason), and one process
per node with each process pinned to a CPU of its own (``--pin-cpus`` of ``leapp-ros run``).
See ``leapp_ros/cpu_settings.py``. ROS discovery stays on this machine
(``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``) in a domain of its own (``ROS_DOMAIN_ID``,
default derived from the process id).
"""

from __future__ import annotations

import argparse
import array
import contextlib
import io
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))
from bare_calls import (  # noqa: E402
    CHEAPEST,
    HAND_WRITTEN,
    load_bare_calls,
    percentiles,
    time_interleaved,
)
from export import STEP, load_step  # noqa: E402
from rclpy_reference import EchoNode, chain_of, echo_processes, hop_of, make_echo_node  # noqa: E402

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 80))

TARGET_RATE_HZ = 1000.0
RATES_HZ = (250, 500, 1000, 2000, 4000)
CHAIN, CHAIN_PROCESSES = "plain rclpy chain, composed", "plain rclpy chain, one process per node"
HOP, HOP_PROCESS = "plain rclpy hop pair, composed", "plain rclpy hop pair, own process"
COMPOSED, PROCESSES = "composed", "one process per node"
FUSED, FUSED_PROCESS = "fused, composed", "fused, own process"
REFERENCES = (CHAIN, CHAIN_PROCESSES, HOP, HOP_PROCESS)
# mode: (plain rclpy reference, in-process cost added: "bare" calls or STEP, its factor, limit)
FLOORS = {
    COMPOSED: (CHAIN, "bare", 1.0, 1.3),
    PROCESSES: (CHAIN_PROCESSES, "bare", 1.0, 1.2),
    FUSED: (HOP, STEP, 1.5, 1.0),
    FUSED_PROCESS: (HOP_PROCESS, STEP, 1.5, 1.0),
}
DEFAULTS = "system defaults"


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
    """The test side: publishes the external inputs of ``ends`` (an echo node from the
    pipeline's inputs to its output), counts and times the output. ``build(context)`` makes
    nodes to compose into this process, on the client's executor."""

    def __init__(self, namespace: str, ends: EchoNode, build: Callable | None = None):
        import rclpy
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Float32MultiArray

        from leapp_ros.executor import make_executor

        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=int(os.environ["ROS_DOMAIN_ID"]))
        self.node = rclpy.create_node("bench_client", namespace=namespace, context=self.context)
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self.inputs = [
            (
                self.node.create_publisher(Float32MultiArray, topic, reliable),
                Float32MultiArray(data=array.array("f", [0.1 * (index + 1)] * size)),
            )
            for index, (topic, size) in enumerate(ends.inputs)
        ]
        self.received = 0  # answers, or the ones given up on (``sample``)
        self.answers = 0  # outputs received
        self.last_ns = 0
        self.times: list[float] = []
        self.lost = 0
        self.node.create_subscription(Float32MultiArray, ends.output[0], self._on_output, reliable)
        self.executor = make_executor(self.context)
        self.composed = build(self.context) if build else []
        for node in [self.node, *self.composed]:
            self.executor.add_node(node)

    def _on_output(self, _message) -> None:
        self.received += 1
        self.answers += 1
        self.last_ns = time.perf_counter_ns()

    def publish(self) -> None:
        for publisher, message in self.inputs:
            publisher.publish(message)

    def spin_until(self, count: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.received < count:
            if time.monotonic() > deadline:
                return False
            self.executor.spin_once(timeout_sec=0.01)
        return True

    def prime(self, timeout_s: float = 30.0) -> None:
        """Publish until the graph answers (best-effort subscriptions may drop the first)."""
        deadline = time.monotonic() + timeout_s
        while self.received == 0:
            if time.monotonic() > deadline:
                raise SystemExit(f"{self.node.get_namespace()}: the graph never answered")
            self.publish()
            self.spin_until(1, 0.2)
        self.spin_until(self.received + 10**6, 0.3)  # drain late answers

    def answers_per_pair(self, pairs: int = 5, wait_s: float = 0.1) -> float:
        """Outputs per input pair, one pair at a time (1.0 for a graph that answers each
        pair once; more means it answers a pair before all of it arrived, which the
        ping-pong would time, and the rate test would count)."""
        self.spin_until(self.received + 10**6, 0.3)  # drain late answers
        before = self.answers
        for _ in range(pairs):
            self.publish()
            self.spin_until(self.received + 10**6, wait_s)
        return (self.answers - before) / pairs

    def sample(self, count: int) -> None:
        """``count`` ping-pongs, appended to ``times`` (us) or counted in ``lost``."""
        for _ in range(count):
            expected = self.received + 1
            began = time.perf_counter_ns()
            self.publish()
            if self.spin_until(expected, 1.0):
                self.times.append((self.last_ns - began) / 1000.0)
            else:
                self.lost += 1
                self.received = expected

    def loss_at(self, rate_hz: float, seconds: float) -> float:
        start = self.received
        period = 1.0 / rate_hz
        sent = 0
        began = time.perf_counter()
        while time.perf_counter() - began < seconds:
            self.publish()
            sent += 1
            next_at = began + sent * period
            while (left := next_at - time.perf_counter()) > 0:
                self.executor.spin_once(timeout_sec=left)  # waits, leaving the CPU to nodes
        self.spin_until(start + sent, 0.5)
        return 1.0 - (self.received - start) / sent

    def sustained_hz(self, seconds: float) -> int:
        self.spin_until(self.received + 10**6, 0.3)
        sustained = 0
        for rate in RATES_HZ:
            if self.loss_at(rate, seconds) >= 0.01:
                break
            sustained = rate
        return sustained

    def close(self) -> None:
        self.executor.shutdown()
        for node in [*self.composed, self.node]:
            node.destroy_node()
        self.context.try_shutdown()


def parameters(spec_path: Path, cpu_latency_us: int) -> list:
    from rclpy.parameter import Parameter

    return [
        Parameter("spec_path", Parameter.Type.STRING, str(spec_path)),
        Parameter("cpu_latency_us", Parameter.Type.INTEGER, cpu_latency_us),
    ]


@contextlib.contextmanager
def composed_client(spec, namespace: str, build: Callable) -> Iterator[Client]:
    """A primed client with ``build(context, plan)``'s nodes composed into its executor."""
    from leapp_ros.plan import make_plan

    plan = make_plan(spec, namespace=namespace)
    client = Client(namespace, hop_of(plan), lambda context: build(context, plan))
    try:
        client.prime()
        yield client
    finally:
        client.close()


@contextlib.contextmanager
def separate_client(spec, namespace: str, start: Callable) -> Iterator[Client]:
    """A primed client of the processes that ``start(plan)`` (a context manager) runs."""
    from leapp_ros.plan import make_plan

    plan = make_plan(spec, namespace=namespace)
    with start(plan):
        client = Client(namespace, hop_of(plan))
        try:
            client.prime()
            yield client
        finally:
            client.close()


@contextlib.contextmanager
def running_graph(processes) -> Iterator[None]:
    from leapp_ros.runner import RunningGraph

    quiet = io.StringIO()
    graph = RunningGraph(processes, name="bench", stdout=quiet, stderr=quiet)
    with graph.start():
        if not graph.wait_ready(timeout_s=90):
            raise SystemExit(f"graph not ready: {graph.failure}\n{quiet.getvalue()[-2000:]}")
        yield


def make_subjects(spec, cpu_latency_us: int = -1, pin: bool = False) -> dict[str, Callable]:
    """Every graph of this bench by label: ``enter(namespace)`` is a context manager that
    yields a primed :class:`Client`. ``cpu_latency_us`` < 0: no CPU latency request."""
    from leapp_ros.intra_process import IntraProcessBus
    from leapp_ros.node import PipelineNode
    from leapp_ros.processes import plan_processes

    latency = None if cpu_latency_us < 0 else cpu_latency_us

    def echoes(chain: bool) -> Callable:
        return (lambda plan: chain_of(plan)) if chain else (lambda plan: (hop_of(plan),))

    def composed_echoes(chain: bool) -> Callable:
        nodes = echoes(chain)
        return lambda ns: composed_client(
            spec, ns, lambda context, plan: [make_echo_node(e, ns, context) for e in nodes(plan)]
        )

    def separate_echoes(chain: bool) -> Callable:
        nodes = echoes(chain)
        return lambda ns: separate_client(spec, ns, lambda plan: echo_processes(nodes(plan), ns))

    def pipeline_nodes(context, plan) -> list:
        """As leapp_container composes them: one intra-process bus for the pipeline's nodes
        (the client stays on the middleware, as another component would)."""
        overrides = parameters(spec.path, cpu_latency_us)
        bus = IntraProcessBus()
        return [
            PipelineNode(
                node.name,
                namespace=plan.namespace,
                context=context,
                spec=spec,
                parameter_overrides=overrides,
                bus=bus,
            )
            for node in plan.nodes
        ]

    def fused_node(context, plan) -> list:
        from leapp_ros.fused import FusedPipelineNode

        overrides = parameters(spec.path, cpu_latency_us)
        return [
            FusedPipelineNode(
                node_name="leapp_fused",
                namespace=plan.namespace,
                context=context,
                spec=spec,
                parameter_overrides=overrides,
            )
        ]

    def graph(**options) -> Callable:
        def start(plan):
            processes = plan_processes(
                plan, log_level="info", cpu_latency_us=latency, pin_cpus=pin, **options
            )
            return running_graph(processes)

        return lambda ns: separate_client(spec, ns, start)

    return {
        CHAIN: composed_echoes(chain=True),
        CHAIN_PROCESSES: separate_echoes(chain=True),
        HOP: composed_echoes(chain=False),
        HOP_PROCESS: separate_echoes(chain=False),
        COMPOSED: lambda ns: composed_client(spec, ns, pipeline_nodes),
        PROCESSES: graph(),
        FUSED: lambda ns: composed_client(spec, ns, fused_node),
        FUSED_PROCESS: graph(fused=True),
    }


def namespace_of(label: str, setting: str = DEFAULTS) -> str:
    """A namespace of its own for each graph, so that graphs alive together never mix."""
    words = f"{label} {setting}".replace(",", " ").replace("=", " ").split()
    return "/bench_" + "_".join(word for word in words if word.isidentifier() or word.isdigit())


def fused_missing() -> str | None:
    """Why fused mode cannot be measured here, or None."""
    try:
        import leapp_ros.fused  # noqa: F401
    except ImportError as e:
        return f"leapp_ros.fused is not importable here ({e})"
    return None


def measure_defaults(path: Path, spec, args, skip: set[str]) -> tuple[dict, dict]:
    """Every subject with the system's defaults, alive together; latencies in alternating
    rounds with the in-process calls; then each one's sustained rate, one at a time."""
    subjects = {k: v for k, v in make_subjects(spec).items() if k not in skip}
    calls = {STEP: load_step(str(path)), **load_bare_calls(path)}
    with contextlib.ExitStack() as stack:
        clients = {
            label: stack.enter_context(enter(namespace_of(label)))
            for label, enter in subjects.items()
        }
        per_round = max(1, args.samples // args.rounds)

        def ros_round() -> None:
            for client in clients.values():
                client.sample(per_round)

        inprocess = time_interleaved(calls, 5 * args.samples, args.rounds, each_round=ros_round)
        results = {
            label: {
                "timing": percentiles(client.times),
                "lost": client.lost,
                "answers": client.answers_per_pair(),
                "sustained": client.sustained_hz(args.seconds),
            }
            for label, client in clients.items()
        }
    return inprocess, results


def measure_extra(spec, label: str, setting: str, cpu_latency_us: int, pin: bool, args) -> dict:
    """One subject alone, with CPU settings other than the defaults."""
    enter = make_subjects(spec, cpu_latency_us, pin)[label]
    with enter(namespace_of(label, setting)) as client:
        client.sample(args.samples)
        answers = client.answers_per_pair()
        sustained = client.sustained_hz(args.seconds)
    return {
        "timing": percentiles(client.times),
        "lost": client.lost,
        "answers": answers,
        "sustained": sustained,
    }


def floors(inprocess: dict, results: dict) -> dict[str, tuple[float, float | None, str]]:
    """mode: (floor with the cheapest bare calls, with the hand-written ones, in words)."""
    found = {}
    for mode, (reference, added, factor, _) in FLOORS.items():
        if reference not in results:
            continue
        plain = results[reference]["timing"].median
        if added == STEP:
            step = inprocess[STEP].median
            found[mode] = (
                plain + factor * step,
                None,
                f"{reference} {plain:.1f} us + {factor} x Pipeline.step {step:.1f} us",
            )
        else:
            cheap, hand = inprocess[CHEAPEST].median, inprocess[HAND_WRITTEN].median
            found[mode] = (
                plain + cheap,
                plain + hand,
                f"{reference} {plain:.1f} us + bare calls {cheap:.1f} us (cheapest)",
            )
    return found


def report(inprocess: dict, results: dict, extras: dict, skipped: dict[str, str]) -> None:
    domain = os.environ["ROS_DOMAIN_ID"]
    print(f"seed pipeline over ROS 2 (ROS_DOMAIN_ID={domain}, localhost); references: this run")
    print("  in-process calls (median / p99):")
    for label, timing in inprocess.items():
        print(f"    {label:<62} {timing.median:7.1f} / {timing.p99:7.1f} us")
    print(f"  plain rclpy references ({DEFAULTS}):   median       p99   sustained (< 1 % loss)")
    for label in REFERENCES:
        if label in results:
            result = results[label]
            print(f"    {label:<40} {timings(result)}   {result['sustained']} Hz{lost(result)}")
    found = floors(inprocess, results)
    print("  floors:")
    for mode, (floor, hand, words) in found.items():
        beside = f" (with the hand-written bare calls: {hand:.1f} us)" if hand is not None else ""
        print(f"    {mode:<20} {floor:7.1f} us = {words}{beside}")
    print(
        f"  {'mode':<20} {'CPU settings':<26} {'median':>10} {'p99':>10} {'x floor':>8} "
        f"{'limit':>7}          sustained (< 1 % loss)"
    )
    modes = [(m, DEFAULTS) for m in FLOORS if m in results] + list(extras)
    for mode, setting in modes:
        result = results[mode] if setting == DEFAULTS else extras[mode, setting]
        floor, _, _ = found[mode]
        limit = FLOORS[mode][3]
        ratio = result["timing"].median / floor
        verdict = ("met" if ratio <= limit else "MISSED") if setting == DEFAULTS else "(extra)"
        rate = "met" if result["sustained"] >= TARGET_RATE_HZ else "MISSED"
        if result["answers"] > 1.01:
            verdict = rate = "INVALID"
        print(
            f"  {mode:<20} {setting:<26} {timings(result)} {ratio:7.2f}x <= {limit:<4} "
            f"{verdict:<7}  {result['sustained']:>4} Hz {rate}{lost(result)}"
        )
    for what, why in skipped.items():
        print(f"  {what}: not measured, {why}")
    print(f"  (rates tried: {', '.join(map(str, RATES_HZ))} Hz; limit >= {TARGET_RATE_HZ:.0f} Hz)")


def timings(result: dict) -> str:
    return f"{result['timing'].median:7.1f} us {result['timing'].p99:7.1f} us"


def lost(result: dict) -> str:
    """Notes on a row: ping-pongs that timed out, answers beyond one per input pair."""
    notes = [f"{result['lost']} timed out"] if result["lost"] else []
    if result["answers"] > 1.01:
        notes.append(
            f"INVALID: {result['answers']:.2f} answers per input pair: the ping-pong timed "
            "the first of them, the rate test counted each"
        )
    return f"  ({'; '.join(notes)})" if notes else ""


def main() -> None:
    from leapp_ros.cpu_settings import DEVICE, current_limit

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000, help="latency ping-pongs per graph")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds of them")
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of each rate step")
    parser.add_argument(
        "--cpu-latency-us", type=int, default=0, help="the extra rows' CPU latency request (0)"
    )
    parser.add_argument("--no-extras", action="store_true", help="system defaults only")
    args = parser.parse_args()

    import leapp.spec

    requested = f"cpu_latency_us={args.cpu_latency_us}"
    extras = {  # (mode, setting): (cpu_latency_us, pin_cpus)
        (PROCESSES, "pinned"): (-1, True),
        (COMPOSED, requested): (args.cpu_latency_us, False),
        (PROCESSES, requested): (args.cpu_latency_us, False),
        (PROCESSES, f"{requested}, pinned"): (args.cpu_latency_us, True),
    }
    skipped = {}
    if args.no_extras:
        extras = {}
    elif not os.access(DEVICE, os.W_OK) or current_limit() is None:
        skipped[requested] = f"{DEVICE} is not writable here (it needs root)"
        extras = {key: value for key, value in extras.items() if value[0] < 0}
    missing = fused_missing()
    if missing:
        skipped["fused"] = missing
    with tempfile.TemporaryDirectory() as folder:
        path = export_seed(Path(folder))
        spec = leapp.spec.load(path)
        skip = {FUSED, FUSED_PROCESS} if missing else set()
        inprocess, results = measure_defaults(path, spec, args, skip)
        measured = {
            (mode, setting): measure_extra(spec, mode, setting, latency, pin, args)
            for (mode, setting), (latency, pin) in extras.items()
        }
    report(inprocess, results, measured, skipped)


if __name__ == "__main__":
    main()
