"""A ROS 2 component container for pipeline nodes: the ``leapp_container`` executable.

::

    leapp_container [EXPORT [--namespace NS] [--nodes a,b]] [--log-level L] [--ros-args ...]

The process has a container node (``leapp_container``, or ``leapp_container_<first node>`` when
``--nodes`` pre-loads only some of EXPORT's nodes, so that hosts composing shares of one graph
name their containers apart (:func:`~leapp_ros.plan.selection.container_name`); renamed by
``-r __node:=``; its namespace is ``-r __ns:=``, else NS or the pipeline name when EXPORT is
given, else ``/``) that serves
composition_interfaces' ``~/_container/load_node``, ``unload_node`` and ``list_nodes``
(:mod:`leapp_ros.run.composition`), so ``ros2 component list | load | unload`` and launch_ros's
``ComposableNodeContainer`` work with it. Every node spins on one executor, so topics between
them never leave the process's DDS participant. Load a pipeline node with::

    ros2 component load /torch_pipeline/leapp_container leapp_ros leapp_ros::PipelineNode \\
        -r __node:=policy -r __ns:=/torch_pipeline -p spec_path:=exports/torch_pipeline

``EXPORT`` (the export folder or its YAML spec) pre-loads pipeline nodes: each one (or those
``--nodes`` names) becomes a :class:`~leapp_ros.node.pipeline_node.PipelineNode` named like
the pipeline node, under ``NS`` (default: the pipeline name); they are listed with unique ids 1..n
and can be
unloaded like loaded ones. The spec is read and its checksums verified once for them. The
container's ``--ros-args`` apply to them too (e.g. ``-p firing:=timer``, or ``--params-file F``,
whose ``/**/<node>: ros__parameters`` sections reach one node each), except remaps of ``__node``
and ``__ns``, which name the container node only. Nodes loaded through the service take only
their request's arguments. The nodes share one process, so those given a ``cpu_affinity`` must
be given the same one.

Where composition_interfaces is not installed, the container runs an EXPORT's nodes without
services (it says so at debug level); without an EXPORT it has nothing to do, a startup error.

Exit codes: 0 after SIGINT/SIGTERM, 2 for a startup problem (one error line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from leapp_ros.node.executor import run_nodes, startup_failure
from leapp_ros.plan.selection import CONTAINER_NAME

__all__ = ["main"]

PROGRAM = "leapp_container"

# rcl options that take a value: the value is never an option of its own
_VALUED = {"-r", "--remap", "-p", "--param", "--params-file", "-e", "--enclave", "--log-level"}
_REMAPS = {"-r", "--remap"}
_NAME_REMAPS = ("__node:=", "__name:=", "__ns:=")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="A ROS 2 component container for the nodes of exported leapp pipelines, "
        "optionally pre-loaded with the nodes of one export.",
        epilog="Arguments after --ros-args go to ROS as usual.",
    )
    parser.add_argument(
        "export", nargs="?", help="export folder of a pipeline, or its YAML spec, to pre-load"
    )
    parser.add_argument(
        "--namespace", help="ROS namespace of the pre-loaded nodes (default: the pipeline name)"
    )
    parser.add_argument(
        "--nodes", help="comma-separated pipeline nodes to pre-load (default: all of them)"
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warn", "error", "fatal"),
        help="ROS log level of the process",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``leapp_container``; ``argv`` is the whole command line (default
    sys.argv: then the call is the process's whole life, and once the nodes have run
    :func:`~leapp_ros.node.executor.run_nodes` ends the process instead of returning)."""
    from leapp_ros.run.composition import INSTALL_HINT, composition_available

    args = list(sys.argv if argv is None else argv)
    ours, ros = _split_ros_args(args[1:])
    try:
        options = _parser().parse_args(ours)
    except SystemExit as e:  # --help (0) or a usage error (argparse printed it; 2)
        return int(e.code or 0)
    if options.export is None and (options.namespace or options.nodes):
        return startup_failure(PROGRAM, "--namespace and --nodes need an EXPORT to pre-load")
    serving = composition_available()
    if options.export is None and not serving:
        return startup_failure(
            PROGRAM,
            "an empty container serves load_node, unload_node and list_nodes, which need "
            f"composition_interfaces, and it is not installed: {INSTALL_HINT}; or give an "
            "EXPORT to run its nodes without services",
        )
    if options.log_level:  # a --ros-args section of its own, whatever the user's ends with
        ros = ["--ros-args", "--log-level", options.log_level, "--", *ros]

    def build(context: Any, nodes: list[Any]) -> None:
        _build(context, nodes, options, ros, serving)

    argv0 = args[0] if args else PROGRAM
    return run_nodes(PROGRAM, [argv0, *ros], build, whole_process=argv is None)


def _build(
    context: Any, nodes: list[Any], options: argparse.Namespace, ros: list[str], serving: bool
) -> None:
    """Create the container node (when ``serving``) and the pre-loaded pipeline nodes."""
    from rclpy.logging import get_logger

    spec = namespace = None
    chosen: list[str] = []
    name = CONTAINER_NAME
    if options.export is not None:
        from leapp import spec as spec_file
        from leapp_ros.plan.pipeline import check_namespace
        from leapp_ros.plan.selection import container_name

        spec = spec_file.load(options.export, verify_checksums=True)
        names = [model.name for model in spec.models]
        chosen = _chosen_nodes(options.nodes, names)
        name = container_name(names, chosen)
        namespace = check_namespace(options.namespace or spec.name)
    container = None
    if serving:
        from rclpy.node import Node

        from leapp_ros.run.composition import ComponentContainer

        node = Node(name, namespace=namespace or "/", context=context)
        nodes.append(node)
        container = ComponentContainer(node, nodes)
    else:
        get_logger(PROGRAM).debug(
            "composition_interfaces is not installed: no load_node, unload_node or list_nodes "
            "services; running the export's nodes only"
        )
    if spec is not None:
        _preload(context, nodes, container, spec, chosen, namespace, ros)
    if container is not None:
        container.serve()
        container.node.get_logger().info(
            f"component container {container.node.get_fully_qualified_name()} ready with "
            f"{len(container.listing())} node(s)"
        )


def _preload(
    context: Any,
    nodes: list[Any],
    container: Any,
    spec: Any,
    chosen: list[str],
    namespace: str,
    ros: list[str],
) -> None:
    """One PipelineNode per chosen pipeline node, with the container's ROS arguments less
    its name remaps."""
    from rclpy.parameter import Parameter

    from leapp_ros.node.intra_process import IntraProcessBus
    from leapp_ros.node.pipeline_node import PipelineNode

    spec_path = Parameter("spec_path", Parameter.Type.STRING, str(spec.path))
    arguments = without_name_remaps(ros)
    bus = container.bus if container is not None else IntraProcessBus()
    for name in chosen:
        node = PipelineNode(
            name,
            namespace=namespace,
            context=context,
            spec=spec,
            parameter_overrides=[spec_path],
            cli_args=arguments,
            use_global_arguments=False,
            bus=bus,  # intra-process communication between the export's nodes
        )
        nodes.append(node)
        if container is not None:
            container.add(node)
    _check_one_cpu_set([node for node in nodes if isinstance(node, PipelineNode)])


def without_name_remaps(arguments: Sequence[str]) -> list[str]:
    """``arguments`` (ROS arguments) without the remaps of ``__node``, ``__name`` and ``__ns``
    that apply to every node: those name the container node, not the pipeline nodes."""
    kept: list[str] = []
    inside = False
    index = 0
    while index < len(arguments):
        token = arguments[index]
        if token == "--ros-args":
            inside = True
        elif token == "--":
            inside = False
        elif inside and token in _VALUED and index + 1 < len(arguments):
            value = arguments[index + 1]
            if not (token in _REMAPS and value.startswith(_NAME_REMAPS)):
                kept += [token, value]
            index += 2
            continue
        kept.append(token)
        index += 1
    return kept


def _check_one_cpu_set(nodes: list[Any]) -> None:
    """The nodes share one process, so they cannot run on different CPUs."""
    from leapp_ros.plan.settings import StartupError

    asked = {n.pipeline_node: list(n.settings["cpu_affinity"]) for n in nodes}
    if len({tuple(cpus) for cpus in asked.values() if cpus}) > 1:
        listed = ", ".join(f"{name} {cpus}" for name, cpus in asked.items() if cpus)
        raise StartupError(
            f"the nodes of one container share its process but ask for different CPUs "
            f"(cpu_affinity: {listed}); give them the same cpu_affinity, or run them in "
            "processes of their own"
        )


def _split_ros_args(args: list[str]) -> tuple[list[str], list[str]]:
    """Our arguments, and ``--ros-args ...`` (everything from the first ``--ros-args`` on)."""
    if "--ros-args" not in args:
        return args, []
    at = args.index("--ros-args")
    return args[:at], args[at:]


def _chosen_nodes(option: str | None, names: list[str]) -> list[str]:
    from leapp_ros.plan.settings import StartupError

    if not option:
        return names
    chosen = [name.strip() for name in option.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in names]
    if unknown or not chosen:
        raise StartupError(
            f"--nodes names {unknown or option!r}, which the pipeline does not have; its "
            f"nodes are {', '.join(names)}"
        )
    return list(dict.fromkeys(chosen))


if __name__ == "__main__":
    sys.exit(main())
