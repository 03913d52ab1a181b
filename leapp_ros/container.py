"""Every node of an export (or some of them) in one process: the ``leapp_container`` executable.

::

    leapp_container EXPORT [--namespace NS] [--nodes a,b] [--log-level L] [--ros-args ...]

``EXPORT`` is the export folder or its YAML spec. Each pipeline node becomes one
:class:`~leapp_ros.node.PipelineNode` named like the pipeline node, under ``NS`` (default: the
pipeline name), and all of them spin on one executor, so topics between them never leave the
process's DDS participant. ``--ros-args`` applies to every node (for example ``-p
firing:=timer`` or ``--params-file F``, whose ``<node>: ros__parameters`` sections reach one
node each). The spec is read and its checksums verified once. The nodes share one process, so
those given a ``cpu_affinity`` must be given the same one.

Exit codes: 0 after SIGINT/SIGTERM, 2 for a startup problem (one error line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from leapp_ros.executor import run_nodes

__all__ = ["main"]

PROGRAM = "leapp_container"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Run every node of an exported leapp pipeline in one ROS 2 process.",
        epilog="Arguments after --ros-args go to ROS (all nodes) as usual.",
    )
    parser.add_argument("export", help="export folder of the pipeline, or its YAML spec")
    parser.add_argument(
        "--namespace", help="ROS namespace of the nodes (default: the pipeline name)"
    )
    parser.add_argument(
        "--nodes", help="comma-separated pipeline nodes to run (default: all of them)"
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warn", "error", "fatal"),
        help="ROS log level of every node",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``leapp_container``; ``argv`` is the whole command line (default
    sys.argv)."""
    args = list(sys.argv if argv is None else argv)
    ours, ros = _split_ros_args(args[1:])
    parser = _parser()
    try:
        options = parser.parse_args(ours)
    except SystemExit as e:  # --help (0) or a usage error (argparse printed it; 2)
        return int(e.code or 0)
    if options.log_level:  # a --ros-args section of its own, whatever the user's ends with
        ros = ["--ros-args", "--log-level", options.log_level, "--", *ros]

    def build(context: Any, nodes: list[Any]) -> None:
        from leapp import spec as spec_file
        from leapp_ros.node import PipelineNode
        from leapp_ros.plan import check_namespace

        spec = spec_file.load(options.export, verify_checksums=True)
        names = [model.name for model in spec.models]
        chosen = _chosen_nodes(options.nodes, names)
        namespace = check_namespace(options.namespace or spec.name)
        from rclpy.parameter import Parameter

        spec_path = Parameter("spec_path", Parameter.Type.STRING, str(spec.path))
        for name in chosen:
            nodes.append(
                PipelineNode(
                    name,
                    namespace=namespace,
                    context=context,
                    spec=spec,
                    parameter_overrides=[spec_path],
                )
            )
        _check_one_cpu_set(nodes)

    return run_nodes(PROGRAM, [args[0] if args else PROGRAM, *ros], build)


def _check_one_cpu_set(nodes: list[Any]) -> None:
    """The nodes share one process, so they cannot run on different CPUs."""
    from leapp_ros.settings import StartupError

    asked = {n.pipeline_node: n.status()["cpu_affinity"] for n in nodes}
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
    from leapp_ros.settings import StartupError

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
