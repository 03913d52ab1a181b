"""``leapp-ros sim`` closes the live graph around a MuJoCo model in lockstep: a pendulum held up
by a policy exported here runs in every mode with the graph's commands equal, tick by tick
within 1e-5, to eager PyTorch's in a plain MuJoCo loop (the traced functions called on
MuJoCo's own sensor readings, ``data.sensordata``), and to the simulator's own reference, the
``leapp.Pipeline`` loop; a zero policy lets it fall and the report says so, and maps that do
not fit their schema, the model or the graph get errors naming what is wrong.

The model: one hinge about y at the floor, a 0.5 m pole with a 1 kg head; upright is unstable
(gravity's torque is about 4.9 N m per rad). The policy: ``observe`` (TorchScript) builds an
observation from the JointState, the Imu and the commanded Twist; ``control`` (ONNX) turns it
into a joint position target (PD gains from the map) that pulls the pole back upright, plus a
small bounded term of a seeded MLP. The zero policy publishes zero torques instead.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import yaml

import leapp
from leapp import InputKindEnum, OutputKindEnum, TensorSemantics, annotate
from leapp import session as session_module
from leapp_ros.run.deployment import Deployment
from leapp_ros.run.processes import load_plan
from leapp_ros.sim.sim_loop import simulate
from leapp_ros.sim.sim_map import load_map
from leapp_ros.tools.cli import main

pytestmark = pytest.mark.ros

pytest.importorskip("mujoco", reason="leapp-ros sim needs MuJoCo: pip install 'leapp_ros[sim]'")

TICKS = 60
MJCF = """<mujoco model="pendulum">
  <option timestep="0.005" gravity="0 0 -9.81"/>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1"/>
    <body name="pole" pos="0 0 0.05">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.02"/>
      <geom type="capsule" fromto="0 0 0 0 0 0.5" size="0.02" mass="0.1"/>
      <geom type="sphere" pos="0 0 0.5" size="0.05" mass="1"/>
      <site name="pole_origin"/>
    </body>
  </worldbody>
  <sensor>
    <jointpos name="q" joint="hinge"/>
    <jointvel name="qd" joint="hinge"/>
    <gyro name="rate" site="pole_origin"/>
    <framequat name="rotation" objtype="xbody" objname="pole"/>
  </sensor>
</mujoco>
"""
MAP = {
    "decimation": 4,
    "ticks": TICKS,
    "base": "pole",
    "imu": "pole",
    "initial": {"hinge": 0.2},
    "command_velocity": [0.0, 0.0, 0.3],
    "command": {"mode": "position", "kp": 40.0, "kd": 2.0, "torque_limit": 30.0},
    "fall": {"max_tilt_deg": 45.0},
}


class Control(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(10, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)
        )

    def forward(self, obs):
        return torch.tanh(self.net(obs))


def observe(position, velocity, rate, rotation, command):
    position, velocity, rate, rotation, command = annotate.input_tensors(
        "observe",
        [
            TensorSemantics(
                name="q", ref=position, kind=InputKindEnum.JOINT_POSITION, element_names=["hinge"]
            ),
            TensorSemantics(
                name="qd", ref=velocity, kind=InputKindEnum.JOINT_VELOCITY, element_names=["hinge"]
            ),
            TensorSemantics(name="rate", ref=rate, kind=InputKindEnum.BODY_ANGULAR_VELOCITY),
            TensorSemantics(
                name="rotation",
                ref=rotation,
                kind=InputKindEnum.BODY_ROTATION,
                element_names=["w", "x", "y", "z"],
            ),
            TensorSemantics(name="command", ref=command, kind=InputKindEnum.COMMAND_BODY_VELOCITY),
        ],
    )
    obs = torch.cat([position, velocity * 0.2, rate * 0.2, rotation[:2], command])
    annotate.output_tensors("observe", {"obs": obs}, export_with="jit")
    return obs


def control(policy, obs, *, zero: bool):
    obs = annotate.input_tensors("control", {"obs": obs})
    if zero:
        output, kind = 0.0 * policy(obs), OutputKindEnum.JOINT_EFFORT
    else:
        output = -0.3 * obs[0:1] - 0.05 * obs[1:2] + 0.02 * obs[9:10] + 0.02 * policy(obs)
        kind = OutputKindEnum.JOINT_POSITION
    annotate.output_tensors(
        "control",
        [TensorSemantics(name="command", ref=output, kind=kind, element_names=["hinge"])],
        export_with="onnx",
    )
    return output


def seeded_control() -> Control:
    torch.manual_seed(3)
    return Control().eval()


def export_pendulum(save_path: Path, name: str, *, zero: bool = False) -> Path:
    session_module._active = None
    policy = seeded_control()
    values = (
        torch.tensor([0.2]),
        torch.zeros(1),
        torch.zeros(3),
        torch.tensor([1.0, 0.0, 0.0, 0.0]),
        torch.zeros(3),
    )
    leapp.start(name=name, save_path=save_path)
    with torch.no_grad():
        control(policy, observe(*values), zero=zero)
    leapp.stop()
    return leapp.compile_graph(graph_configs=leapp.GraphConfigs(frequency=50)).path.parent


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pendulum")
    mjcf = folder / "pendulum.xml"
    mjcf.write_text(MJCF, encoding="utf-8")
    map_path = folder / "map.yaml"
    map_path.write_text(yaml.safe_dump(MAP), encoding="utf-8")
    zero_map = folder / "zero_map.yaml"
    zero_map.write_text(yaml.safe_dump({**MAP, "command": {"mode": "torque"}}), encoding="utf-8")
    return SimpleNamespace(
        folder=folder,
        mjcf=mjcf,
        map=map_path,
        zero_map=zero_map,
        export=export_pendulum(folder, "pendulum"),
        zero=export_pendulum(folder, "zero_pendulum", zero=True),
        eager=eager_commands(mjcf, TICKS),
    )


def eager_commands(mjcf: Path, ticks: int) -> np.ndarray:
    """The pendulum in plain MuJoCo, held by eager PyTorch: each tick ``observe`` and
    ``control`` run on the sensors' readings of the state reached (``mj_forward``), the target
    goes through the map's PD law at every physics step. The commands, one per tick."""
    import mujoco

    model = mujoco.MjModel.from_xml_path(str(mjcf))
    data = mujoco.MjData(model)
    data.qpos[0] = MAP["initial"]["hinge"]
    mujoco.mj_forward(model, data)
    policy, gains = seeded_control(), MAP["command"]
    command, commands = torch.tensor(MAP["command_velocity"]), []
    for _ in range(ticks):
        readings = [torch.tensor(data.sensor(name).data, dtype=torch.float32)
                    for name in ("q", "qd", "rate", "rotation")]  # fmt: skip
        with torch.no_grad():
            target = control(policy, observe(*readings, command), zero=False).numpy()
        commands.append(target.copy())
        for _ in range(MAP["decimation"]):
            torque = (
                gains["kp"] * (target.astype(np.float64) - data.qpos) - gains["kd"] * data.qvel
            )
            data.qfrc_applied[:] = np.clip(torque, -gains["torque_limit"], gains["torque_limit"])
            mujoco.mj_step(model, data)
        mujoco.mj_forward(model, data)
    return np.array(commands)


def write_map(folder: Path, name: str, **changes) -> Path:
    """The map with ``changes`` (a key changed to None is left out)."""
    document = {key: value for key, value in {**MAP, **changes}.items() if value is not None}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def sim(pendulum, export: Path, map_path: Path, out: str, *options: str) -> int:
    """``leapp-ros sim`` of ``export`` on the pendulum with ``map_path``, into ``out``."""
    folder = str(pendulum.folder / out)
    return main(["sim", str(export), "--mjcf", str(pendulum.mjcf), "--map", str(map_path),
                 "--out", folder, *options])  # fmt: skip


@pytest.mark.parametrize("deployment", [Deployment.PROCESSES, Deployment.COMPOSED], ids=str)
def test_the_graph_loop_commands_as_eager_pytorch_within_1e_5_per_tick(pendulum, deployment):
    plan = load_plan(pendulum.export)
    report = simulate(plan, pendulum.mjcf, load_map(pendulum.map), deployment=deployment)
    assert report.stopped is None, report.format()
    assert len(report.graph.commands) == len(report.pipeline.commands) == TICKS
    differences = np.abs(np.array(report.graph.commands) - pendulum.eager).max(axis=1)
    assert differences.max() <= 1e-5, (
        f"graph - eager PyTorch: {differences.max():.3g} at tick {differences.argmax()}\n"
        f"{report.format()}"
    )
    assert report.largest_difference <= 1e-5, report.format()  # graph - leapp.Pipeline
    assert report.graph.falls == report.pipeline.falls == 0, report.format()
    assert report.ok, report.format()


def test_the_sim_command_writes_a_bag_and_a_plot_of_the_fused_run(pendulum, capsys):
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Float64MultiArray

    from leapp_ros.bag.bag_file import read_bag

    out = pendulum.folder / "fused_run"
    code = sim(pendulum, pendulum.export, pendulum.map, "fused_run", "--deployment", "fused")
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "sim passed" in printed and "(fused)" in printed, printed
    assert (out / "commands.png").stat().st_size > 1000
    bag = read_bag(out / "bag")
    assert bag.count("/pendulum/observe/joint_states") == TICKS
    recorded = [deserialize_message(m.data, Float64MultiArray).data for m in bag.messages
                if m.topic == "/pendulum/control/command"]  # fmt: skip
    assert len(recorded) == TICKS
    np.testing.assert_allclose(np.array(recorded), pendulum.eager, rtol=0, atol=1e-5)


def test_a_zero_policy_lets_the_robot_fall_and_the_report_says_so(pendulum, capsys):
    code = sim(pendulum, pendulum.zero, pendulum.zero_map, "zero_run", "--composed")
    printed = capsys.readouterr().out
    assert code == 1, printed
    assert "the robot fell" in printed, printed
    assert "graph loop: 60 ticks, 1 fall(s)" in printed, printed
    assert "largest command difference, graph - leapp.Pipeline: 0" in printed, printed


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"gains": 1}, "unknown key(s) ['gains']"),
        ({"command": {"mode": "position", "kp": 40.0}}, "needs the PD gains command.kp and "),
        ({"command": {"mode": "velocity"}}, "command.mode is 'velocity'"),
        ({"joints": ["knee"]}, "joint(s) ['knee'] are no hinge or slide joint"),
        ({"imu": "torso"}, "imu: 'torso' is no body of the MJCF model"),
        ({"imu": None, "imu_site": "imu"}, "imu_site: 'imu' is no site of the MJCF model; it has"),
        ({"imu_site": "pole_origin"}, "give the Imu's frame as imu (a body) or imu_site"),
        ({"base_pose": {"position": [0, 0, 1]}}, "base_pose needs a free joint on the base body"),
        ({"base_pose": {"orientation": [0, 0, 0, 0]}}, "base_pose.orientation takes a quaternion"),
        ({"timestep": 0}, "timestep must be a positive number of seconds"),
        ({"decimation": 0}, "decimation must be a positive whole number"),
        ({"command": {"mode": "torque", "topic": "observe/obs_x"}}, "publishes no"),
        ({"command": {"mode": "position", "kp": [1.0, 2.0], "kd": 1.0}}, "take one number or 1"),
    ],
    ids=[
        "unknown_key",
        "no_kd",
        "bad_mode",
        "unknown_joint",
        "unknown_body",
        "unknown_site",
        "imu_and_imu_site",
        "base_without_free_joint",
        "zero_quaternion",
        "timestep",
        "decimation",
        "unknown_command_topic",
        "gains_per_joint",
    ],
)
def test_a_bad_map_exits_2_naming_what_is_wrong(pendulum, capsys, changes, message):
    path = write_map(pendulum.folder, "bad", **changes)
    code = sim(pendulum, pendulum.export, path, "never")
    error = capsys.readouterr().err
    assert code == 2, error
    assert message in error, error
    assert not (pendulum.folder / "never").exists()


def test_an_input_the_simulator_cannot_publish_is_refused_before_anything_starts(tmp_path):
    from support.ros import export_seed

    seed = export_seed(tmp_path)
    mjcf = tmp_path / "pendulum.xml"
    mjcf.write_text(MJCF, encoding="utf-8")
    path = write_map(tmp_path, "map", command={"mode": "torque", "topic": "policy/action"})
    from leapp_ros.sim.sim_map import SimMapError

    with pytest.raises(SimMapError, match=r"preprocess/state \(preprocess/state\) takes std_msgs"):
        simulate(load_plan(seed.path), mjcf, load_map(path), deployment="processes")


def test_a_fall_is_the_base_below_its_height_or_past_its_tilt_counted_once_per_fall(tmp_path):
    from leapp_ros.sim.mujoco_robot import TickState
    from leapp_ros.sim.sim_loop import LoopRecord
    from leapp_ros.sim.sim_map import FallRule

    rule = FallRule(min_height=0.3, max_tilt_deg=45.0)
    assert not rule.fallen(0.31, 44.0)
    assert rule.fallen(0.29, 0.0) and rule.fallen(1.0, 46.0)
    sim_map = load_map(write_map(tmp_path, "fall", fall={"min_height": 0.3}))
    heights = [0.5, 0.2, 0.2, 0.5, 0.1]  # down, up again, down again: two falls
    states = tuple(TickState(0.1 * i, h, 0.0, None, None) for i, h in enumerate(heights))
    record = LoopRecord((), states, sim_map)
    assert (record.falls, record.fell_at_s) == (2, 0.1)
