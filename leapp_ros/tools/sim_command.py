"""``leapp-ros sim``: close the live graph around a MuJoCo model in lockstep.

::

    pip install 'leapp_ros[sim]'
    leapp-ros sim exports/robot_policy --mjcf robot.xml --map sim_map.yaml            # processes
    leapp-ros sim exports/robot_policy --mjcf robot.xml --map sim_map.yaml --deployment fused \\
        --out run1

The map (:mod:`leapp_ros.sim.sim_map`) says how the model becomes the graph's sensor messages
(each in the frame its message defines) and what the command does. The same loop runs with
``leapp.Pipeline`` first (the export's artifacts in this process, without ROS: the tool has
the export, not the PyTorch code it came from), then through the graph (isolated on this
machine); the report has the ticks, falls, how far the base moved, velocity tracking in the
base's frame, joint target tracking and the largest difference between the two loops'
commands. ``OUT`` (default ``sim_<pipeline>``, a new folder) receives ``bag/``, a rosbag2
folder of the graph loop (``leapp-ros verify --bag`` and ``ros2 bag`` read it), and
``commands.png``, the command difference over simulated time (when Pillow is installed). Exit
code 0 when the graph equals the ``leapp.Pipeline`` loop within ``--tolerance`` and the robot
never fell, 1 otherwise, 2 for a bad export, model, map or output folder (before anything
starts).

Camera frames are rendered offscreen through OpenGL: without a display the tool asks MuJoCo
for EGL (``MUJOCO_GL=egl``, Mesa's ``libEGL`` or a GPU driver's) unless ``MUJOCO_GL`` says
otherwise; a backend that does not start is an error (exit code 2) saying what to install.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from leapp_ros.tools.deployment_option import add_deployment_option

__all__ = ["add_sim"]


def add_sim(commands: argparse._SubParsersAction) -> None:
    """Register ``sim`` with the ``leapp-ros`` subcommands."""
    sim = commands.add_parser(
        "sim",
        help="drive a MuJoCo model with the live graph in lockstep, compared with leapp.Pipeline",
        description=(
            "Each control tick: publish the model's sensor messages (JointState, Imu, Twist, "
            "Odometry, camera Images, height samples as PointCloud2) on the graph's input "
            "topics, wait for the command, apply it (position targets "
            "through PD gains, or torques), step the physics 'decimation' times. The same loop "
            "with leapp.Pipeline (the export's artifacts, no ROS) is the reference. Needs "
            "MuJoCo: pip install 'leapp_ros[sim]'."
        ),
    )
    sim.add_argument("export", type=Path, help="export folder or YAML, or a generated package")
    sim.add_argument("--mjcf", type=Path, required=True, help="the MuJoCo model (MJCF XML)")
    sim.add_argument("--map", type=Path, required=True, help="the simulation map (YAML)")
    add_deployment_option(sim)
    sim.add_argument("--out", type=Path, help="a new folder for the bag and plot (sim_<name>)")
    sim.add_argument(
        "--tolerance", type=float, default=1e-5, help="largest command difference (1e-5)"
    )
    sim.add_argument("--timeout", type=float, default=10.0, help="seconds per tick (10)")
    sim.set_defaults(handler=_sim)


def _sim(args: argparse.Namespace) -> int:
    from leapp.errors import DependencyError
    from leapp_ros.bag.bag_file import BagError
    from leapp_ros.bag.deviation_plot import require_plotting
    from leapp_ros.run.processes import load_plan
    from leapp_ros.sim.mujoco_robot import require_mujoco
    from leapp_ros.sim.sim_loop import simulate
    from leapp_ros.sim.sim_map import load_map
    from leapp_ros.tools.verification import find_export

    require_mujoco()
    plan = load_plan(find_export(args.export))
    sim_map = load_map(args.map)
    out = args.out if args.out is not None else Path(f"sim_{plan.name}")
    if (out / "bag").exists():
        raise BagError(f"{out / 'bag'} exists already; give a new folder with --out")
    report = simulate(
        plan,
        args.mjcf,
        sim_map,
        deployment=args.deployment,
        tolerance=args.tolerance,
        bag=out / "bag",
        timeout_s=args.timeout,
        startup_timeout_s=max(60.0, args.timeout),
    )
    print(report.format())
    try:
        require_plotting()
    except DependencyError as e:
        print(f"no plot: {e}")
    else:
        print(f"plot: {report.plot(out / 'commands.png')}")
    return 0 if report.ok else 1
