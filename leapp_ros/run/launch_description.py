"""A pipeline's graph as a launch description: what ``pipeline.launch.py`` and the launch files
of generated packages return.

::

    ros2 launch leapp_ros pipeline.launch.py pipeline:=/path/to/export
    ros2 launch leapp_ros pipeline.launch.py pipeline:=/path/to/export deployment:=composed \\
        namespace:=robot1 log_level:=warn params_file:=/path/to/params.yaml

The launch arguments (:data:`ARGUMENTS`) are the fields of
:class:`~leapp_ros.run.deployment.GraphOptions` as strings, plus ``pipeline``. When the launch
runs they become the options (:meth:`GraphOptions.from_arguments
<leapp_ros.run.deployment.GraphOptions.from_arguments>`), the spec is loaded (checksums
verified) and planned, and :func:`~leapp_ros.run.processes.plan_processes` gives the processes:
exactly those ``leapp-ros run`` starts. Each becomes one launch_ros action
(:func:`process_action`): a ``LifecycleNode`` for a ``leapp_node`` or ``leapp_fused`` process,
which launch's lifecycle events (``ChangeState``, ``OnStateTransition``) reach, and launch_ros's
standard ``ComposableNodeContainer`` for the ``leapp_container`` process, which pre-loads the
pipeline's nodes itself (``ros2 component list`` lists them; ``LoadComposableNodes`` and ``ros2
component load`` can add more; its nodes are lifecycle nodes for ``ros2 lifecycle``). The
process's remaps, parameters file, parameters and log level are its ROS arguments as the
runner gives them, in the same order, so the parameters set here win over the file; launch_ros
adds the node name and namespace. Before each process, a log line says when each of its
pipeline nodes runs (``policy: timer at 50 Hz``). No parameters file is written to the
temporary folder.

A generated package's launch file calls :func:`pipeline_launch_description` with its installed
export, its parameters file, its namespace and its deployment as the arguments' defaults.
Needs the ROS 2 launch stack (launch, launch_ros).
"""

from __future__ import annotations

from typing import Any

from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import ComposableNodeContainer, LifecycleNode, Node

from leapp_ros.run.deployment import Deployment, GraphOptions
from leapp_ros.run.processes import STOP_TIMEOUT_S, ProcessPlan, load_plan, plan_processes

__all__ = ["ARGUMENTS", "launch_graph", "pipeline_launch_description", "process_action"]

PACKAGE = "leapp_ros"
_BOOLEAN = ["true", "false"]

#: name -> (default, choices or None, description) of every launch argument; a default of
#: None makes the argument required
ARGUMENTS: dict[str, tuple[str | None, list[str] | None, str]] = {
    "pipeline": (None, None, "the export folder, or its <name>.yaml spec"),
    "deployment": (
        Deployment.PROCESSES.value,
        [d.value for d in Deployment],
        "processes: one leapp_node process per pipeline node; composed: every node in one "
        "leapp_container process (one executor); fused: one leapp_fused node running every "
        "node per tick",
    ),
    "namespace": ("", None, "ROS namespace of the nodes (empty: the pipeline name)"),
    "log_level": ("", None, "debug, info, warn, error or fatal (empty: the nodes' info)"),
    "params_file": ("", None, "a ROS 2 parameters YAML for every node (empty: none)"),
    "cpu_latency_us": (
        "",
        None,
        "the nodes' CPU latency request in microseconds, -1 for none (empty: as the "
        "parameters file says)",
    ),
    "pin_cpus": ("false", _BOOLEAN, "true: pin each process to one CPU, round robin"),
    "remaps": ("", None, "ROS remap rules FROM:=TO for every node, separated by spaces"),
    "nodes": ("", None, "the pipeline nodes to run on this host, a comma list (empty: all)"),
    "autostart": (
        "true",
        _BOOLEAN,
        "false: every node waits, unconfigured, for ros2 lifecycle configure and activate; "
        "true: as the parameters file says (its default: start)",
    ),
    "composed": ("false", _BOOLEAN, "true: the older form of deployment:=composed"),
    "fused": ("false", _BOOLEAN, "true: the older form of deployment:=fused"),
}


def pipeline_launch_description(**defaults: str) -> LaunchDescription:
    """The launch arguments (:data:`ARGUMENTS`, with ``defaults`` in place of their own
    defaults) and, once they have values, the graph's processes (:func:`launch_graph`).

    Raises:
        ValueError: ``defaults`` names an argument that does not exist.
    """
    unknown = sorted(set(defaults) - set(ARGUMENTS))
    if unknown:
        raise ValueError(f"no launch arguments {unknown}; they are {', '.join(ARGUMENTS)}")
    declared = []
    for name, (default, choices, description) in ARGUMENTS.items():
        extra: dict[str, Any] = {} if choices is None else {"choices": choices}
        declared.append(
            DeclareLaunchArgument(
                name,
                default_value=str(defaults[name]) if name in defaults else default,
                description=description,
                **extra,
            )
        )
    return LaunchDescription([*declared, OpaqueFunction(function=launch_graph)])


def launch_graph(context: Any, *args: Any, **kwargs: Any) -> list[Any]:
    """The launch_ros actions of the graph the launch arguments of ``context`` describe.

    Raises:
        SpecError, PlanError: the export is missing or invalid, or an argument does not fit
            (the message names it).
    """
    values = {
        name: str(context.launch_configurations.get(name, ""))
        for name in ARGUMENTS
        if name != "pipeline"
    }
    options = GraphOptions.from_arguments(values)
    source = str(context.launch_configurations.get("pipeline", "")).strip()
    plan = load_plan(source, options.namespace, params_file=options.params_file)
    actions: list[Any] = []
    for process in plan_processes(plan, options):
        actions.append(LogInfo(msg=f"{process.label}: {process.describe_firing()}"))
        actions.append(process_action(process))
    return actions


def process_action(process: ProcessPlan) -> Any:
    """``process`` as the launch_ros action that starts it from the leapp_ros package: a
    ``ComposableNodeContainer`` for ``leapp_container``, a plain ``Node`` for
    ``leapp_stand_in``, else a ``LifecycleNode``. Each gets :data:`STOP_TIMEOUT_S
    <leapp_ros.run.processes.STOP_TIMEOUT_S>` from SIGINT to exit before launch sends SIGTERM,
    unless the launch sets ``sigterm_timeout`` (launch's own argument: ``ros2 launch ...
    sigterm_timeout:=20``)."""
    common: dict[str, Any] = {
        "package": PACKAGE,
        "executable": process.executable,
        "name": process.node_name,
        "namespace": process.namespace,
        "arguments": list(process.arguments),
        "ros_arguments": process.ros_arguments(naming=False),
        "output": "screen",
        "sigterm_timeout": LaunchConfiguration("sigterm_timeout", default=f"{STOP_TIMEOUT_S:g}"),
    }
    if process.executable == "leapp_container":
        return ComposableNodeContainer(composable_node_descriptions=[], **common)
    if not process.pipeline_nodes:  # the stand-in: a plain node
        return Node(**common)
    return LifecycleNode(**common)
