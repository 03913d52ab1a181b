"""How steady the rate loop's commands come: a 50 Hz policy in front of a 500 Hz position
controller, as a leapp graph in each mode and as a hand-written rclpy node, one run each.

    python bench/rate_loop.py [--seconds S] [--modes processes,composed,fused]

The arm of ``rate_arm.py`` runs at 500 Hz against each (``rate_drive.py``, without faults:
joint states and IMU at 500 Hz, ``cmd_vel`` at 10 Hz): the graph with the rate loop's
parameters (``rate_arm.loop_parameters``: ``preprocess`` on stamp-matched sets, ``policy`` on
its 50 Hz timer, ``joint_targets`` played out at 500 Hz; fused, the whole pipeline on a 50 Hz
timer taking the newest whole set of one stamp), the reference ``hand_written_rate_node.py``
(a 50 Hz timer on the newest values, a 500 Hz timer for the targets, the same artifact calls)
in a process of its own. Printed per graph, p50 and p99 of the intervals between the targets
and between the policy results as they arrive at the loop (so the loop's own work is in both
sides' figures), as ratios to the hand-written node's, and how many results were computed from
a JointState and an Imu of different stamps (``rate_check.py``). Figures depend on the
machine and its load.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rate_arm import SENSOR_HZ, Plant, export_rate_arm, loop_parameters, write_model
from rate_check import identify, periods
from rate_drive import RateDrive, Record, Schedule

__all__ = ["run_graph", "run_hand_written"]

SETTLE_TARGETS = 25  # targets awaited after the last step: everything before them came
WAIT_S = 60.0
HERE = Path(__file__).resolve().parent


def _drive(
    domain_id: int,
    namespace: str,
    folder: Path,
    schedule: Schedule,
    graph_matched: Any = None,
) -> Record:
    """The loop on a probe of its own in ``domain_id`` (its executor takes the loop's messages
    only), once its publishers and subscriptions have matched (and, given
    ``graph_matched()``, the graph's side of them has: a reliable writer delivers only to the
    readers it has matched itself, so a first result could otherwise miss the loop)."""
    from leapp_ros.testing.probe import Probe

    with Probe(domain_id, "rate_loop") as probe:
        drive = RateDrive(probe.node, probe.executor, namespace, Plant(write_model(folder)))
        probe.spin_until(drive.connected, WAIT_S, "the loop's publishers and subscriptions")
        if graph_matched is not None:
            graph_matched()
        record = drive.run(schedule)
        count = len(record.targets) + SETTLE_TARGETS
        probe.spin_until(lambda: len(record.targets) >= count, WAIT_S, f"{count} targets")
    return record


def run_graph(
    export: Path,
    deployment: Any,
    folder: Path,
    schedule: Schedule,
    parameters: dict[str, Any] | None = None,
) -> Record:
    """The loop through ``schedule`` against the export's graph in ``deployment``, started
    with ``parameters`` (default: the rate loop's; the nodes' output in ``folder/nodes.log``)."""
    import yaml

    from leapp_ros.testing import GraphOptions, GraphUnderTest

    params = folder / "params.yaml"
    document = loop_parameters() if parameters is None else parameters
    params.write_text(yaml.safe_dump(document), encoding="utf-8")
    options = GraphOptions(deployment, params_file=params)
    with (
        open(folder / "nodes.log", "w", encoding="utf-8") as log,
        GraphUnderTest(export, options, output=log) as graph,
    ):
        assert graph.domain_id is not None
        outputs = [graph.plan.resolve(f"policy/{stem}") for stem in ("action", "joint_targets")]

        def subscribed() -> bool:  # the harness's subscription and the loop's, each output
            counts = graph.status().get("policy", {}).get("subscribers", {})
            return all(counts.get(topic, 0) >= 2 for topic in outputs)

        def graph_matched() -> None:
            graph.probe.spin_until(subscribed, WAIT_S, "the policy's outputs to match the loop")

        record = _drive(graph.domain_id, graph.plan.namespace, folder, schedule, graph_matched)
        graph.spin(0)  # raises if a node died
    return record


def run_hand_written(export: Path, folder: Path, schedule: Schedule) -> Record:
    """The loop through ``schedule`` against ``hand_written_rate_node.py`` in a process of its
    own (its output in ``folder/node.log``)."""
    from hand_written_rate_node import READY

    from leapp_ros.testing.probe import claim_domain_id, ros_env

    domain_id, lock = claim_domain_id()
    argv = [sys.executable, str(HERE / "hand_written_rate_node.py"), "--namespace", "/hand"]
    log_path = folder / "node.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [*argv, "--export", str(export)],
            env=ros_env(domain_id, os.environ),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + WAIT_S
        while READY not in log_path.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise SystemExit(f"the hand-written node did not start:\n{tail}")
            time.sleep(0.1)  # (a process starting: nothing to wait on but its output)
        return _drive(domain_id, "/hand", folder, schedule)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        lock.close()


def _row(name: str, record: Record, reference: Record) -> str:
    """One graph's line: p50 and p99 of each stream and its ratio to ``reference``'s, and how
    many of its results came from inputs of different instants."""
    cells = [f"{name:<13}"]
    for which in ("targets", "results"):
        arrivals = [moment for moment, _ in getattr(record, which)]
        values = periods(arrivals)
        base = periods([m for m, _ in getattr(reference, which)])
        for value, ref in zip(values, base, strict=True):
            cells.append(f"{value * 1e3:7.3f} ms ({value / ref:4.2f}x)")
    found = identify(record)
    cells.append(f"{len(found.mixed)} mixed, {len(found.wrong)} wrong of {len(found.sets)}")
    return "  ".join(cells)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="simulated time per graph")
    parser.add_argument("--modes", default="processes,composed,fused")
    args = parser.parse_args(argv)
    from leapp_ros.testing import Deployment

    modes = [Deployment(mode) for mode in args.modes.split(",")]
    schedule = Schedule(steps=round(args.seconds * SENSOR_HZ))
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        export = export_rate_arm(folder / "export").path
        records = {"hand-written": run_hand_written(export, _made(folder, "hand"), schedule)}
        for mode in modes:
            records[mode.value] = run_graph(export, mode, _made(folder, mode.value), schedule)
    reference = records["hand-written"]
    print(
        f"\nrate loop: {args.seconds:g} s of a 500 Hz arm, intervals between arrivals at the "
        "loop, ratio to the hand-written node\n"
        f"{'graph':<13}  {'targets p50':<19}  {'targets p99':<19}  {'results p50':<19}  "
        f"{'results p99':<19}  input sets"
    )
    for name, record in records.items():
        print(_row(name, record, reference))
    return 0


def _made(folder: Path, name: str) -> Path:
    path = folder / name
    path.mkdir()
    return path


if __name__ == "__main__":
    sys.exit(main())
