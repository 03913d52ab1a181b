"""Benchmark the seed pipeline as a live ROS 2 graph against hand-written rclpy graphs.

    python bench/ros_latency.py [--samples N] [--rounds R] [--seconds S] [--cpu-rounds C]

Deployment shapes ("modes") of leapp's graph, each driven by this benchmark's client node
(bench/graph_client.py), which publishes ``state`` and ``velocity`` and times the ``action``
that comes back:

- composed: every pipeline node in one process on one executor, with the client composed into
  that same process (the way an in-process consumer such as a controller node sees it);
- one process per node: each pipeline node in its own process (``leapp-ros run``), the client
  in this one;
- fused, composed / fused, own process: the whole pipeline in one node
  (``leapp_ros.node.fused_node.FusedPipelineNode``), composed with the client, resp. in a
  process of its own.

References, measured in this run on this machine (bench/hand_written_nodes.py: the same
topics, message sizes, QoS and executor; the artifacts called the plain way, one thread each):
the hand-written rclpy policy graphs a user writes without leapp, in two shapes, the chain
(one node per pipeline node; for composed and one process per node) and a single node doing
both calls in one callback (for the fused modes), each composed with the client and in
process(es) of its own, and each in two forms:

- typed, as users write them (``Float32MultiArray`` messages, ``np.frombuffer`` of their
  data, results published as new messages): the reference of the verdicts;
- raw CDR, as a skilled user writes them (``create_subscription(..., raw=True)``, the CDR
  parsed by hand into an ``np.frombuffer`` view, the result published as CDR ``bytes`` built
  by hand, checked against rclpy's serialization): a second reference, information only.

Each hand-written graph's action for a fixed input pair is checked against ``leapp.Pipeline``'s
(within 1e-5) when it starts.

Figures per graph: latency, median and p99 over ``--samples`` ping-pongs with the system's
defaults, taken with every graph alive in ``--rounds`` alternating rounds so that the noise of
a shared machine hits all alike. Then, per mode, its graph and its two hand-written
references started again together, without the other modes' graphs (as a robot runs one
graph, without the others' idle timers and discovery traffic): the CPU time spent per answer
while the client feeds one of them at 500 Hz for ``--seconds`` and the others idle (this
process, the client and any nodes composed into it, plus the processes running the measured
graph's nodes: all threads, the middleware's included; each process's CPU clock),
``--cpu-rounds`` such windows per graph in an order that turns each round, their median the
figure (CPU per answer moves by 10-20 % from one second to the next on a shared machine, so a
graph is measured next to its references, many times); the inputs left unanswered in those
windows (information); and after that (not right after an overload) each graph's sustained
rate: each rate step (``--seconds``) is tried up to three times and holds once a try loses
< 1 % (the machine's noise only adds losses).

Verdicts, per mode, against the typed hand-written graph of the same shape in this run (ratios
only, never absolute limits; bench/latency_report.py): median latency <= 0.7x in composed and
both fused modes, <= 0.85x with one process per node; CPU per answer <= 0.75x in every mode;
a sustained rate at least the hand-written graph's. Each is printed PASS / FAIL with its
figures (INVALID for a graph that answers an input pair more than once), with the p99 ratio
and the same ratios against the raw CDR variant beside (no verdict).

ROS discovery stays on this machine (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``) in a domain
of its own: ``ROS_DOMAIN_ID`` where it is set, else one that no other process on this machine
holds (:func:`leapp_ros.testing.claim_domain_id`, the tests' lock files); the graphs'
namespaces carry this process's id, so that two runs in one domain never answer each other's
client.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import io
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bare_calls import percentiles
from graph_client import Client, composed_client, separate_client
from hand_written_nodes import chain_of, make_hand_written_node, node_processes, single_of
from latency_report import (
    CHECK_TOLERANCE,
    COMPOSED,
    CPU_RATE_HZ,
    FUSED,
    FUSED_PROCESS,
    HAND_CHAIN,
    HAND_CHAIN_PROCESSES,
    HAND_SINGLE,
    HAND_SINGLE_PROCESS,
    HAND_WRITTEN_OF,
    MODES,
    PROCESSES,
    RAW,
    RAW_OF,
    report,
)
from seed_export import export_seed

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"


def parameters(spec_path: Path) -> list:
    from rclpy.parameter import Parameter

    return [Parameter("spec_path", Parameter.Type.STRING, str(spec_path))]


@contextlib.contextmanager
def running_graph(processes) -> Iterator[None]:
    from leapp_ros.run.runner import RunningGraph

    quiet = io.StringIO()
    graph = RunningGraph(processes, name="bench", stdout=quiet, stderr=quiet)
    with graph.start():
        if not graph.wait_ready(timeout_s=90):
            raise SystemExit(f"graph not ready: {graph.failure}\n{quiet.getvalue()[-2000:]}")
        yield


def reference_subjects(spec) -> dict[str, Callable]:
    """The hand-written rclpy graphs of ``spec``'s shape by label, typed and raw CDR, as
    :func:`leapp_subjects`; each is checked against ``leapp.Pipeline`` when it starts."""

    def composed(nodes: Callable) -> Callable:
        return lambda ns: composed_client(
            spec,
            ns,
            lambda context, plan: [make_hand_written_node(n, ns, context) for n in nodes(plan)],
        )

    def separate(nodes: Callable) -> Callable:
        return lambda ns: separate_client(spec, ns, lambda plan: node_processes(nodes(plan), ns))

    def checked(enter: Callable) -> Callable:
        @contextlib.contextmanager
        def enter_checked(namespace: str) -> Iterator[Client]:
            with enter(namespace) as client:
                check_action(spec, client, namespace)
                yield client

        return enter_checked

    subjects = {}
    for suffix, raw in (("", False), (RAW, True)):

        def chain(plan, raw=raw) -> tuple:
            return chain_of(plan, spec.directory, raw)

        def single(plan, raw=raw) -> tuple:
            return (single_of(plan, spec.directory, raw),)

        subjects[HAND_CHAIN + suffix] = checked(composed(chain))
        subjects[HAND_CHAIN_PROCESSES + suffix] = checked(separate(chain))
        subjects[HAND_SINGLE + suffix] = checked(composed(single))
        subjects[HAND_SINGLE_PROCESS + suffix] = checked(separate(single))
    return subjects


def check_action(spec, client: Client, namespace: str) -> None:
    """Stop the bench unless the graph of ``client`` answers one fixed input pair with
    ``leapp.Pipeline``'s output (each value within CHECK_TOLERANCE); keep the largest
    difference in ``client.checked``."""
    import numpy as np
    import torch

    import leapp
    from leapp_ros.plan.pipeline import make_plan

    plan = make_plan(spec, namespace=namespace)
    first, last = plan.nodes[0], plan.nodes[-1]
    output = f"{last.name}/{last.outputs[0].port}"
    random = np.random.default_rng(0)
    inputs = {
        f"{first.name}/{port.port}": random.standard_normal(port.shape).astype(np.float32)
        for port in first.inputs
        if port.kind == "external"  # the client's inputs, in its order
    }
    step = leapp.Pipeline.load(str(spec.path)).step
    expected = step({name: torch.from_numpy(values) for name, values in inputs.items()})[output]
    for _ in range(3):  # a late answer to a pair of prime()'s (a slow first call) is no answer
        answer = client.answer([array.array("f", values.tobytes()) for values in inputs.values()])
        if answer is None:
            raise SystemExit(f"{namespace}: no answer to the check of {output}")
        got = np.frombuffer(answer, np.float32)
        difference = float(np.max(np.abs(got - expected.numpy().ravel())))
        if difference <= CHECK_TOLERANCE:
            break
        client.spin_until(client.received + 10**6, 1.0)  # let late answers come first
    else:
        raise SystemExit(
            f"{namespace}: {output} {got} differs from leapp.Pipeline's {expected.numpy()} by "
            f"{difference:.3g} (> {CHECK_TOLERANCE}) three times; bench/hand_written_nodes.py "
            "is wrong"
        )
    client.checked = difference


def leapp_subjects(spec) -> dict[str, Callable]:
    """leapp's graphs of ``spec`` by mode: ``enter(namespace)`` is a context manager that
    yields a primed :class:`Client`."""
    from leapp_ros.node.fused_node import FusedPipelineNode
    from leapp_ros.node.intra_process import IntraProcessBus
    from leapp_ros.node.pipeline_node import PipelineNode
    from leapp_ros.run.deployment import Deployment, GraphOptions
    from leapp_ros.run.processes import plan_processes

    def pipeline_nodes(context, plan) -> list:
        """As leapp_container composes them: one intra-process bus for the pipeline's nodes
        (the client stays on the middleware, as another component would)."""
        bus = IntraProcessBus()
        return [
            PipelineNode(
                node.name,
                namespace=plan.namespace,
                context=context,
                spec=spec,
                parameter_overrides=parameters(spec.path),
                bus=bus,
            )
            for node in plan.nodes
        ]

    def fused_node(context, plan) -> list:
        return [
            FusedPipelineNode(
                node_name="leapp_fused",
                namespace=plan.namespace,
                context=context,
                spec=spec,
                parameter_overrides=parameters(spec.path),
            )
        ]

    def graph(**fields) -> Callable:
        def start(plan):
            return running_graph(plan_processes(plan, GraphOptions(log_level="info", **fields)))

        return lambda ns: separate_client(spec, ns, start)

    return {
        COMPOSED: lambda ns: composed_client(spec, ns, pipeline_nodes),
        PROCESSES: graph(),
        FUSED: lambda ns: composed_client(spec, ns, fused_node),
        FUSED_PROCESS: graph(deployment=Deployment.FUSED),
    }


_HELD_DOMAIN: list = []  # the lock of the domain id claimed below (held until the process ends)


def use_own_domain() -> None:
    """``ROS_DOMAIN_ID`` as set, else one that no other process on this machine holds
    (:func:`leapp_ros.testing.claim_domain_id`), set in this process's environment."""
    if "ROS_DOMAIN_ID" not in os.environ:
        from leapp_ros.testing import claim_domain_id

        domain_id, lock = claim_domain_id()
        _HELD_DOMAIN.append(lock)
        os.environ["ROS_DOMAIN_ID"] = str(domain_id)


def namespace_of(label: str) -> str:
    """A namespace of its own for each graph, so that graphs alive together (of this run, or
    of another run in the same domain) never mix."""
    words = label.replace(",", " ").split()
    kept = "_".join(word for word in words if word.isidentifier())
    return f"/bench{os.getpid()}_{kept}"


def measure(spec, args) -> dict:
    """Every graph with the system's defaults, alive together, its latency in alternating
    rounds; then per mode its graph and references alone: CPU per answer, sustained rate."""
    subjects = {**reference_subjects(spec), **leapp_subjects(spec)}
    with contextlib.ExitStack() as stack:
        clients = {
            label: stack.enter_context(enter(namespace_of(label)))
            for label, enter in subjects.items()
        }
        per_round = max(1, args.samples // args.rounds)
        for _ in range(args.rounds):
            for client in clients.values():
                client.sample(per_round)
        results = {
            label: {
                "timing": percentiles(client.times),
                "lost": client.lost,
                "answers": client.answers_per_pair(),
                "checked": client.checked,
            }
            for label, client in clients.items()
        }
    for group in cpu_groups(subjects):  # a robot runs one graph: the others stay idle
        with contextlib.ExitStack() as stack:
            clients = {
                label: stack.enter_context(subjects[label](namespace_of(label))) for label in group
            }
            windows = cpu_windows(clients, args.cpu_rounds, args.seconds)
            for label, client in clients.items():  # after the CPU: not right after an overload
                results[label]["sustained"] = client.sustained_hz(args.seconds)
        for label, runs in windows.items():
            results[label]["cpu"] = statistics.median(us for us, _ in runs)
            results[label]["loss"] = sum(loss for _, loss in runs) / len(runs)
    return results


def cpu_groups(subjects: dict) -> list[tuple[str, ...]]:
    """The subjects in groups measured together: each leapp mode with its typed and raw CDR
    hand-written references (those that are there), then whatever is left, one by one."""
    groups = []
    for mode in MODES:
        members = (mode, HAND_WRITTEN_OF[mode], RAW_OF[mode])
        group = tuple(label for label in members if label in subjects)
        if group:
            groups.append(group)
    grouped = {label for group in groups for label in group}
    return groups + [(label,) for label in subjects if label not in grouped]


def cpu_windows(clients: dict, rounds: int, seconds: float) -> dict[str, list]:
    """``rounds`` windows of ``seconds`` per client, each fed at CPU_RATE_HZ while the others
    idle, in an order that turns by one each round (so that no graph always follows the
    same one): ``{label: [(us per answer, loss), ...]}``. Each window counts the CPU of this
    process and of the measured graph's own processes (``Client.pids``); the idle graphs'
    clients in this process cost all alike."""
    labels = list(clients)
    windows: dict[str, list] = {label: [] for label in labels}
    for turn in range(rounds):
        for label in labels[turn % len(labels) :] + labels[: turn % len(labels)]:
            client = clients[label]
            windows[label].append(client.cpu_per_answer_us(CPU_RATE_HZ, seconds))
    return windows


def main(argv: list[str] | None = None) -> None:
    began = time.monotonic()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000, help="latency ping-pongs per graph")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds of them")
    parser.add_argument(
        "--seconds", type=float, default=2.0, help="duration of each rate step and CPU window"
    )
    parser.add_argument(
        "--cpu-rounds", type=int, default=4, help="CPU windows per graph (their median counts)"
    )
    args = parser.parse_args(argv)
    use_own_domain()

    import leapp.spec

    with tempfile.TemporaryDirectory() as folder:
        spec = leapp.spec.load(export_seed(Path(folder)).spec_path)
        results = measure(spec, args)
    report(results)
    print(f"  (this run: {time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    main()
