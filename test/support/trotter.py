"""A small quadruped that trots, for the simulator's tests: its MJCF (written here), a scripted
gait policy exported with leapp, and the plain MuJoCo loop that is the reference.

The robot: a 0.4 m box base on a free joint, whose inertia is given with its principal axes
rotated from the base frame (180 deg about (1, 1, 0): the compiler's eigenvector order, as in
many MJCF models of real quadrupeds), and four legs of a hip and a knee pitch joint each. The
MJCF adds the sensors the tests compare with: a gyro, accelerometer, velocimeter and frame
quaternion at the base's origin (site ``base_origin``, the base frame), at an IMU site offset
and rotated from it (``imu``), and at a massless IMU board welded to the base at another offset
and rotation (body ``imu_board``, site ``board`` at its origin); joint position and velocity
sensors of every joint.

The policy: ``observe`` (TorchScript) turns the JointState, the Imu (angular velocity and
orientation) and the commanded Twist into an observation; ``trot`` (ONNX) keeps a gait clock as
state (a unit vector turned by one tick's phase each tick) and makes joint position targets: a
diagonal trot whose stride follows the commanded forward speed, with IMU feedback (pitch and
roll, from the orientation, and their rates, from the gyro, lengthen or shorten the legs) and
joint feedback (stiffening against the PD's sag, damping). The stride and feedback gains
(:data:`GAINS`) were fitted in :class:`PlainLoop` by a grid search over 4 s of walking for the
commanded speed (0.3 m/s), no sideways drift and the least tilt: it walks 1.06 m straight
ahead, tilting at most 6 deg. Outside a leapp session the same functions are eager PyTorch
(:class:`EagerTrot`).

:class:`PlainLoop` runs the robot in MuJoCo alone: each control tick the eager policy reads
MuJoCo's own sensors (``data.sensordata``, after ``mj_forward`` of the state reached), the
targets go through the same PD law as :data:`MAP`'s (torques in ``qfrc_applied`` at every
physics step).
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

import leapp
from leapp import InputKindEnum, OutputKindEnum, TensorSemantics, annotate

__all__ = [
    "GAINS",
    "JOINTS",
    "MAP",
    "EagerTrot",
    "PlainLoop",
    "export_trot_policy",
    "write_trotter_model",
]

LEGS = {"fl": (0.15, 0.1), "fr": (0.15, -0.1), "rl": (-0.15, 0.1), "rr": (-0.15, -0.1)}
JOINTS = tuple(f"{leg}_{joint}" for leg in LEGS for joint in ("hip", "knee"))
STANCE = {"hip": 0.6, "knee": -1.2}  # rad: the foot under the hip, 0.25 m stance height
TIMESTEP_S = 0.002
DECIMATION = 10  # a 50 Hz control tick
TICK_S = TIMESTEP_S * DECIMATION
KP, KD, TORQUE_LIMIT = 30.0, 0.6, 8.0
COMMAND = (0.3, 0.0, 0.0)  # m/s forward

GAINS = SimpleNamespace(
    frequency_hz=2.5,  # gait cycles per second
    stride=0.5,  # hip swing amplitude (rad) per m/s of commanded forward speed
    lift=0.5,  # knee flexion (rad) at the top of a swing
    pitch=0.5,  # leg extension (rad) per unit of pitch (projected gravity's x) ...
    pitch_rate=0.05,  # ... and per rad/s of pitch rate (gyro y)
    roll=1.0,
    roll_rate=0.05,
    stiffen=0.5,  # extra target per rad of joint error: counters the PD's sag
    damping=0.01,  # target offset per rad/s of joint velocity
)

MAP = {
    "decimation": DECIMATION,
    "base": "base",
    "imu": "base",
    "initial": {joint: STANCE[joint.split("_")[1]] for joint in JOINTS},
    "command_velocity": list(COMMAND),
    "command": {"mode": "position", "kp": KP, "kd": KD, "torque_limit": TORQUE_LIMIT},
    "fall": {"min_height": 0.15, "max_tilt_deg": 30.0},
}

_LEG = """      <body name="{leg}_thigh" pos="{x} {y} -0.04">
        <joint name="{leg}_hip"/>
        <geom fromto="0 0 0 0 0 -0.12" mass="0.3"/>
        <body name="{leg}_shin" pos="0 0 -0.12">
          <joint name="{leg}_knee"/>
          <geom fromto="0 0 0 0 0 -0.12" mass="0.15"/>
          <geom name="{leg}_foot" type="sphere" pos="0 0 -0.12" size="0.02" mass="0.02"/>
        </body>
      </body>"""

_IMU_SENSORS = """    <gyro name="{site}_gyro" site="{site}"/>
    <accelerometer name="{site}_accel" site="{site}"/>
    <velocimeter name="{site}_velocity" site="{site}"/>
    <framequat name="{site}_quat" objtype="site" objname="{site}"/>"""

_MJCF = """<mujoco model="trotter">
  <compiler angle="radian"/>
  <option timestep="{timestep}" integrator="implicitfast"/>
  <default>
    <joint type="hinge" axis="0 1 0" damping="0.1" armature="0.005"/>
    <geom type="capsule" size="0.015" friction="1.0 0.01 0.001"/>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="20 20 0.1"/>
    <body name="base" pos="0 0 0.26">
      <freejoint name="root"/>
      <inertial pos="0.01 0 0" quat="0 0.70710678 0.70710678 0" mass="4"
                diaginertia="0.05547 0.01547 0.06667"/>
      <geom type="box" size="0.2 0.1 0.04" mass="0" contype="0" conaffinity="0"/>
      <site name="base_origin"/>
      <site name="imu" pos="0.05 -0.02 0.03" quat="0.8660254 0.1 0.2 0.4472136"/>
      <body name="imu_board" pos="-0.08 0.04 0.035" quat="0.7071068 0 0 0.7071068">
        <site name="board"/>
      </body>
{legs}
    </body>
  </worldbody>
  <sensor>
{imu_sensors}
{joint_sensors}
  </sensor>
</mujoco>
"""


def write_trotter_model(folder: Path) -> Path:
    """The trotter's MJCF written as ``folder/trotter.xml``."""
    legs = "\n".join(_LEG.format(leg=leg, x=x, y=y) for leg, (x, y) in LEGS.items())
    imu = "\n".join(_IMU_SENSORS.format(site=site) for site in ("base_origin", "imu", "board"))
    joints = "\n".join(
        f'    <jointpos name="{joint}_pos" joint="{joint}"/>\n'
        f'    <jointvel name="{joint}_vel" joint="{joint}"/>'
        for joint in JOINTS
    )
    path = folder / "trotter.xml"
    text = _MJCF.format(timestep=TIMESTEP_S, legs=legs, imu_sensors=imu, joint_sensors=joints)
    path.write_text(text, encoding="utf-8")
    return path


# --- the policy --------------------------------------------------------------------------

_SIDES = {
    "pair": torch.tensor([1.0, -1.0, -1.0, 1.0]),  # fl and rr swing together, then fr and rl
    "front": torch.tensor([1.0, 1.0, -1.0, -1.0]),
    "left": torch.tensor([1.0, -1.0, 1.0, -1.0]),
}
_DOWN = torch.tensor([0.0, 0.0, -1.0])


def projected_gravity(quat_wxyz: torch.Tensor) -> torch.Tensor:
    """The world's down direction in the frame rotated by ``quat_wxyz`` from the world."""
    q = quat_wxyz / quat_wxyz.norm()
    w, axis = q[0], -q[1:]  # the conjugate
    twice = 2.0 * torch.linalg.cross(axis, _DOWN)
    return _DOWN + w * twice + torch.linalg.cross(axis, twice)


def observe(joint_pos, joint_vel, gyro, quat, command):
    """The observation: joint positions and velocities, body rates, gravity in the IMU frame,
    the command (25 values)."""
    joint_pos, joint_vel, gyro, quat, command = annotate.input_tensors(
        "observe",
        [
            TensorSemantics(
                name="joint_pos",
                ref=joint_pos,
                kind=InputKindEnum.JOINT_POSITION,
                element_names=list(JOINTS),
            ),
            TensorSemantics(
                name="joint_vel",
                ref=joint_vel,
                kind=InputKindEnum.JOINT_VELOCITY,
                element_names=list(JOINTS),
            ),
            TensorSemantics(name="gyro", ref=gyro, kind=InputKindEnum.BODY_ANGULAR_VELOCITY),
            TensorSemantics(
                name="quat",
                ref=quat,
                kind=InputKindEnum.BODY_ROTATION,
                element_names=["w", "x", "y", "z"],
            ),
            TensorSemantics(
                name="command",
                ref=command,
                kind=InputKindEnum.COMMAND_BODY_VELOCITY,
                element_names=["lin_vel_x", "lin_vel_y", "ang_vel_z"],
            ),
        ],
    )
    obs = torch.cat([joint_pos, joint_vel, gyro, projected_gravity(quat), command])
    annotate.output_tensors("observe", {"obs": obs}, export_with="jit")
    return obs


def _turn(clock: torch.Tensor) -> torch.Tensor:
    angle = 2.0 * math.pi * GAINS.frequency_hz * TICK_S
    cos, sin = math.cos(angle), math.sin(angle)
    return torch.stack([clock[0] * cos - clock[1] * sin, clock[1] * cos + clock[0] * sin])


def trot(obs, clock):
    """Joint position targets of a trot at the gait phase ``clock`` (cos, sin) and the clock
    of the next tick."""
    obs = annotate.input_tensors("trot", {"obs": obs})
    clock = annotate.state_tensors("trot", {"clock": clock})
    joint_pos, joint_vel, gyro, gravity, command = (
        obs[0:8], obs[8:16], obs[16:19], obs[19:22], obs[22:25]
    )  # fmt: skip
    pitch, roll = gravity[0], -gravity[1]  # nose down, left side up: positive
    swing = clock[0] * _SIDES["pair"]  # per leg: +1 back, -1 forward
    lift = torch.relu(clock[1] * _SIDES["pair"])  # per leg: in the air while positive
    pitching = GAINS.pitch * pitch + GAINS.pitch_rate * gyro[1]
    rolling = GAINS.roll * roll + GAINS.roll_rate * gyro[0]
    extend = _SIDES["front"] * pitching - _SIDES["left"] * rolling  # per leg, rad of knee
    hip = STANCE["hip"] + GAINS.stride * command[0] * swing - 0.5 * extend
    knee = STANCE["knee"] - GAINS.lift * lift + extend
    desired = torch.stack([hip, knee], dim=1).reshape(8)
    targets = desired + GAINS.stiffen * (desired - joint_pos) - GAINS.damping * joint_vel
    next_clock = annotate.update_state("trot", {"clock": _turn(clock)})
    annotate.output_tensors(
        "trot",
        [
            TensorSemantics(
                name="joint_targets",
                ref=targets,
                kind=OutputKindEnum.JOINT_POSITION,
                element_names=list(JOINTS),
            )
        ],
        export_with="onnx",
    )
    return targets, next_clock


def _standing() -> tuple[torch.Tensor, ...]:
    position = torch.tensor([STANCE[joint.split("_")[1]] for joint in JOINTS])
    return (position, torch.zeros(8), torch.zeros(3), torch.tensor([1.0, 0.0, 0.0, 0.0]),
            torch.tensor(COMMAND))  # fmt: skip


def export_trot_policy(save_path: Path, name: str = "trot_policy") -> Path:
    """The two-node gait pipeline exported into ``save_path``; its export folder."""
    leapp.start(name=name, save_path=save_path)
    with torch.no_grad():
        trot(observe(*_standing()), torch.tensor([1.0, 0.0]))
    leapp.stop()
    compiled = leapp.compile_graph(graph_configs=leapp.GraphConfigs(frequency=1 / TICK_S))
    return compiled.path.parent


class EagerTrot:
    """The gait policy in eager PyTorch, its clock carried from tick to tick."""

    def __init__(self):
        self.clock = torch.tensor([1.0, 0.0])

    def __call__(self, *inputs: np.ndarray) -> np.ndarray:
        """Targets (float32, :data:`JOINTS` order) for joint positions, velocities, gyro,
        orientation (w, x, y, z) and command, given as float64 as the messages carry them."""
        tensors = [torch.tensor(value, dtype=torch.float32) for value in inputs]
        with torch.no_grad():
            targets, self.clock = trot(observe(*tensors), self.clock)
        return targets.numpy().copy()


class PlainLoop:
    """The trotter of ``mjcf`` in MuJoCo alone, the eager policy reading the sensors of site
    ``imu_site`` (``base_origin``: the base frame) and of the joints from ``data.sensordata``;
    started as :data:`MAP` says."""

    def __init__(self, mjcf: Path, imu_site: str = "base_origin"):
        import mujoco

        self._mujoco = mujoco
        self.model = mujoco.MjModel.from_xml_path(str(mjcf))
        self.data = mujoco.MjData(self.model)
        self._site = imu_site
        joints = [self.model.joint(joint) for joint in JOINTS]
        self._qpos = np.array([joint.qposadr[0] for joint in joints])
        self._dofs = np.array([joint.dofadr[0] for joint in joints])
        for joint, value in MAP["initial"].items():
            self.data.qpos[self.model.joint(joint).qposadr[0]] = value
        mujoco.mj_forward(self.model, self.data)
        self.policy = EagerTrot()

    def sensors(self) -> tuple[np.ndarray, ...]:
        """The policy's inputs from ``data.sensordata``."""
        data = self.data
        read = [data.sensor(f"{joint}_{kind}").data[0] for kind in ("pos", "vel")
                for joint in JOINTS]  # fmt: skip
        return (np.array(read[:8]), np.array(read[8:]), data.sensor(f"{self._site}_gyro").data,
                data.sensor(f"{self._site}_quat").data, np.array(COMMAND))  # fmt: skip

    def tick(self) -> np.ndarray:
        """One control tick: the eager command, applied through the PD for ``DECIMATION``
        physics steps, then ``mj_forward`` so that the sensors read the state reached."""
        mujoco, model, data = self._mujoco, self.model, self.data
        command = self.policy(*self.sensors())
        target = command.astype(np.float64)
        for _ in range(DECIMATION):
            q, qd = data.qpos[self._qpos], data.qvel[self._dofs]
            torque = np.clip(KP * (target - q) - KD * qd, -TORQUE_LIMIT, TORQUE_LIMIT)
            data.qfrc_applied[self._dofs] = torque
            mujoco.mj_step(model, data)
        mujoco.mj_forward(model, data)
        return command

    def run(self, ticks: int) -> SimpleNamespace:
        """``commands`` and the base's ``positions`` after each tick."""
        commands, positions = [], []
        base = self.model.body("base").id
        for _ in range(ticks):
            commands.append(self.tick())
            positions.append(self.data.xpos[base].copy())
        return SimpleNamespace(commands=np.array(commands), positions=np.array(positions))
