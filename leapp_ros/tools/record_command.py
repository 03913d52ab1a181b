"""``leapp-ros record``: record a running graph's topics into a rosbag2 folder.

::

    leapp-ros run exports/robot_policy &                     # or ros2 launch, on the robot
    leapp-ros record exports/robot_policy --out robot_run    # Ctrl-C ends it, bag complete
    leapp-ros record exports/robot_policy --out run2 --storage sqlite3 --duration 30 \\
        --topics preprocess/joint_states policy/joint_targets
    ros2 bag info robot_run

It joins the graph in the ROS domain of the environment (``ROS_DOMAIN_ID``, discovery range as
set), like ``ros2 bag record``; the namespace is the pipeline's unless ``--namespace`` says
otherwise. SIGINT (Ctrl-C) or SIGTERM, or the end of ``--duration``, closes the bag cleanly:
it is complete, with its index and ``metadata.yaml``. Exit code 0; 2 when the export, a topic
or the output folder is wrong (before anything is recorded).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

__all__ = ["add_record"]


def add_record(commands: argparse._SubParsersAction) -> None:
    """Register ``record`` with the ``leapp-ros`` subcommands."""
    record = commands.add_parser(
        "record",
        help="record a running graph's topics into a rosbag2 folder until Ctrl-C",
        description=(
            "Subscribe to the graph's data topics (default: every external input and every "
            "node output) in the ROS domain of the environment, with the QoS their publishers "
            "offer, and write every message into a new rosbag2 folder (MCAP, or SQLite3), "
            "which 'ros2 bag info' and 'leapp-ros verify --bag' read. Ctrl-C or --duration "
            "ends it; the bag is complete then."
        ),
    )
    record.add_argument(
        "export", type=Path, help="export folder or YAML, or a package from 'leapp-ros generate'"
    )
    record.add_argument("--out", type=Path, required=True, help="the new bag folder")
    record.add_argument(
        "--topics",
        nargs="+",
        default=[],
        metavar="TOPIC",
        help="record only these data topics (relative names resolve in the namespace)",
    )
    record.add_argument(
        "--duration", type=float, metavar="S", help="stop after S seconds (default: Ctrl-C)"
    )
    record.add_argument(
        "--storage", choices=("mcap", "sqlite3"), default="mcap", help="storage (mcap)"
    )
    record.add_argument("--namespace", help="ROS namespace of the graph (default: pipeline name)")
    record.set_defaults(handler=_record)


def _record(args: argparse.Namespace) -> int:
    from leapp_ros.bag.recorder import record
    from leapp_ros.run.processes import load_plan
    from leapp_ros.tools.verification import find_export

    plan = load_plan(find_export(args.export), args.namespace)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}  # fmt: skip
    try:
        counts = record(
            plan,
            args.out,
            topics=args.topics,
            duration_s=args.duration,
            storage=args.storage,
            stop=stop,
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    total = sum(counts.values())
    print(f"leapp-ros record: {total} messages on {len(counts)} topics in {args.out}")
    for topic, count in counts.items():
        print(f"  {topic}: {count}")
    sys.stdout.flush()
    return 0
