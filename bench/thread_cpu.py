"""Where the CPU time per answer goes, thread by thread, in the graphs whose nodes run in
processes of their own.

    python bench/thread_cpu.py [--seconds S] [--rounds R]

bench/ros_latency.py judges the CPU time per answer of each mode as a whole. This bench splits
the two own-process modes (the fused node in a process of its own, and one process per node)
by thread, next to the graphs that mode is judged against, started together and fed in turn
at 500 Hz by this process's clients for ``--seconds`` each, ``--rounds`` times (the median
counts): the typed hand-written graph of the same shape (bench/hand_written_nodes.py, as users
write it), its raw CDR variant and the floor (raw CDR echo nodes of the same shape with no
model and no checks: what a Python node on this executor and middleware costs before it does
anything).

Printed per graph, per answer: the CPU time of each kind of thread of the graph's own
processes (from each thread's ``/proc/<pid>/task/<tid>/schedstat``, nanoseconds; threads named
alike summed: ``python`` is the executor's thread, which runs every callback, ``dds.*`` are
Fast DDS's: ``shm`` receives over shared memory, ``ev`` runs the reliable writers' timers,
``asyn`` sends asynchronously), how often each kind of thread went to sleep and was woken
(voluntary context switches), and this process's CPU time (the client that feeds and times
the graph; the idle clients of the other graphs cost alike). Information only: no verdict,
no absolute figure to meet.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from graph_client import cpu_seconds
from latency_report import (
    CPU_RATE_HZ,
    FLOOR_OF,
    FUSED_PROCESS,
    HAND_WRITTEN_OF,
    PROCESSES,
    RAW_OF,
)
from ros_latency import (
    cpu_windows,
    export_seed,
    leapp_subjects,
    namespace_of,
    reference_subjects,
    use_own_domain,
)

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"

CLIENT = "client (this process)"


def thread_times(pids: list[int]) -> collections.Counter:
    """``{(thread kind, "ns" | "sleeps"): total}`` over every thread of ``pids``: a thread's
    kind is its name with digits replaced by ``#``."""
    totals: collections.Counter = collections.Counter()
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                name = (task / "comm").read_text().strip()
                on_cpu_ns = int((task / "schedstat").read_text().split()[0])
                status = (task / "status").read_text()
            except OSError:  # gone meanwhile
                continue
            found = re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.MULTILINE)
            kind = re.sub(r"\d+", "#", name)
            totals[(kind, "ns")] += on_cpu_ns
            totals[(kind, "sleeps")] += int(found.group(1)) if found else 0
    return totals


def window(client, seconds: float) -> dict[tuple[str, str], float]:
    """One window at CPU_RATE_HZ: per answer, ``{(kind, "us" | "sleeps"): value}`` for the
    graph's processes' threads, and ``(CLIENT, "us")`` for this process."""
    pids = [pid for pid in client.pids if pid != os.getpid()]
    client.spin_until(client.received + 10**6, 0.3)  # drain what an earlier window left
    before, mine, start = thread_times(pids), cpu_seconds([os.getpid()]), client.received
    client.loss_at(CPU_RATE_HZ, seconds)
    answers = max(client.received - start, 1)
    after, mine = thread_times(pids), cpu_seconds([os.getpid()]) - mine
    figures: dict[tuple[str, str], float] = {(CLIENT, "us"): mine / answers * 1e6}
    for (kind, what), value in (after - before).items():
        if what == "ns":
            figures[(kind, "us")] = value / answers / 1000.0
        else:
            figures[(kind, "sleeps")] = value / answers
    return figures


def measure(subjects: dict, seconds: float, rounds: int) -> dict[str, dict]:
    """Every subject started together, each fed in turn, ``rounds`` times; the median of
    each figure per subject."""
    with contextlib.ExitStack() as stack:
        clients = {
            label: stack.enter_context(enter(namespace_of(label, "threads")))
            for label, enter in subjects.items()
        }
        for client in clients.values():
            client.sample(200)  # warm: every path taken once
        runs = cpu_windows(clients, rounds, seconds, window)
    medians = {}
    for label, windows in runs.items():
        keys = {key for figures in windows for key in figures}
        medians[label] = {
            key: statistics.median(figures.get(key, 0.0) for figures in windows) for key in keys
        }
    return medians


def report(mode: str, medians: dict[str, dict]) -> None:
    """A table of ``medians`` (columns: the graphs, the hand-written one second)."""
    labels = list(medians)

    def us(label: str, kind: str) -> float:
        return medians[label].get((kind, "us"), 0.0)

    kinds = {kind for figures in medians.values() for kind, what in figures if what == "us"}
    kinds = [kind for kind in kinds - {CLIENT} if max(us(label, kind) for label in labels) >= 0.5]
    kinds.sort(key=lambda kind: -max(us(label, kind) for label in labels))
    width = 20
    print(f"\n{mode}: CPU us per answer at {CPU_RATE_HZ:g} Hz (sleeps per answer), medians")
    print(f"  {'':<24}" + "".join(f"{label:>{width}}" for label in labels))
    for kind in kinds:
        cells = [
            f"{us(label, kind):.0f} ({medians[label].get((kind, 'sleeps'), 0.0):.1f})"
            for label in labels
        ]
        print(f"  {kind:<24}" + "".join(f"{cell:>{width}}" for cell in cells))
    totals = [sum(us(label, kind) for kind in kinds) for label in labels]
    print(f"  {'graph processes':<24}" + "".join(f"{total:>{width}.0f}" for total in totals))
    print(f"  {CLIENT:<24}" + "".join(f"{us(label, CLIENT):>{width}.0f}" for label in labels))
    whole = [total + us(label, CLIENT) for total, label in zip(totals, labels, strict=True)]
    for name, figures in (("graph / hand-written", totals), ("with the client", whole)):
        ratios = "".join(f"{figure / figures[1]:>{width - 1}.2f}x" for figure in figures)
        print(f"  {name:<24}{ratios}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each window")
    parser.add_argument("--rounds", type=int, default=3, help="windows per graph (median)")
    args = parser.parse_args()
    use_own_domain()
    import leapp.spec

    with tempfile.TemporaryDirectory() as folder:
        spec = leapp.spec.load(export_seed(Path(folder)))
        leapp_graphs, references = leapp_subjects(spec), reference_subjects(spec)
        for mode in (FUSED_PROCESS, PROCESSES):
            subjects = {  # column: graph
                "leapp": leapp_graphs[mode],
                "hand-written": references[HAND_WRITTEN_OF[mode]],
                "hand-written, raw": references[RAW_OF[mode]],
                "floor": references[FLOOR_OF[mode]],
            }
            report(mode, measure(subjects, args.seconds, args.rounds))


if __name__ == "__main__":
    main()
