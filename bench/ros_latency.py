"""Benchmark the seed pipeline as a live ROS 2 graph against hand-written rclpy graphs.

    python bench/ros_latency.py [--samples N] [--rounds R] [--seconds S] [--cpu-rounds C]
                                [--no-extras]

Deployment shapes ("modes") of leapp's graph, each driven by this benchmark's client node,
which publishes ``state`` and ``velocity`` and times the ``action`` that comes back:

- composed: every pipeline node in one process on one executor, with the client composed into
  that same process (the way an in-process consumer such as a controller node sees it);
- one process per node: each pipeline node in its own process (``leapp-ros run``), the client
  in this one;
- fused, composed / fused, own process: the whole pipeline in one node
  (``leapp_ros.node.fused_node.FusedPipelineNode``), composed with the client, resp. in a
  process of its own (skipped, with the reason, where that module is missing).

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

Beside each mode, as information, its floor: raw CDR echo nodes of the same shape and topics
(bench/rclpy_reference.py with ``raw``: no model, no checks, no conversion, a prebuilt answer),
one node per pipeline node (a chain, composed with the client over the middleware, or one
process per node) or one node from the inputs to the action (composed, own process); what no
Python graph of that shape on this executor and middleware gets below, printed as a ratio to
the typed hand-written graph next to the verdicts.

Each hand-written graph's action for a fixed input pair is checked against ``leapp.Pipeline``'s
(within 1e-5) when it starts. The bare model calls and ``leapp.Pipeline.step`` are timed too
(bench/bare_calls.py; information: in a tight loop, after a thread handover, after 1 ms idle).

Figures per graph: latency, median and p99 over ``--samples`` ping-pongs with the system's
defaults, taken with every graph alive in ``--rounds`` alternating rounds (the in-process calls
between them) so that the noise of a shared machine hits all alike. Then, per mode, its graph,
its two hand-written references and its floor started again together, without the other modes'
graphs (as a robot runs one graph, without the others' idle timers and discovery traffic): the
CPU time spent per answer while the client feeds one of them at 500 Hz for ``--seconds`` and
the others idle (this process, the client and any nodes composed into it, plus the processes
running the measured graph's nodes: all threads, the middleware's included; each process's CPU
clock), ``--cpu-rounds`` such windows per graph in an order that turns each round, their median
the figure (this machine's CPU per answer moves by 10-20 % from one second to the next, so a
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

Optional extra rows, after those and one at a time, without a verdict: the nodes holding a CPU
latency request of ``--cpu-latency-us`` (the nodes' ``cpu_latency_us``; needs write access to
``/dev/cpu_dma_latency``, else skipped with the reason), one process per node with each
process pinned to a CPU of its own (``--pin-cpus`` of ``leapp-ros run``), and the fused node's
process pinned to one CPU (its threads, the middleware's too, then share that CPU). See
``leapp_ros/plan/cpu_settings.py``. ROS discovery stays on this machine
(``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``) in a domain of its own: ``ROS_DOMAIN_ID`` where
it is set, else one that no other process on this machine holds
(:func:`leapp_ros.testing.claim_domain_id`, the tests' lock files); the graphs' namespaces
carry this process's id, so that two runs in one domain never answer each other's client.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))
from bare_calls import (  # noqa: E402
    load_bare_calls,
    percentiles,
    time_handed_over,
    time_interleaved,
)
from export import STEP, load_step  # noqa: E402
from graph_client import Client, composed_client, separate_client  # noqa: E402
from hand_written_nodes import chain_of as hand_written_chain_of  # noqa: E402
from hand_written_nodes import make_hand_written_node, single_of  # noqa: E402
from latency_report import (  # noqa: E402
    CHECK_TOLERANCE,
    COMPOSED,
    CPU_RATE_HZ,
    DEFAULTS,
    FLOOR_OF,
    FUSED,
    FUSED_PROCESS,
    HAND_CHAIN,
    HAND_CHAIN_PROCESSES,
    HAND_SINGLE,
    HAND_SINGLE_PROCESS,
    HAND_WRITTEN_OF,
    HANDED_OVER,
    IDLE,
    MODES,
    PROCESSES,
    RAW,
    RAW_OF,
    TIGHT,
    report,
)
from rclpy_reference import chain_of as echo_chain_of  # noqa: E402
from rclpy_reference import hop_of, make_echo_node, reference_processes  # noqa: E402

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"


def export_seed(folder: Path) -> Path:
    import torch
    import torch_pipeline as seed

    import leapp

    torch.manual_seed(0)
    leapp.start(name="torch_pipeline", save_path=folder)
    seed.run_policy(seed.Policy().eval(), seed.preprocess(torch.zeros(6), torch.zeros(3)))
    leapp.stop()
    return leapp.compile_graph().path


def parameters(spec_path: Path, cpu_latency_us: int) -> list:
    from rclpy.parameter import Parameter

    return [
        Parameter("spec_path", Parameter.Type.STRING, str(spec_path)),
        Parameter("cpu_latency_us", Parameter.Type.INTEGER, cpu_latency_us),
    ]


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

    def composed(nodes: Callable, make: Callable = make_hand_written_node) -> Callable:
        return lambda ns: composed_client(
            spec, ns, lambda context, plan: [make(n, ns, context) for n in nodes(plan)]
        )

    def separate(nodes: Callable) -> Callable:
        return lambda ns: separate_client(
            spec, ns, lambda plan: reference_processes(nodes(plan), ns)
        )

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
            return hand_written_chain_of(plan, spec.directory, raw)

        def single(plan, raw=raw) -> tuple:
            return (single_of(plan, spec.directory, raw),)

        subjects[HAND_CHAIN + suffix] = checked(composed(chain))
        subjects[HAND_CHAIN_PROCESSES + suffix] = checked(separate(chain))
        subjects[HAND_SINGLE + suffix] = checked(composed(single))
        subjects[HAND_SINGLE_PROCESS + suffix] = checked(separate(single))

    def floor(plan) -> tuple:
        return (replace(hop_of(plan), raw=True),)

    def floor_chain(plan) -> tuple:
        return tuple(replace(echo, raw=True) for echo in echo_chain_of(plan))

    subjects[FLOOR_OF[COMPOSED]] = composed(floor_chain, make_echo_node)
    subjects[FLOOR_OF[PROCESSES]] = separate(floor_chain)
    subjects[FLOOR_OF[FUSED]] = composed(floor, make_echo_node)
    subjects[FLOOR_OF[FUSED_PROCESS]] = separate(floor)
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


def leapp_subjects(spec, cpu_latency_us: int = -1, pin: bool = False) -> dict[str, Callable]:
    """leapp's graphs of ``spec`` by mode: ``enter(namespace)`` is a context manager that
    yields a primed :class:`Client`. ``cpu_latency_us`` < 0: no CPU latency request."""
    from leapp_ros.node.intra_process import IntraProcessBus
    from leapp_ros.node.pipeline_node import PipelineNode
    from leapp_ros.run.deployment import Deployment, GraphOptions
    from leapp_ros.run.processes import plan_processes

    latency = None if cpu_latency_us < 0 else cpu_latency_us

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
        from leapp_ros.node.fused_node import FusedPipelineNode

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

    def graph(**fields) -> Callable:
        def start(plan):
            chosen = GraphOptions(log_level="info", cpu_latency_us=latency, pin_cpus=pin, **fields)
            return running_graph(plan_processes(plan, chosen))

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


def namespace_of(label: str, setting: str = DEFAULTS) -> str:
    """A namespace of its own for each graph, so that graphs alive together (of this run, or
    of another run in the same domain) never mix."""
    words = f"{label} {setting}".replace(",", " ").replace("=", " ").split()
    kept = "_".join(word for word in words if word.isidentifier() or word.isdigit())
    return f"/bench{os.getpid()}_{kept}"


def fused_missing() -> str | None:
    """Why fused mode cannot be measured here, or None."""
    try:
        import leapp_ros.node.fused_node  # noqa: F401
    except ImportError as e:
        return f"leapp_ros.node.fused_node is not importable here ({e})"
    return None


def measure_defaults(path: Path, spec, args, skip: set[str]) -> tuple[dict, dict]:
    """Every subject with the system's defaults, alive together; latencies in alternating
    rounds with the in-process calls; then each one's sustained rate, started again alone."""
    subjects = {**reference_subjects(spec), **leapp_subjects(spec)}
    subjects = {label: enter for label, enter in subjects.items() if label not in skip}
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

        inprocess = {
            TIGHT: time_interleaved(calls, 5 * args.samples, args.rounds, each_round=ros_round),
            HANDED_OVER: time_handed_over(calls, args.samples),
            IDLE: time_handed_over(calls, args.samples // 2, idle_s=1.0 / 1000.0),
        }
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
    return inprocess, results


def cpu_groups(subjects: dict) -> list[tuple[str, ...]]:
    """The subjects in groups measured together: each leapp mode with its typed and raw CDR
    hand-written references and its floor (those that are there), then whatever is left, one
    by one."""
    groups = []
    for mode in MODES:
        members = (mode, HAND_WRITTEN_OF[mode], RAW_OF[mode], FLOOR_OF.get(mode))
        group = tuple(label for label in members if label in subjects)
        if group:
            groups.append(group)
    grouped = {label for group in groups for label in group}
    return groups + [(label,) for label in subjects if label not in grouped]


def cpu_windows(
    clients: dict, rounds: int, seconds: float, window: Callable | None = None
) -> dict[str, list]:
    """``rounds`` windows of ``seconds`` per client, each fed at CPU_RATE_HZ while the others
    idle, in an order that turns by one each round (so that no graph always follows the
    same one): ``{label: [(us per answer, loss), ...]}``. Each window counts the CPU of this
    process and of the measured graph's own processes (``Client.pids``); the idle graphs'
    clients in this process cost all alike. ``window(client, seconds)``, when given, measures
    a window instead (its results are listed)."""
    if window is None:

        def window(client, seconds: float) -> tuple[float, float]:
            return client.cpu_per_answer_us(CPU_RATE_HZ, seconds)

    labels = list(clients)
    windows: dict[str, list] = {label: [] for label in labels}
    for turn in range(rounds):
        for label in labels[turn % len(labels) :] + labels[: turn % len(labels)]:
            windows[label].append(window(clients[label], seconds))
    return windows


def measure_extra(spec, label: str, setting: str, cpu_latency_us: int, pin: bool, args) -> dict:
    """One subject alone, with CPU settings other than the defaults."""
    enter = leapp_subjects(spec, cpu_latency_us, pin)[label]
    with enter(namespace_of(label, setting)) as client:
        client.sample(args.samples)
        answers = client.answers_per_pair()
        cpu, loss = client.cpu_per_answer_us(CPU_RATE_HZ, args.seconds)
        sustained = client.sustained_hz(args.seconds)
    return {
        "timing": percentiles(client.times),
        "lost": client.lost,
        "answers": answers,
        "sustained": sustained,
        "cpu": cpu,
        "loss": loss,
    }


def main() -> None:
    from leapp_ros.plan.cpu_settings import DEVICE, current_limit

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
    parser.add_argument(
        "--cpu-latency-us", type=int, default=0, help="the extra rows' CPU latency request (0)"
    )
    parser.add_argument("--no-extras", action="store_true", help="system defaults only")
    args = parser.parse_args()
    use_own_domain()

    import leapp.spec

    requested = f"cpu_latency_us={args.cpu_latency_us}"
    extras = {  # (mode, setting): (cpu_latency_us, pin_cpus)
        (PROCESSES, "pinned"): (-1, True),
        (FUSED_PROCESS, "pinned"): (-1, True),
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
        singles = (HAND_SINGLE, HAND_SINGLE_PROCESS, HAND_SINGLE + RAW, HAND_SINGLE_PROCESS + RAW)
        skip = {FUSED, FUSED_PROCESS, *singles} if missing else set()
        inprocess, results = measure_defaults(path, spec, args, skip)
        measured = {
            (mode, setting): measure_extra(spec, mode, setting, latency, pin, args)
            for (mode, setting), (latency, pin) in extras.items()
        }
    report(inprocess, results, measured, skipped)
    print(f"  (this run: {time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    main()
