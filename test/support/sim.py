"""A simulated robot for closed-loop tests: a three-joint arm in MuJoCo, the policy that holds
it up (exported with leapp), and the robot messages the two exchange.

The arm stands on a fixed base: three hinges about y (shoulder, elbow, wrist) under gravity,
each driven by a PD position servo (MuJoCo ``position`` actuators with ``kp`` and ``kv``), an
IMU site on the hand (gyro, accelerometer, orientation) and a tip site. A slow sideways push
on the hand keeps it moving, so consecutive ticks never carry the same readings.

The policy is two pipeline nodes: ``preprocess`` (TorchScript) builds the observation from
the joint positions and velocities (``sensor_msgs/JointState``) and the IMU
(``sensor_msgs/Imu``); ``policy`` (ONNX) adds a small bounded correction from a seeded tanh
MLP to the reference pose, published as joint position targets (``std_msgs/Float64MultiArray``
in :data:`JOINTS` order). Called outside a leapp session, the same functions are the eager
reference (:func:`eager_targets`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

import leapp
from leapp import InputKindEnum, OutputKindEnum, TensorSemantics, annotate

__all__ = [
    "JOINTS",
    "REFERENCE",
    "TICK_S",
    "Arm",
    "Reading",
    "eager_targets",
    "export_arm_policy",
    "imu_message",
    "joint_state_message",
    "write_arm_model",
]

JOINTS = ("shoulder", "elbow", "wrist")
REFERENCE = (0.25, -0.5, 0.35)  # rad: upright, slightly bent
TICK_S = 0.02  # one control tick: 50 Hz
_TIMESTEP_S = 0.002
_CORRECTION = 0.15  # rad: the largest change the policy makes to the reference
_WEIGHT_SCALE = 0.6  # of the policy's seeded normal weights
_PUSH_N, _PUSH_HZ = 3.0, 1.3  # the sideways push on the hand

_MJCF = """<mujoco model="upright_arm">
  <compiler angle="radian"/>
  <option timestep="{timestep}" gravity="0 0 -9.81" integrator="implicitfast"/>
  <default>
    <joint type="hinge" axis="0 1 0" damping="0.05" armature="0.01"/>
    <geom type="capsule" size="0.025" rgba="0.7 0.7 0.8 1"/>
    <position kp="60" kv="3" ctrlrange="-3 3"/>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1"/>
    <body name="base" pos="0 0 0.05">
      <geom type="cylinder" size="0.06 0.05" mass="5"/>
      <body name="upper_arm" pos="0 0 0.05">
        <joint name="shoulder"/>
        <geom fromto="0 0 0 0 0 0.3" mass="1.0"/>
        <body name="forearm" pos="0 0 0.3">
          <joint name="elbow"/>
          <geom fromto="0 0 0 0 0 0.25" mass="0.6"/>
          <body name="hand" pos="0 0 0.25">
            <joint name="wrist"/>
            <geom fromto="0 0 0 0 0 0.12" mass="0.3"/>
            <site name="imu" pos="0 0 0.06"/>
            <site name="tip" pos="0 0 0.12"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="shoulder_servo" joint="shoulder"/>
    <position name="elbow_servo" joint="elbow"/>
    <position name="wrist_servo" joint="wrist"/>
  </actuator>
  <sensor>
    <gyro name="gyro" site="imu"/>
    <accelerometer name="accel" site="imu"/>
    <framequat name="orientation" objtype="site" objname="imu"/>
  </sensor>
</mujoco>
"""


def write_arm_model(folder: Path) -> Path:
    """The arm's MJCF written as ``folder/upright_arm.xml``."""
    path = folder / "upright_arm.xml"
    path.write_text(_MJCF.format(timestep=_TIMESTEP_S), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Reading:
    """What the arm's sensors say at one instant (float64, :data:`JOINTS` order; the
    orientation as ``(w, x, y, z)``)."""

    position: np.ndarray
    velocity: np.ndarray
    gyro: np.ndarray
    accel: np.ndarray
    quat: np.ndarray

    def tensors(self) -> tuple[torch.Tensor, ...]:
        """The preprocess inputs, float32, as the node decodes them from the messages."""
        values = (self.position, self.velocity, self.gyro, self.accel, self.quat)
        return tuple(torch.tensor(value, dtype=torch.float32) for value in values)


class Arm:
    """The arm of ``model_path`` (:func:`write_arm_model`), started at ``pose`` at rest with
    its servos holding it there."""

    def __init__(self, model_path: Path, pose: Sequence[float]):
        import mujoco

        self._mujoco = mujoco
        self.model = mujoco.MjModel.from_xml_path(str(model_path))
        self.data = mujoco.MjData(self.model)
        self._substeps = round(TICK_S / self.model.opt.timestep)
        self._hand = self.model.body("hand").id
        self.data.qpos[:] = pose
        self.data.ctrl[:] = pose
        mujoco.mj_forward(self.model, self.data)

    @property
    def time(self) -> float:
        """Simulated seconds since the start."""
        return float(self.data.time)

    def read(self) -> Reading:
        data = self.data
        return Reading(
            position=data.qpos.copy(),
            velocity=data.qvel.copy(),
            gyro=data.sensor("gyro").data.copy(),
            accel=data.sensor("accel").data.copy(),
            quat=data.sensor("orientation").data.copy(),
        )

    def command(self, targets: Sequence[float]) -> None:
        """Joint position targets of the servos (:data:`JOINTS` order), held until the next."""
        self.data.ctrl[:] = targets

    def step(self) -> None:
        """One control tick of simulated time, the hand pushed sideways."""
        push = _PUSH_N * math.sin(2 * math.pi * _PUSH_HZ * self.data.time)
        self.data.xfrc_applied[self._hand, 0] = push
        self._mujoco.mj_step(self.model, self.data, nstep=self._substeps)

    def tip_height(self) -> float:
        """Height of the tip above the floor (m)."""
        return float(self.data.site("tip").xpos[2])

    def deviation(self) -> float:
        """The largest distance of a joint from :data:`REFERENCE` (rad)."""
        return float(np.max(np.abs(self.data.qpos - np.asarray(REFERENCE))))

    def reference_tip_height(self) -> float:
        """Tip height with every joint at :data:`REFERENCE` (the arm's own state unchanged)."""
        mujoco = self._mujoco
        probe = mujoco.MjData(self.model)
        probe.qpos[:] = REFERENCE
        mujoco.mj_kinematics(self.model, probe)
        return float(probe.site("tip").xpos[2])


# --- the policy --------------------------------------------------------------------------


class Policy(torch.nn.Module):
    """A small tanh MLP from the observation (15 values) to one correction per joint."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(15, 16), torch.nn.Tanh(), torch.nn.Linear(16, len(JOINTS))
        )

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(obs))


def gravity_in_frame(quat_wxyz: torch.Tensor) -> torch.Tensor:
    """The world's down direction seen from a frame rotated by ``quat_wxyz``: the conjugate
    rotation applied to ``(0, 0, -1)``."""
    q = quat_wxyz / quat_wxyz.norm()
    w, axis = q[0], -q[1:]  # the conjugate
    down = torch.tensor([0.0, 0.0, -1.0])
    twice = 2.0 * torch.linalg.cross(axis, down)
    return down + w * twice + torch.linalg.cross(axis, twice)


def preprocess(joint_pos, joint_vel, gyro, accel, quat):
    """The observation: joint offsets from the reference, scaled velocities and IMU."""
    joint_pos, joint_vel, gyro, accel, quat = annotate.input_tensors(
        "preprocess",
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
            TensorSemantics(name="accel", ref=accel, kind=InputKindEnum.BODY_LINEAR_ACCELERATION),
            TensorSemantics(
                name="quat",
                ref=quat,
                kind=InputKindEnum.BODY_ROTATION,
                element_names=["w", "x", "y", "z"],
            ),
        ],
    )
    obs = torch.cat(
        [
            (joint_pos - torch.tensor(REFERENCE)) * 2.0,
            joint_vel * 0.5,
            gyro * 0.5,
            accel * 0.05,
            gravity_in_frame(quat),
        ]
    )
    annotate.output_tensors("preprocess", {"obs": obs}, export_with="jit")
    return obs


def run_policy(policy: Policy, obs):
    """Joint position targets: the reference plus the policy's bounded correction."""
    obs = annotate.input_tensors("policy", {"obs": obs})
    targets = torch.tensor(REFERENCE) + _CORRECTION * policy(obs)
    annotate.output_tensors(
        "policy",
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
    return targets


def export_arm_policy(
    save_path: Path, name: str = "arm_policy", *, seed: int = 7, policy_class: type = Policy
) -> SimpleNamespace:
    """The two-node pipeline exported into ``save_path`` (weights drawn from ``seed``, traced
    without autograd at the reference pose; ``policy_class``: a :class:`Policy` subclass):
    ``path`` (the export folder), ``name`` and ``policy`` (the module, for
    :func:`eager_targets`)."""
    policy = policy_class().eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in policy.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * _WEIGHT_SCALE)
    at_rest = Reading(
        position=np.asarray(REFERENCE),
        velocity=np.zeros(3),
        gyro=np.zeros(3),
        accel=np.array([0.0, 0.0, 9.81]),
        quat=np.array([1.0, 0.0, 0.0, 0.0]),
    )
    leapp.start(name=name, save_path=save_path)
    with torch.no_grad():
        run_policy(policy, preprocess(*at_rest.tensors()))
    leapp.stop()
    compiled = leapp.compile_graph(graph_configs=leapp.GraphConfigs(frequency=1 / TICK_S))
    return SimpleNamespace(path=compiled.path.parent, name=name, policy=policy)


def eager_targets(policy: Policy, reading: Reading) -> np.ndarray:
    """The targets eager PyTorch computes from ``reading`` (float32, :data:`JOINTS` order)."""
    with torch.no_grad():
        return run_policy(policy, preprocess(*reading.tensors())).numpy()


# --- robot messages ----------------------------------------------------------------------


def _stamp(seconds: float) -> Any:
    from builtin_interfaces.msg import Time

    nanoseconds = round(seconds * 1e9)
    return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def joint_state_message(
    reading: Reading, stamp_s: float, order: Sequence[str], *, nan_joint: str | None = None
) -> Any:
    """``sensor_msgs/JointState`` of ``reading`` with its joints in ``order``; a name not in
    :data:`JOINTS` (another joint of the robot) gets position and velocity 0.01; with
    ``nan_joint`` that joint's position is NaN."""
    import array

    from sensor_msgs.msg import JointState

    position = dict(zip(JOINTS, reading.position.tolist(), strict=True))
    velocity = dict(zip(JOINTS, reading.velocity.tolist(), strict=True))
    if nan_joint is not None:
        position[nan_joint] = math.nan
    message = JointState(name=list(order))
    message.header.stamp = _stamp(stamp_s)
    message.position = array.array("d", [position.get(name, 0.01) for name in order])
    message.velocity = array.array("d", [velocity.get(name, 0.01) for name in order])
    return message


def imu_message(reading: Reading, stamp_s: float, *, nan_gyro: bool = False) -> Any:
    """``sensor_msgs/Imu`` of ``reading`` (frame ``imu``); ``nan_gyro``: a NaN rate."""
    from sensor_msgs.msg import Imu

    message = Imu()
    message.header.stamp = _stamp(stamp_s)
    message.header.frame_id = "imu"
    gyro = reading.gyro.tolist()
    if nan_gyro:
        gyro[1] = math.nan
    rate, accel, q = message.angular_velocity, message.linear_acceleration, message.orientation
    rate.x, rate.y, rate.z = gyro
    accel.x, accel.y, accel.z = reading.accel.tolist()
    q.w, q.x, q.y, q.z = reading.quat.tolist()
    return message
