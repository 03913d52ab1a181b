"""The perception example closes the loop through the live graph in MuJoCo, in every mode:
a depth encoder (ONNX) and a GRU policy (TorchScript, its hidden state the node's state),
fitted here by imitation, steer the rover around an obstacle only the camera shows, to the
goal; every command equals eager PyTorch on the inputs that produced it; with the camera
covered or stopped the watchdog's safe action (the hold) comes, and driving resumes after.

The networks are fitted once for the module (``examples/perception/train.py``, seeded, on
CPU) and exported with leapp; each mode drives the rover of ``rover.xml`` (the obstacle
0.2 m right of the straight line) as ``sim_map.yaml`` says, with
:class:`support.rover_loop.RoverLoop`: :data:`BEFORE` ticks, the camera covered (a frame of
zeros) until the hold came 3 times, :data:`BETWEEN` ticks, the camera stopped until the hold
came 3 times, then the rest of :data:`TICKS` driving ticks. ``pytest -s`` prints per mode the
ticks, frames, commands, holds, wrong commands, the times to the safe action, the distance to
the goal and the closest approach to the obstacle. ``leapp-ros sim`` (fused, the example's
map) must drive it to the goal too, its commands equal to ``leapp.Pipeline``'s.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch
import yaml

pytestmark = [pytest.mark.ros, pytest.mark.slow]

mujoco = pytest.importorskip(
    "mujoco", reason="leapp-ros sim needs MuJoCo: pip install 'leapp_ros[sim]'"
)

from perception import train  # noqa: E402
from support.rover_loop import HOLDS, TIMEOUT_S, RoverLoop, params_document  # noqa: E402

from leapp_ros.run.processes import load_plan  # noqa: E402
from leapp_ros.sim.mujoco_robot import SimulatedRobot  # noqa: E402
from leapp_ros.sim.sim_loop import simulate  # noqa: E402
from leapp_ros.sim.sim_map import load_map  # noqa: E402
from leapp_ros.testing import Deployment, GraphOptions, GraphUnderTest  # noqa: E402

TICKS = 90  # driving ticks (9 s), faults not counted: the walks train.py fits on
BEFORE, BETWEEN = 20, 10
OBSTACLE_Y = -0.2  # rover.xml's obstacle
GOAL_RADIUS = 0.15  # m: reached
MJCF, MAP = train.HERE / "rover.xml", train.HERE / "sim_map.yaml"


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """The fitted networks, exported: ``(encoder, policy)`` and the export folder."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        nets = train.train(MJCF, MAP, seed=0, log=lambda line: None)
    finally:
        torch.set_num_threads(threads)
    folder = tmp_path_factory.mktemp("rover")
    weights = folder / "rover.pt"
    torch.save({"encoder": nets[0].state_dict(), "policy": nets[1].state_dict()}, weights)
    return SimpleNamespace(nets=nets, export=train.deploy.export(weights, folder / "export"))


@pytest.fixture(scope="module")
def summary():
    """Per mode, the figures the module documentation names; printed once every mode ran."""
    rows: dict[str, dict[str, Any]] = {}
    yield rows
    for mode, row in rows.items():
        print(f"\nperception loop ({mode}): " + ", ".join(f"{k} {v}" for k, v in row.items()))


@pytest.fixture(scope="module", params=list(Deployment), ids=str)
def drive(request, fitted, summary, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"rover_{request.param}")
    params = folder / "params.yaml"
    params.write_text(yaml.safe_dump(params_document()), encoding="utf-8")
    with (
        open(folder / "nodes.log", "w", encoding="utf-8") as log,
        GraphUnderTest(
            fitted.export, GraphOptions(request.param, params_file=params), output=log
        ) as graph,
    ):
        robot = SimulatedRobot(MJCF, load_map(MAP), graph.plan)
        try:
            loop = RoverLoop(graph, robot, train.deploy, fitted.nets)
            loop.run(BEFORE)
            covered = loop.fault("covered", "covered")
            loop.run(BETWEEN)
            stopped = loop.fault("stopped", "stopped")
            loop.run(TICKS - BEFORE - BETWEEN)
        finally:
            robot.close()
        status = graph.wait_received(timeout_s=30.0)  # every message sent has been taken
        tail = "\n".join(graph.output.splitlines()[-20:])
    end = loop.positions[-1]
    distance = float(((end[0] - train.deploy.GOAL[0]) ** 2 + (end[1] - train.deploy.GOAL[1]) ** 2)
                     ** 0.5)  # fmt: skip
    closest = min(train.clearance(p, OBSTACLE_Y) for p in loop.positions)
    summary[request.param.value] = {
        "ticks": loop.ticks,
        "depth frames": loop.frames,
        "commands": loop.commands,
        "holds": loop.holds,
        "wrong": len(loop.wrong),
        "safe action after (covered) s": _seconds(covered.safe_after_s),
        "safe action after (stopped) s": _seconds(stopped.safe_after_s),
        "goal distance m": round(distance, 3),
        "closest to the obstacle m": round(closest, 3),
    }
    return SimpleNamespace(loop=loop, covered=covered, stopped=stopped, distance=distance,
                           closest=closest, status=status, tail=f"\nnodes:\n{tail}")  # fmt: skip


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def test_every_command_equals_eager_pytorch_with_the_gru_state_carried(drive):
    loop = drive.loop
    assert not loop.wrong, f"{len(loop.wrong)} wrong:\n" + "\n".join(loop.wrong[:10]) + drive.tail
    assert loop.commands == TICKS, f"{loop.commands} commands for {TICKS} driving ticks"


def test_the_rover_reaches_the_goal_without_touching_the_obstacle(drive):
    assert drive.distance <= GOAL_RADIUS, f"ended {drive.distance:.3f} m from the goal"
    assert drive.closest > 0.0, f"touched the obstacle ({drive.closest:.3f} m)"


@pytest.mark.parametrize("fault", ["covered", "stopped"])
def test_a_covered_or_stopped_camera_gets_only_the_hold_after_the_watchdogs_timeout(drive, fault):
    record = getattr(drive, fault)
    assert record.kinds.count("safe") >= HOLDS, f"{record.ticks} ticks: {record.kinds}"
    assert set(record.kinds) == {"safe"}, f"while the camera was {fault}: {record.kinds}"
    # A lower bound only: the watchdog counts from the last valid set, which came before the
    # last command's arrival; a loaded machine only makes the hold later.
    after_command = record.first_safe - record.last_command_at
    assert after_command >= TIMEOUT_S - 0.005, f"the hold came {after_command:.3f} s after"


def test_the_encoder_drops_every_covered_frame_and_the_policy_counts_its_timeouts(drive):
    encoder, policy = drive.status["encoder"], drive.status["policy"]
    assert encoder["nonfinite_outputs"] == drive.covered.ticks, encoder
    # one stretch without commands per fault (more where the first tick came late, or the
    # last tick's silence lasted past the timeout before this record)
    assert policy["timeouts"] >= 2, policy
    assert policy["safe_actions"] >= drive.loop.holds, policy


def test_leapp_ros_sim_drives_the_rover_to_the_goal_as_leapp_pipeline_does(fitted):
    """What the how-to page runs: ``leapp-ros sim`` with the example's map, fused."""
    report = simulate(load_plan(fitted.export), MJCF, load_map(MAP), deployment=Deployment.FUSED)
    assert report.ok, report.format()
    positions = [state.position[:2] for state in report.graph.states]
    goal_x, goal_y = train.deploy.GOAL
    distance = ((positions[-1][0] - goal_x) ** 2 + (positions[-1][1] - goal_y) ** 2) ** 0.5
    assert distance <= GOAL_RADIUS, report.format()
    assert min(train.clearance(p, OBSTACLE_Y) for p in positions) > 0.0, report.format()
