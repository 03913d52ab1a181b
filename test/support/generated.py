"""A package of ``leapp-ros generate`` installed with pip into a folder, and launch files as the
real launch stack (launch, launch_ros) reads and evaluates them: what ``ros2 launch`` would
start, without starting it.

:func:`install` runs ``pip install --target`` (never into the test environment);
:func:`evaluate_launch_file` loads a launch file, applies its declared defaults and the given
launch arguments, runs its ``OpaqueFunction`` entities (where leapp_ros builds the processes)
and reads the command line launch_ros builds for every node action it gets
(:class:`~support.command_lines.CommandLine`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.command_lines import CommandLine, read_command_line

__all__ = ["Evaluated", "evaluate_launch_file", "install"]


def install(package: Path, target: Path) -> Path:
    """``package`` installed with ``pip install --target target`` (built from a copy, so the
    generated tree stays clean); ``target``."""
    source = Path(shutil.copytree(package, target.parent / f"{target.name}_source"))
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation"]
    pip += ["--no-index", "--no-compile", "--quiet", "--target", str(target), str(source)]
    subprocess.run(pip, check=True, capture_output=True, timeout=120)
    return target


@dataclass(frozen=True)
class Evaluated:
    """A launch file as evaluated: its declared arguments (name -> DeclareLaunchArgument), the
    values they took, and the command line of every process it starts with the kind of its
    launch_ros action (``LifecycleNode``, ``ComposableNodeContainer``), in order."""

    arguments: dict[str, Any]
    values: dict[str, str]
    processes: list[CommandLine] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)


def evaluate_launch_file(path: Path, prefix: Path | None = None, **arguments: str) -> Evaluated:
    """Evaluate the launch file ``path`` with the real launch stack, the packages of
    ``prefix`` first on AMENT_PREFIX_PATH, and ``arguments`` over the declared defaults."""
    from launch import LaunchContext
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.launch_description_sources import (
        get_launch_description_from_python_launch_file,
    )
    from launch_ros.actions import Node

    saved = os.environ.get("AMENT_PREFIX_PATH")
    entries = [str(prefix)] if prefix is not None else []
    os.environ["AMENT_PREFIX_PATH"] = os.pathsep.join(filter(None, [*entries, saved]))
    try:
        description = get_launch_description_from_python_launch_file(str(path))
        context = LaunchContext()
        context.launch_configurations.update(arguments)
        declared = {}
        for entity in description.entities:
            if isinstance(entity, DeclareLaunchArgument):
                declared[entity.name] = entity
                entity.execute(context)  # its default, where no value was given; checks choices
        evaluated = Evaluated(declared, dict(context.launch_configurations))
        entities = list(description.entities)
        while entities:
            entity = entities.pop(0)
            if isinstance(entity, OpaqueFunction):
                entities[:0] = entity.execute(context) or []
            elif isinstance(entity, Node):
                evaluated.processes.append(read_command_line(_command(entity, context)))
                evaluated.kinds.append(type(entity).__name__)
        return evaluated
    finally:
        if saved is None:
            os.environ.pop("AMENT_PREFIX_PATH", None)
        else:
            os.environ["AMENT_PREFIX_PATH"] = saved


def _command(node: Any, context: Any) -> list[str]:
    """The command line launch_ros builds for ``node`` (what Node.execute does before it
    starts the process: substitutions, then the node name and namespace rules)."""
    node._perform_substitutions(context)
    name = node.node_name.rsplit("/", 1)[-1]
    namespace = node.expanded_node_namespace
    context.extend_locals(
        {"ros_specific_arguments": {"name": f"__node:={name}", "ns": f"__ns:={namespace}"}}
    )
    node.prepare(context)
    return list(node.process_details["cmd"])
