"""The client that drives a graph in bench/ros_latency.py: ping-pong latency, sustained rate.

A :class:`Client` node publishes a pipeline's external inputs (one preallocated
``Float32MultiArray`` per input, :class:`Ends`) and times the output that comes back; the
nodes under test
are composed into its process, on its executor (:func:`composed_client`), or run in processes
of their own (:func:`separate_client`). :meth:`Client.answer` asks the graph for its output on
given input values, to check a graph's result.
"""

from __future__ import annotations

import array
import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RATES_HZ = (250, 500, 1000, 2000, 4000)  # sustained_hz tries these in order

Port = tuple[str, int]  # a Float32MultiArray topic (relative to the namespace), its float count


@dataclass(frozen=True)
class Ends:
    """What the client publishes and times: the external inputs of a pipeline's first node
    and the first output of its last node."""

    inputs: tuple[Port, ...]
    output: Port


def float_count(port: Any) -> int:
    """The floats of one message of ``port`` (an input or output plan of
    :mod:`leapp_ros.plan.pipeline`); the benches know ``Float32MultiArray`` only."""
    if port.message_type != "std_msgs/msg/Float32MultiArray":
        raise ValueError(f"the benches only know Float32MultiArray ports, not {port}")
    return math.prod(port.shape)


def ends_of(plan: Any) -> Ends:
    """The :class:`Ends` of ``plan`` (a :class:`leapp_ros.plan.pipeline.PipelinePlan`)."""
    first, last = plan.nodes[0], plan.nodes[-1]
    inputs = tuple((p.topic, float_count(p)) for p in first.inputs if p.kind == "external")
    return Ends(inputs, (last.outputs[0].topic, float_count(last.outputs[0])))


class Client:
    """The test side: publishes the inputs of ``ends``, counts and times its output.
    ``build(context)`` makes nodes to compose into this process, on the client's executor."""

    def __init__(self, namespace: str, ends: Ends, build: Callable | None = None):
        import rclpy
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Float32MultiArray

        from leapp_ros.node.executor import make_executor

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
        self.last_answer = None  # the last output message
        self.checked: float | None = None  # the largest difference a check of answers found
        self.times: list[float] = []
        self.lost = 0
        # the processes whose CPU counts for this graph: this one and those that run its nodes
        # (separate_client sets them; None: this process and every process it started)
        self.pids: list[int] | None = None
        self.node.create_subscription(Float32MultiArray, ends.output[0], self._on_output, reliable)
        self.executor = make_executor(self.context)
        self.composed = build(self.context) if build else []
        for node in [self.node, *self.composed]:
            self.executor.add_node(node)

    def _on_output(self, message) -> None:
        self.received += 1
        self.answers += 1
        self.last_ns = time.perf_counter_ns()
        self.last_answer = message

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

    def answer(self, values: list[array.array], attempts: int = 5) -> array.array | None:
        """The graph's output for one input pair of ``values`` (one per input, in order),
        published again while unanswered (best-effort subscriptions may drop it); None if the
        graph never answered."""
        from std_msgs.msg import Float32MultiArray

        self.spin_until(self.received + 10**6, 0.3)  # drain late answers
        messages = [Float32MultiArray(data=data) for data in values]
        for _ in range(attempts):
            expected = self.received + 1
            for (publisher, _), message in zip(self.inputs, messages, strict=True):
                publisher.publish(message)
            if self.spin_until(expected, 1.0):
                return self.last_answer.data
        return None

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

    def sustained_hz(self, seconds: float, tries: int = 3) -> int:
        """The highest rate of ``RATES_HZ``, tried in order, that the graph holds: one of up to
        ``tries`` runs of ``seconds`` loses < 1 % of the answers (a shared machine's noise only
        adds losses, so one clean run shows the graph can; a rate is given up after ``tries``
        lossy runs)."""
        self.spin_until(self.received + 10**6, 0.3)
        sustained = 0
        for rate in RATES_HZ:
            if not any(self.loss_at(rate, seconds) < 0.01 for _ in range(tries)):
                break
            sustained = rate
        return sustained

    def cpu_per_answer_us(self, rate_hz: float, seconds: float) -> tuple[float, float]:
        """CPU time spent per answer while the client feeds the graph at ``rate_hz`` for
        ``seconds``, in microseconds: this process (the client, and the nodes composed into
        it) and the processes running this graph's nodes (``pids``; by default every process
        this one started), all their threads (the middleware's included); and the fraction of
        inputs left unanswered."""
        self.spin_until(self.received + 10**6, 0.3)
        pids = self.pids or [os.getpid(), *descendants(os.getpid())]
        before, start = cpu_seconds(pids), self.received
        loss = self.loss_at(rate_hz, seconds)
        answered = self.received - start
        return (cpu_seconds(pids) - before) / max(answered, 1) * 1e6, loss

    def close(self) -> None:
        self.executor.shutdown()
        for node in [*self.composed, self.node]:
            node.destroy_node()
        self.context.try_shutdown()


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc's children lists; Linux)."""
    found: list[int] = []
    pending = [pid]
    while pending:
        current = pending.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:  # gone meanwhile
                continue
            for child in map(int, children):
                found.append(child)
                pending.append(child)
    return found


def cpu_seconds(pids: list[int]) -> float:
    """CPU time of ``pids`` (all their threads, user + system, exited threads included), in
    seconds, from each process's CPU clock (nanoseconds; /proc's utime and stime count
    10 ms ticks, a tenth of what a second at 500 Hz costs); a process gone since counts
    nothing."""
    total = 0.0
    for pid in pids:
        try:
            total += time.clock_gettime(_process_clock(pid))
        except OSError:  # gone meanwhile
            continue
    return total


def _process_clock(pid: int) -> int:
    """The id of ``pid``'s CPU-time clock (``clock_getcpuclockid``)."""
    import ctypes

    clock = ctypes.c_int()
    error = ctypes.CDLL(None).clock_getcpuclockid(pid, ctypes.byref(clock))
    if error:
        raise OSError(error, f"clock_getcpuclockid({pid})")
    return clock.value


@contextlib.contextmanager
def composed_client(spec, namespace: str, build: Callable) -> Iterator[Client]:
    """A primed client with ``build(context, plan)``'s nodes composed into its executor."""
    from leapp_ros.plan.pipeline import make_plan

    plan = make_plan(spec, namespace=namespace)
    client = Client(namespace, ends_of(plan), lambda context: build(context, plan))
    client.pids = [os.getpid()]
    try:
        client.prime()
        yield client
    finally:
        client.close()


@contextlib.contextmanager
def separate_client(spec, namespace: str, start: Callable) -> Iterator[Client]:
    """A primed client of the processes that ``start(plan)`` (a context manager) runs."""
    from leapp_ros.plan.pipeline import make_plan

    plan = make_plan(spec, namespace=namespace)
    before = set(descendants(os.getpid()))
    with start(plan):
        client = Client(namespace, ends_of(plan))
        client.pids = [os.getpid(), *(p for p in descendants(os.getpid()) if p not in before)]
        try:
            client.prime()
            yield client
        finally:
            client.close()
