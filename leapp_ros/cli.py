"""The ``leapp-ros`` command line.

``leapp-ros run EXPORT`` runs an exported pipeline as a graph of ROS 2 nodes where ROS 2 comes
from pip and ``ros2 launch`` does not exist (on a full ROS 2 install ``ros2 launch leapp_ros
pipeline.launch.py pipeline:=EXPORT`` starts the same processes)::

    leapp-ros run exports/torch_pipeline                 # one process per node
    leapp-ros run exports/torch_pipeline --composed      # every node in one process
    leapp-ros run exports/torch_pipeline --restart --namespace robot1/policy \\
        --params-file my_params.yaml --log-level warn

Ctrl-C (SIGINT) or SIGTERM stops every node and exits 0. A node that dies is reported and the
others are stopped (exit code 1), or with ``--restart`` it is started again (at most 5 times
within 60 s). A missing export, an invalid spec or a bad option exits with code 2 and says why.
Further subcommands (``inspect``, ``generate``, ``verify``) register themselves the same way
as ``run``: one ``_add_<name>`` function each.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from leapp.errors import LeappError
from leapp_ros.processes import LOG_LEVELS
from leapp_ros.runner import EXIT_USAGE, make_graph, serve

__all__ = ["build_parser", "main"]

PROG = "leapp-ros"
_LOGGING_LEVELS = {"debug": logging.DEBUG, "warn": logging.WARNING, "error": logging.ERROR,
                   "fatal": logging.CRITICAL}  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run exported leapp pipelines as ROS 2 nodes.",
        epilog=f"'{PROG} COMMAND --help' describes each command.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_run(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``leapp-ros`` with ``argv`` (default: ``sys.argv[1:]``); the exit code."""
    args = build_parser().parse_args(argv)  # bad usage: argparse prints it and exits with 2
    level = _LOGGING_LEVELS.get(getattr(args, "log_level", None) or "info", logging.INFO)
    logging.basicConfig(level=level, format=f"[{PROG}] %(message)s", stream=sys.stderr)
    try:
        return args.handler(args)
    except LeappError as error:  # SpecError, PlanError: what is wrong and what to do
        print(f"{PROG} {args.command}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


def _add_run(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser(
        "run",
        help="run an export as a graph of ROS 2 nodes until Ctrl-C",
        description=(
            "Start one process per pipeline node (or one for all with --composed), pass their "
            "output on prefixed with the node name, and stop them all on Ctrl-C or SIGTERM."
        ),
    )
    run.add_argument("export", type=Path, help="export folder, or its <name>.yaml spec")
    run.add_argument(
        "--composed", action="store_true", help="run every node in one process (one executor)"
    )
    run.add_argument("--namespace", help="ROS namespace of the nodes (default: pipeline name)")
    run.add_argument(
        "--restart",
        action="store_true",
        help="start a node again when it dies (backoff; at most 5 times within 60 s)",
    )
    run.add_argument(
        "--log-level", type=str.lower, choices=LOG_LEVELS, help="ROS log level of the nodes"
    )
    run.add_argument("--params-file", type=Path, help="ROS 2 parameters YAML for every node")
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    graph = make_graph(
        args.export,
        composed=args.composed,
        namespace=args.namespace,
        restart=args.restart,
        log_level=args.log_level,
        params_file=args.params_file,
    )
    return serve(graph)


if __name__ == "__main__":
    sys.exit(main())
