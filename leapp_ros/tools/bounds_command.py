"""``leapp-ros bounds``: the range each external input took in a recorded run, as a params file
of out-of-domain guards (``ports.<input>.min`` / ``max``, docs: how-to, operate a robot
safely).

::

    leapp-ros record exports/arm_policy --out good_run          # a run the policy handled well
    leapp-ros bounds exports/arm_policy --bag good_run --out bounds.yaml --margin 0.2
    leapp-ros run exports/arm_policy --params-file bounds.yaml   # values outside: dropped

Every message on an external input topic of the graph is read as the graph reads it (a
JointState by joint name, an Imu's fields, a MultiArray's values); per float input port and
element of its last axis, the smallest and largest value seen, widened on each side by
``--margin`` times the width of that range (an element that never changed: by ``--margin``
times its magnitude, at least ``--margin``). The file has one section per pipeline node (and
``/**`` for ``leapp_fused``, when the port names are unique) with ``on_out_of_domain`` as
given. Exit code 0; 2 when the export or the bag is wrong.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["add_bounds", "input_ranges"]


def add_bounds(commands: argparse._SubParsersAction) -> None:
    """Register ``bounds`` with the ``leapp-ros`` subcommands."""
    bounds = commands.add_parser(
        "bounds",
        help="write the input ranges seen in a recorded run as out-of-domain guards",
        description=(
            "Read every external input message of the graph in a rosbag2 folder and write a "
            "ROS 2 params file setting ports.<input>.min / max (per element, widened by "
            "--margin) and on_out_of_domain for each float input port."
        ),
    )
    bounds.add_argument("export", type=Path, help="export folder or YAML")
    bounds.add_argument("--bag", type=Path, required=True, help="the recorded run (rosbag2)")
    bounds.add_argument("--out", type=Path, required=True, help="the params file to write")
    bounds.add_argument(
        "--margin", type=float, default=0.1, help="widen each range by this share of it (0.1)"
    )
    bounds.add_argument(
        "--action", choices=("drop", "safe"), default="drop", help="on_out_of_domain (drop)"
    )
    bounds.add_argument("--namespace", help="ROS namespace of the graph (default: pipeline name)")
    bounds.set_defaults(handler=_bounds)


def input_ranges(
    plan: Any, bag: Any, margin: float
) -> dict[str, dict[str, tuple[list[float], list[float]]]]:
    """``{node: {port: (min, max)}}`` of every float external input port of ``plan`` in
    ``bag`` (a path or :class:`~leapp_ros.bag.bag_file.BagContents`), widened by ``margin``.

    Raises:
        BagError: the bag is unreadable or holds no message on an input topic.
    """
    from leapp_ros.bag.bag_file import BagContents, BagError, read_bag
    from leapp_ros.bag.bag_ticks import input_readers

    readers = input_readers(plan)
    contents = bag if isinstance(bag, BagContents) else read_bag(bag, set(readers))
    found: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    for topic, (node, reader) in readers.items():
        ports = [node.inputs[i] for i in reader.indices]
        values: list[list[np.ndarray]] = [[] for _ in ports]
        for message in contents.messages:
            if message.topic == topic:
                for n, value in enumerate(reader.read_raw(message.data)):
                    values[n].append(np.asarray(value, dtype=np.float64))
        if not values[0]:
            raise BagError(f"bag {contents.path} holds no message on input topic {topic}")
        for port, seen in zip(ports, values, strict=True):
            if not port.dtype.startswith("float"):
                continue
            stacked = np.stack(seen)
            width = stacked.shape[-1] if stacked.ndim > 1 else 1
            flat = stacked.reshape(-1, width)
            low, high = flat.min(axis=0), flat.max(axis=0)
            spread = high - low
            pad = np.where(spread > 0, spread, np.maximum(np.abs(high), 1.0)) * margin
            found.setdefault(node.name, {})[port.port] = (
                (low - pad).tolist(),
                (high + pad).tolist(),
            )
    return found


def _bounds(args: argparse.Namespace) -> int:
    import yaml

    from leapp_ros.run.processes import load_plan
    from leapp_ros.tools.verification import find_export

    if args.margin < 0:
        raise SystemExit(f"leapp-ros bounds: --margin must be >= 0, got {args.margin}")
    plan = load_plan(find_export(args.export), args.namespace)
    ranges = input_ranges(plan, args.bag, args.margin)
    document: dict[str, Any] = {}
    names = [port for ports in ranges.values() for port in ports]
    for node, ports in ranges.items():
        section = {
            port: {"min": low, "max": high, "on_out_of_domain": args.action}
            for port, (low, high) in ports.items()
        }
        document[f"{plan.namespace}/{node}"] = {"ros__parameters": {"ports": section}}
    if len(names) == len(set(names)):  # leapp_fused: one name, one port
        merged = {port: entry for n in ranges for port, entry in _section(document, plan, n)}
        document[f"{plan.namespace}/leapp_fused"] = {"ros__parameters": {"ports": merged}}
    args.out.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    print(f"wrote {args.out}: the ranges of {len(names)} input port(s) in {args.bag}")
    return 0


def _section(document: dict[str, Any], plan: Any, node: str) -> Any:
    return document[f"{plan.namespace}/{node}"]["ros__parameters"]["ports"].items()
