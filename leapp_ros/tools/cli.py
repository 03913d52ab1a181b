"""The ``leapp-ros`` command line.

``leapp-ros run EXPORT`` runs an exported pipeline as a graph of ROS 2 nodes where ROS 2 comes
from pip and ``ros2 launch`` does not exist (on a full ROS 2 install ``ros2 launch leapp_ros
pipeline.launch.py pipeline:=EXPORT`` starts the same processes)::

    leapp-ros run exports/torch_pipeline                          # one process per node
    leapp-ros run exports/torch_pipeline --deployment composed    # every node in one process
    leapp-ros run exports/torch_pipeline --deployment fused       # the whole pipeline, one node
    leapp-ros run exports/torch_pipeline --restart --namespace robot1/policy \\
        --params-file my_params.yaml --log-level warn
    leapp-ros run exports/torch_pipeline --cpu-latency-us 0 --pin-cpus   # lowest latency
    leapp-ros run exports/torch_pipeline --nodes preprocess   # this host's share of the graph
    leapp-ros run exports/torch_pipeline --no-autostart  # nodes wait for `ros2 lifecycle`
    leapp-ros run exports/torch_pipeline --ros-args -r preprocess/state:=/state  # as --remap

``--composed`` and ``--fused`` are short for ``--deployment composed`` / ``fused``. The runner
starts the processes ``ros2 launch leapp_ros pipeline.launch.py`` starts with the same options
(:func:`leapp_ros.run.processes.plan_processes`) and says "graph ready" once every node has
published a ``ready`` status record, whatever the log level.

``--nodes`` (repeatable, or a comma list) splits a graph over machines: each host runs its
nodes with the same export, namespace and ``ROS_DOMAIN_ID``, and DDS carries the topics
between them (docs: how-to, several machines). A name the pipeline lacks exits with code 2.

Ctrl-C (SIGINT) or SIGTERM stops every node and exits 0. A node that dies is reported and the
others are stopped (exit code 1), or with ``--restart`` it is started again (at most 5 times
within 60 s). A missing export, an invalid spec or a bad option exits with code 2 and says why.
Further subcommands (``inspect``, ``generate``, ``verify``) register themselves the same way
as ``run``: one ``_add_<name>`` function each::

    leapp-ros inspect exports/torch_pipeline [--namespace NS]     # nodes, topics, QoS
    leapp-ros inspect exports/torch_pipeline --picture docs/      # also its picture, PNG + SVG
    leapp-ros generate exports/torch_pipeline --out ros2_ws/src   # a ROS 2 package
    leapp-ros verify exports/torch_pipeline [--deployment fused]  # examples, random ticks
    leapp-ros verify exports/nvidia_export --ticks 50 --seed 3    # no examples: random inputs
    leapp-ros verify exports/robot_policy --bag robot_run         # a recorded bag
    leapp-ros record exports/torch_pipeline --out run             # a bag of the running graph
    leapp-ros sim exports/robot_policy --mjcf robot.xml --map sim_map.yaml  # MuJoCo in the loop
    leapp-ros switch exports/robot_policy exports/robot_policy_v2  # another policy, running
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from leapp.errors import LeappError
from leapp_ros.plan.selection import node_names
from leapp_ros.run.deployment import LOG_LEVELS, GraphOptions
from leapp_ros.run.runner import EXIT_USAGE, make_graph, serve
from leapp_ros.tools.bag_verification import add_bag_arguments, verify_bag_command
from leapp_ros.tools.bounds_command import add_bounds
from leapp_ros.tools.deployment_option import add_deployment_option
from leapp_ros.tools.record_command import add_record
from leapp_ros.tools.ros_arguments import apply_ros_arguments, split_ros_arguments
from leapp_ros.tools.sim_command import add_sim
from leapp_ros.tools.switch_command import add_switch

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
    _add_inspect(commands)
    _add_generate(commands)
    _add_verify(commands)
    add_record(commands)
    add_sim(commands)
    add_bounds(commands)
    add_switch(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``leapp-ros`` with ``argv`` (default: ``sys.argv[1:]``); the exit code."""
    parser = build_parser()
    try:
        argv, ros = split_ros_arguments(sys.argv[1:] if argv is None else argv)
    except ValueError as error:
        parser.error(str(error))  # usage and the reason; exits with 2
    args = parser.parse_args(argv)  # bad usage: argparse prints it and exits with 2
    if ros is not None:
        apply_ros_arguments(parser, args, ros)
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
            "Start the processes of the graph (one per pipeline node, or as --deployment says: "
            "the same ones ros2 launch starts), pass their output on prefixed with their "
            "label, say when every node is ready, and stop them all on Ctrl-C or SIGTERM."
        ),
    )
    run.add_argument("export", type=Path, help="export folder, or its <name>.yaml spec")
    add_deployment_option(run)
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
    run.add_argument(
        "--remap",
        action="append",
        default=[],
        metavar="FROM:=TO",
        help=(
            "a ROS remap rule for every node, e.g. preprocess/joint_states:=/joint_states "
            "(relative names resolve in the nodes' namespace); repeat it for more"
        ),
    )
    run.add_argument(
        "--cpu-latency-us",
        type=int,
        metavar="US",
        help=(
            "hold a Linux CPU latency request of US microseconds while the graph runs (0: idle "
            "CPUs keep polling): faster hops between processes, more power; needs write access "
            "to /dev/cpu_dma_latency"
        ),
    )
    run.add_argument(
        "--pin-cpus",
        action="store_true",
        help=(
            "pin each process to one CPU, round robin in pipeline order (consecutive nodes on "
            "different CPUs; the nodes' cpu_affinity parameter)"
        ),
    )
    run.add_argument(
        "--nodes",
        action="append",
        metavar="NODE[,NODE]",
        help=(
            "run only these pipeline nodes (repeat it or give a comma list; default: all), "
            "the others running on other hosts of the same ROS domain"
        ),
    )
    run.add_argument(
        "--no-autostart",
        dest="autostart",
        action="store_false",
        default=None,
        help="start every node unconfigured, publishing nothing until `ros2 lifecycle set "
        "/<namespace>/<node> configure`, then `activate` (wins over the params file)",
    )
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    options = GraphOptions(
        deployment=args.deployment,
        namespace=args.namespace,
        log_level=args.log_level,
        params_file=args.params_file,
        cpu_latency_us=args.cpu_latency_us,
        pin_cpus=args.pin_cpus,
        remaps=tuple(args.remap),
        nodes=None if args.nodes is None else node_names(args.nodes),
        autostart=args.autostart,
    )
    return serve(make_graph(args.export, options, restart=args.restart))


def _add_inspect(commands: argparse._SubParsersAction) -> None:
    inspect = commands.add_parser(
        "inspect",
        help="print the ROS 2 nodes, topics, message types and QoS an export becomes",
        description=(
            "Print the plan of an export: nodes (backend, artifact, firing), every publisher "
            "and subscription (message type, dtype, shape, QoS), feedback and state edges, and "
            "what 'ros2 topic list -t' shows once the graph runs."
        ),
    )
    inspect.add_argument("export", type=Path, help="export folder, or its <name>.yaml spec")
    inspect.add_argument("--namespace", help="ROS namespace of the nodes (default: pipeline name)")
    inspect.add_argument(
        "--params-file",
        type=Path,
        help="the nodes' ROS 2 parameters YAML: its ports.<port>.* overrides change messages, "
        "its firing and rate_hz each node's firing",
    )
    inspect.add_argument(
        "--picture",
        nargs="?",
        const=Path("."),
        type=Path,
        metavar="PATH",
        help="also draw the pipeline picture: PATH/<name>.png and .svg when PATH is a folder "
        "(default: the current one), else PATH with .png and .svg; needs Pillow",
    )
    inspect.set_defaults(handler=_inspect)


def _inspect(args: argparse.Namespace) -> int:
    from leapp.spec.picture import require_pillow
    from leapp_ros.run.processes import load_plan
    from leapp_ros.tools.inspection import describe_plan

    if args.picture is not None:
        require_pillow()  # before anything is printed: a missing Pillow exits 2, saying why
    plan = load_plan(args.export, args.namespace, params_file=args.params_file)
    sys.stdout.write(describe_plan(plan))
    if args.picture is not None:
        files = _draw_picture(plan.spec_path, args.picture)
        print(f"{PROG} inspect: drew {files.png} and {files.svg}", file=sys.stderr)
    return 0


def _draw_picture(spec_path: Path, target: Path):
    """Write the picture of the spec at ``spec_path`` as ``target`` says (see --picture)."""
    from leapp import spec as spec_module
    from leapp.spec.picture import write_picture

    spec = spec_module.load(spec_path, verify_checksums=False)  # load_plan verified them
    if target.suffix.lower() in (".png", ".svg"):
        png = target.with_suffix(".png")
    else:
        png = target / f"{spec.name}.png"
    png.parent.mkdir(parents=True, exist_ok=True)
    return write_picture(spec, png)


def _add_generate(commands: argparse._SubParsersAction) -> None:
    generate = commands.add_parser(
        "generate",
        help="write a ROS 2 package (launch files, parameters, export, test) for an export",
        description=(
            "Write OUT/<package>/, an ament_python package that runs the export as ROS 2 nodes: "
            "package.xml, setup.py, launch files (one per deployment), node parameters, the "
            "export itself and a launch_testing test. It builds with colcon and installs with "
            "pip. Regenerating rewrites generated files you did not change, never touches "
            "files you added, and refuses to overwrite generated files you edited unless "
            "given --force."
        ),
    )
    generate.add_argument("export", type=Path, help="export folder, or its <name>.yaml spec")
    generate.add_argument(
        "--out", type=Path, required=True, help="folder to write the package folder into"
    )
    generate.add_argument(
        "--package-name", help="ROS package name (default: <pipeline>_ros); [a-z][a-z0-9_]*"
    )
    generate.add_argument("--namespace", help="ROS namespace of the nodes (default: pipeline)")
    generate.add_argument(
        "--force", action="store_true", help="overwrite generated files that were edited"
    )
    generate.add_argument("--package-version", default="0.1.0", help="default: 0.1.0")
    generate.add_argument("--maintainer", default="TODO", help="package.xml maintainer name")
    generate.add_argument(
        "--maintainer-email", default="todo@example.com", help="package.xml maintainer e-mail"
    )
    generate.add_argument("--license", default="TODO", help="package.xml license, e.g. MIT")
    generate.set_defaults(handler=_generate)


def _generate(args: argparse.Namespace) -> int:
    from leapp_ros.tools.generate import generate_package

    result = generate_package(
        args.export,
        args.out,
        package_name=args.package_name,
        namespace=args.namespace,
        force=args.force,
        version=args.package_version,
        maintainer=args.maintainer,
        maintainer_email=args.maintainer_email,
        license=args.license,
    )
    print(
        f"package {result.name} in {result.path}: {len(result.written)} file(s) written, "
        f"{len(result.unchanged)} unchanged"
    )
    for title, paths in (
        ("overwrote edited files", result.overwritten),
        ("removed files no longer generated", result.removed),
        ("kept edited files no longer generated", result.kept),
    ):
        if paths:
            print(f"{title}: {', '.join(paths)}")
    print(f"next: see {result.path / 'README.md'} (colcon build --packages-select {result.name})")
    return 0


def _add_verify(commands: argparse._SubParsersAction) -> None:
    verify = commands.add_parser(
        "verify",
        help="drive the live ROS 2 graph tick by tick and compare every published tensor",
        description=(
            "Check the spec and every artifact's checksum, start the graph isolated on this "
            "machine, publish external inputs tick by tick from the first one, and compare "
            "every published tensor with the reference: the examples recorded while tracing "
            "(eager PyTorch's outputs), then --ticks seeded random ticks within their range "
            "compared with leapp.Pipeline run in this process on the same inputs; for an "
            "export without examples (NVIDIA's leapp writes none) random inputs of the ports' "
            "shapes and dtypes, or with --inputs the file's, against leapp.Pipeline. Prints "
            "the reference and one row per "
            "topic; exits 1 on a mismatch or timeout, 2 when the export is invalid or cannot "
            "be replayed (a node on a timer) or the inputs file does not fit it. With --bag, "
            "the ticks come from a recorded rosbag2 folder instead (a robot's JointState, Imu "
            "and Twist too), compared with leapp.Pipeline or the recorded outputs; a bag that "
            "does not fit exits with 2 before anything starts."
        ),
    )
    verify.add_argument(
        "export", type=Path, help="export folder or YAML, or a package from 'leapp-ros generate'"
    )
    verify.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance (1e-3)")
    verify.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance (1e-5)")
    add_deployment_option(verify)
    verify.add_argument(
        "--timeout", type=float, default=10.0, help="seconds to wait for each sample (10)"
    )
    verify.add_argument(
        "--inputs",
        type=Path,
        metavar="FILE.safetensors",
        help=(
            "external inputs to run instead of the recorded examples: one tensor per input "
            "keyed '<node>/<port>', of its dtype, with a leading ticks axis before its shape"
        ),
    )
    verify.add_argument(
        "--ticks",
        type=_positive_int,
        default=20,
        help="ticks of random inputs after the recorded examples, or alone for an export "
        "without them (20)",
    )
    verify.add_argument(
        "--seed", type=int, default=0, help="seed of the random inputs (0); the report names it"
    )
    add_bag_arguments(verify)
    verify.set_defaults(handler=_verify)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number of ticks")
    return value


def _verify(args: argparse.Namespace) -> int:
    from leapp_ros.tools.verification import verify

    if args.bag is not None:
        return verify_bag_command(args)
    report = verify(
        args.export,
        rtol=args.rtol,
        atol=args.atol,
        deployment=args.deployment,
        timeout_s=args.timeout,
        startup_timeout_s=max(60.0, args.timeout),
        inputs=args.inputs,
        random_ticks=args.ticks,
        seed=args.seed,
    )
    print(report.format())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
