"""A package of ``leapp-ros generate`` installed with pip into a folder, and its launch files
as the real launch stack (launch, launch_ros) reads and evaluates them: what
``ros2 launch`` would start, without starting it.

:func:`install` runs ``pip install --target`` (never into the test environment);
:func:`evaluate_launch_file` loads a launch file, applies its declared defaults and the given
launch arguments, and evaluates every ``LifecycleNode`` (its command line, with the ``-p``
rules and ``--params-file`` in order) and every ``ComposableNodeContainer`` (its command line
and each component's name, namespace, plugin and parameters).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["Component", "Evaluated", "Process", "evaluate_launch_file", "install"]


def install(package: Path, target: Path) -> Path:
    """``package`` installed with ``pip install --target target`` (built from a copy, so the
    generated tree stays clean); ``target``."""
    source = Path(shutil.copytree(package, target.parent / f"{target.name}_source"))
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation"]
    pip += ["--no-index", "--no-compile", "--quiet", "--target", str(target), str(source)]
    subprocess.run(pip, check=True, capture_output=True, timeout=120)
    return target


@dataclass(frozen=True)
class Process:
    """A node process: its executable, ROS node name and namespace, ``-p`` rules (YAML
    values read back), and every ``--ros-args`` entry in command-line order (``rules``: ``("p",
    name)``, ``("params-file", path)``, ...), which is the order ROS applies them in."""

    executable: Path
    name: str
    namespace: str
    parameters: dict[str, Any]
    rules: list[tuple[str, str]]


@dataclass(frozen=True)
class Component:
    """A component of a container: what the container is asked to load."""

    name: str
    namespace: str
    package: str
    plugin: str
    parameters: tuple[Any, ...]  # dicts and parameter files, in the order they are given


@dataclass(frozen=True)
class Evaluated:
    """A launch file as evaluated: its declared arguments (name -> DeclareLaunchArgument), the
    values they took, its node processes, and per container process its components."""

    arguments: dict[str, Any]
    values: dict[str, str]
    processes: list[Process] = field(default_factory=list)
    containers: list[tuple[Process, list[Component]]] = field(default_factory=list)


def evaluate_launch_file(path: Path, prefix: Path, **arguments: str) -> Evaluated:
    """Evaluate the launch file ``path`` with the real launch stack, the packages of
    ``prefix`` first on AMENT_PREFIX_PATH, and ``arguments`` over the declared defaults."""
    from launch import LaunchContext
    from launch.actions import DeclareLaunchArgument
    from launch.launch_description_sources import (
        get_launch_description_from_python_launch_file,
    )
    from launch_ros.actions import ComposableNodeContainer, Node

    saved = os.environ.get("AMENT_PREFIX_PATH")
    os.environ["AMENT_PREFIX_PATH"] = os.pathsep.join(filter(None, [str(prefix), saved]))
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
        for entity in description.entities:
            if isinstance(entity, ComposableNodeContainer):
                evaluated.containers.append(
                    (_process(entity, context), _components(entity, context))
                )
            elif isinstance(entity, Node):
                evaluated.processes.append(_process(entity, context))
        return evaluated
    finally:
        if saved is None:
            os.environ.pop("AMENT_PREFIX_PATH", None)
        else:
            os.environ["AMENT_PREFIX_PATH"] = saved


def _process(node: Any, context: Any) -> Process:
    """The command line launch_ros builds for ``node`` (what Node.execute does before it
    starts the process: substitutions, then the node name and namespace rules)."""
    node._perform_substitutions(context)
    name = node.node_name.rsplit("/", 1)[-1]
    namespace = node.expanded_node_namespace
    context.extend_locals(
        {"ros_specific_arguments": {"name": f"__node:={name}", "ns": f"__ns:={namespace}"}}
    )
    node.prepare(context)
    command = node.process_details["cmd"]
    rules, parameters = [], {}
    flags = iter(command[1:])
    for flag in flags:
        if flag in ("-p", "--param", "-r", "--remap", "--params-file", "--log-level"):
            value = next(flags)
            rules.append((flag.lstrip("-"), value))
            if flag in ("-p", "--param"):
                key, _, text = value.partition(":=")
                parameters[key] = yaml.safe_load(text)
    return Process(Path(command[0]), name, namespace, parameters, rules)


def _components(container: Any, context: Any) -> list[Component]:
    from launch.utilities import perform_substitutions
    from launch_ros.utilities import evaluate_parameters

    components = []
    for description in container._ComposableNodeContainer__composable_node_descriptions:
        components.append(
            Component(
                perform_substitutions(context, description.node_name),
                perform_substitutions(context, description.node_namespace),
                perform_substitutions(context, description.package),
                perform_substitutions(context, description.node_plugin),
                tuple(evaluate_parameters(context, description.parameters)),
            )
        )
    return components
