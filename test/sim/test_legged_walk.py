"""A quadruped trots through ``leapp-ros sim`` as it does in plain MuJoCo with eager PyTorch.

The trotter of :mod:`support.trotter` (a free base whose inertia axes are rotated from its
frame, eight leg joints) walks 2 s under its scripted gait policy, exported with leapp, in two
loops from the same start: the simulator's (:func:`leapp_ros.sim.sim_loop.simulate`, the entry
of ``leapp-ros sim``: sensor messages over the live graph, one process per node), and a plain
MuJoCo loop where the traced functions run eagerly in PyTorch on MuJoCo's own sensor readings
(``data.sensordata``). The policy feeds the IMU's pitch and roll rates back into the legs, so
a gyro read in another frame, or a step late, changes the commands at once. Both loops must
give the same commands and the same base trajectory, tick by tick, within 1e-5 (float32
artifacts against eager float32 PyTorch), and the robot must walk forward without a fall.
``leapp.Pipeline``'s loop (the simulator's second loop) must agree as well.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from support.trotter import MAP, PlainLoop, export_trot_policy, write_trotter_model

from leapp_ros.run.processes import load_plan
from leapp_ros.sim.sim_loop import simulate
from leapp_ros.sim.sim_map import load_map

pytestmark = pytest.mark.ros

pytest.importorskip("mujoco", reason="leapp-ros sim needs MuJoCo: pip install 'leapp_ros[sim]'")

TICKS = 100  # 2 s of walking at 50 Hz
TOLERANCE = 1e-5  # per command (rad) and per base coordinate (m)


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    folder = tmp_path_factory.mktemp("walk")
    export, mjcf = export_trot_policy(folder), write_trotter_model(folder)
    map_path = folder / "map.yaml"
    map_path.write_text(yaml.safe_dump({**MAP, "ticks": TICKS}), encoding="utf-8")
    plain = PlainLoop(mjcf).run(TICKS)
    report = simulate(load_plan(export), mjcf, load_map(map_path), deployment="processes")
    return SimpleNamespace(plain=plain, report=report)


def first_difference(ours, reference, what: str) -> str:
    """The largest difference per tick, and the first tick over the tolerance."""
    differences = np.abs(np.asarray(ours) - np.asarray(reference)).reshape(len(ours), -1)
    largest = differences.max(axis=1)
    over = np.flatnonzero(largest > TOLERANCE)
    if not len(over):
        return ""
    tick = int(over[0])
    return (
        f"{what} differ by up to {largest.max():.3g}; first over {TOLERANCE:g} at tick {tick}:"
        f" {np.asarray(ours)[tick].tolist()} against {np.asarray(reference)[tick].tolist()}"
    )


def test_the_graph_commands_the_trotter_as_eager_pytorch_does_in_plain_mujoco(walk):
    report, plain = walk.report, walk.plain
    assert report.stopped is None, report.format()
    assert len(report.graph.commands) == TICKS, report.format()
    problem = first_difference(report.graph.commands, plain.commands, "commands")
    assert not problem, f"{problem}\n{report.format()}"
    positions = [state.position for state in report.graph.states]
    problem = first_difference(positions, plain.positions, "base positions")
    assert not problem, f"{problem}\n{report.format()}"


def test_the_trotter_walks_forward_without_a_fall(walk):
    report, plain = walk.report, walk.plain
    assert plain.positions[-1][0] > 0.4, f"the plain loop walked {plain.positions[-1]}"
    assert report.graph.falls == 0 and report.ok, report.format()
    assert "base ended at x" in report.format(), report.format()


def test_leapp_pipelines_loop_commands_as_eager_pytorch_too(walk):
    problem = first_difference(walk.report.pipeline.commands, walk.plain.commands, "commands")
    assert not problem, f"{problem}\n{walk.report.format()}"
