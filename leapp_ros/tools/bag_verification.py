"""``leapp-ros verify EXPORT --bag BAG``: a recorded bag replayed through the live graph.

::

    leapp-ros verify exports/robot_policy --bag robot_run --remap preprocess/joint_states:=/js
    leapp-ros verify exports/robot_policy --bag last_week --against recorded --deployment fused
    leapp-ros verify exports/torch_pipeline --bag run --rate realtime --plot run_verify.png

:func:`verify_bag` checks everything before starting anything: the spec and the artifacts'
checksums, the remap rules, and the bag as a whole (every input topic present with the graph's
message type, every message readable, at least one complete tick; with ``--against recorded``
the recorded outputs too) and, when a plot is asked for, that Pillow is there; any of these is
a :class:`~leapp.errors.LeappError` naming the topic or file (exit code 2). Then it starts the
graph isolated on this machine (:class:`~leapp_ros.testing.GraphUnderTest`), replays the bag
tick by tick (:mod:`leapp_ros.testing.replay`) and writes the plot of the largest difference
per topic over time: ``PLOT`` (``--plot``), by default ``<bag>_verify.png`` next to the bag
folder (skipped, with a note, where Pillow is not installed). Exit code 0 when every topic
matches, 1 on a mismatch, a timeout or a node failure.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from leapp_ros.run.deployment import Deployment

if TYPE_CHECKING:
    from leapp_ros.testing.replay import ReplayReport

__all__ = ["add_bag_arguments", "default_plot_path", "verify_bag", "verify_bag_command"]

logger = logging.getLogger(__name__)


def default_plot_path(bag: str | os.PathLike[str]) -> Path:
    """``<bag>_verify.png`` beside the bag folder (never inside it)."""
    bag = Path(bag)
    return bag.parent / f"{bag.name}_verify.png"


def verify_bag(
    export: str | os.PathLike[str],
    bag: str | os.PathLike[str],
    *,
    remaps: Sequence[str] = (),
    rate: str = "asap",
    against: str = "pipeline",
    deployment: Deployment | str = Deployment.PROCESSES,
    rtol: float = 1e-3,
    atol: float = 1e-5,
    timeout_s: float = 10.0,
    startup_timeout_s: float = 60.0,
    plot: str | os.PathLike[str] | None = None,
) -> tuple[ReplayReport, Path | None]:
    """Replay ``bag`` through the graph of ``export`` (see the module documentation); the
    report and the plot written (None when Pillow is missing and no ``plot`` was asked for).

    Raises:
        SpecError, PlanError, BagError, DependencyError: before anything starts.
    """
    from leapp.errors import DependencyError
    from leapp_ros.bag.bag_ticks import load_ticks
    from leapp_ros.bag.deviation_plot import require_plotting
    from leapp_ros.run.processes import load_plan
    from leapp_ros.testing import GraphAssertionError, GraphUnderTest
    from leapp_ros.testing.replay import AGAINST, RATES, ReplayReport, replay
    from leapp_ros.tools.verification import find_export

    target = Path(plot) if plot is not None else default_plot_path(bag)
    try:
        require_plotting()
    except DependencyError:
        if plot is not None:
            raise
        logger.warning("no plot of the deviations: Pillow is not installed")
        target = None
    if rate not in RATES or against not in AGAINST:  # argparse checks these for the command
        raise ValueError(f"rate {rate!r}, against {against!r}: choose from {RATES}, {AGAINST}")
    plan = load_plan(find_export(export))  # the checksums are verified here
    ticks = load_ticks(plan, bag, remaps, recorded=against == "recorded")
    deployment = Deployment.parse(deployment)
    graph = GraphUnderTest(plan, deployment, timeout_s=startup_timeout_s, step_timeout_s=timeout_s)
    try:
        graph.start()
        report = replay(graph, ticks, rate=rate, against=against, rtol=rtol, atol=atol)
    except GraphAssertionError as e:  # the graph never became ready: nothing was compared
        report = ReplayReport(
            ticks.bag,
            plan.namespace,
            deployment.description,
            against,
            len(ticks.ticks),
            0,
            (),
            rtol,
            atol,
            stopped=str(e),
        )
    finally:
        graph.close(check=False)
    if target is not None:
        report.plot(target)
    return report, target


def add_bag_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``leapp-ros verify --bag``."""
    bag = parser.add_argument_group("a recorded bag (leapp_ros.testing.replay)")
    bag.add_argument(
        "--bag", type=Path, help="replay this rosbag2 folder's input topics, tick by tick"
    )
    bag.add_argument(
        "--remap",
        action="append",
        default=[],
        metavar="FROM:=TO",
        help="graph topic FROM takes the bag's topic TO (e.g. preprocess/joint_states:="
        "/joint_states); repeat it for more",
    )
    bag.add_argument(
        "--rate",
        choices=("asap", "realtime"),
        default="asap",
        help="each tick once the last one was answered (asap), or no faster than recorded",
    )
    bag.add_argument(
        "--against",
        choices=("pipeline", "recorded"),
        default="pipeline",
        help="compare with leapp.Pipeline on the bag's inputs, or with the outputs in the bag",
    )
    bag.add_argument(
        "--plot",
        type=Path,
        metavar="PATH.png",
        help="the plot of the largest difference per topic over time (default: "
        "<bag>_verify.png beside the bag; needs Pillow)",
    )


def verify_bag_command(args: argparse.Namespace) -> int:
    """``leapp-ros verify --bag``: print the report; the exit code."""
    from leapp_ros.bag.bag_file import BagError

    if args.inputs is not None:
        raise BagError("give --bag or --inputs, not both: each is a source of inputs")
    report, plot = verify_bag(
        args.export, args.bag, remaps=args.remap, rate=args.rate, against=args.against,
        deployment=args.deployment, rtol=args.rtol, atol=args.atol,
        timeout_s=args.timeout, startup_timeout_s=max(60.0, args.timeout), plot=args.plot,
    )  # fmt: skip
    print(report.format())
    if plot is not None:
        print(f"plot: {plot}")
    return 0 if report.ok else 1
