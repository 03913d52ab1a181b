"""``--ros-args`` after ``leapp-ros run EXPORT``, as ROS 2 users type them.

``ros2 run`` passes everything after ``--ros-args`` to one node. ``leapp-ros run`` starts a
graph of them, so it takes the rules that make sense for every node of a graph and turns
them into its own options::

    leapp-ros run exports/robot_policy --ros-args -r preprocess/joint_states:=/joint_states \\
        --params-file robot.yaml --log-level warn
    # the same as
    leapp-ros run exports/robot_policy --remap preprocess/joint_states:=/joint_states \\
        --params-file robot.yaml --log-level warn

Taken: ``-r`` / ``--remap FROM:=TO`` (``__ns:=/NS`` sets the namespace), ``--params-file
FILE`` and ``--log-level LEVEL``. An optional ``--`` ends the section. Refused with what to do
instead: ``-r __node:=…`` (every node keeps its pipeline name), ``-p`` / ``--param`` (one
parameter for every node: write it in a params file's ``/**: ros__parameters`` section) and
anything else.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from leapp_ros.run.deployment import LOG_LEVELS

__all__ = ["RosArguments", "apply_ros_arguments", "split_ros_arguments"]

ROS_ARGS = "--ros-args"
_NAME_REMAPS = ("__node:=", "__name:=")


@dataclass(frozen=True)
class RosArguments:
    """What a ``--ros-args`` section said, as ``leapp-ros run`` options.

    Attributes:
        remaps: ``FROM:=TO`` rules for every node, in the order given.
        namespace: from ``-r __ns:=/NS`` (None: not given).
        params_file: from ``--params-file`` (None: not given).
        log_level: from ``--log-level`` (None: not given).
    """

    remaps: tuple[str, ...] = ()
    namespace: str | None = None
    params_file: str | None = None
    log_level: str | None = None


def split_ros_arguments(argv: Sequence[str]) -> tuple[list[str], RosArguments | None]:
    """``argv`` without its ``--ros-args`` section, and that section read (None: none).

    Raises:
        ValueError: a rule ``leapp-ros run`` cannot apply to a graph, or a flag without its
            value; the message says what to write instead.
    """
    argv = list(argv)
    if ROS_ARGS not in argv:
        return argv, None
    start = argv.index(ROS_ARGS)
    end = argv.index("--", start) if "--" in argv[start:] else len(argv)
    section, rest = argv[start + 1 : end], argv[:start] + argv[end + 1 :]
    remaps: list[str] = []
    found: dict[str, str] = {}
    words = iter(section)
    for word in words:
        if word in ("-r", "--remap", "--params-file", "--log-level"):
            value = next(words, None)
            if value is None:
                raise ValueError(f"--ros-args: {word} needs a value")
            if word in ("--params-file", "--log-level"):
                found[word] = value
            elif value.startswith("__ns:="):
                found["namespace"] = value.removeprefix("__ns:=")
            elif value.startswith(_NAME_REMAPS):
                raise ValueError(
                    f"--ros-args: {value} would give every node of the graph one name; the "
                    "nodes keep their pipeline names (use -r __ns:=/NS for a namespace)"
                )
            else:
                remaps.append(value)
        elif word in ("-p", "--param"):
            raise ValueError(
                f"--ros-args: {word} sets a parameter of one node; for a graph, write it in a "
                "params file (a '/**: ros__parameters' section reaches every node, "
                "'/**/<node>: ros__parameters' one) and pass --params-file"
            )
        else:
            raise ValueError(
                f"--ros-args: '{word}' is not taken by leapp-ros run (it takes -r/--remap, "
                "--params-file and --log-level)"
            )
    ros = RosArguments(
        remaps=tuple(remaps),
        namespace=found.get("namespace"),
        params_file=found.get("--params-file"),
        log_level=found.get("--log-level"),
    )
    return rest, ros


def apply_ros_arguments(
    parser: argparse.ArgumentParser, args: argparse.Namespace, ros: RosArguments
) -> None:
    """Put what ``--ros-args`` said into the parsed ``run`` options; the same option given
    both ways is refused rather than one silently winning (``parser.error``: exit code 2)."""
    if args.command != "run":
        parser.error(f"--ros-args: only 'run' takes ROS arguments, not '{args.command}'")
    args.remap = [*args.remap, *ros.remaps]
    given = {"namespace": ros.namespace, "params_file": ros.params_file}
    given["log_level"] = ros.log_level and ros.log_level.lower()
    for name, value in given.items():
        if value is None:
            continue
        if getattr(args, name) is not None:
            flag = "--" + name.replace("_", "-")
            parser.error(f"--ros-args: {flag} is given twice (before and after --ros-args)")
        if name == "log_level" and value not in LOG_LEVELS:
            parser.error(f"--ros-args: --log-level {value}: one of {', '.join(LOG_LEVELS)}")
        setattr(args, name, Path(value) if name == "params_file" else value)
