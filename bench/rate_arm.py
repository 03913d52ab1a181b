"""A robot whose streams come at their own rates, for the rate loop (``bench/rate_loop.py``,
``test/sim/test_rate_loop.py``): a two-link arm in MuJoCo with a 500 Hz PD position controller,
its policy exported with leapp, the eager reference of that policy, and the robot messages.

The arm: a shoulder and an elbow hinge about y on a fixed base, under gravity, each driven by a
PD position servo (MuJoCo ``position`` actuators with ``kp`` and ``kv``) whose target is set at
every 2 ms physics step; an IMU site on the forearm (gyro, accelerometer, orientation). A slow
sideways push keeps it moving. The sensors carry noise of their own at every instant (seeded
per stamp), so two instants never read alike and a policy result tells which readings it was
computed from.

The policy: ``preprocess`` (TorchScript) makes an observation from a ``sensor_msgs/JointState``
(position, velocity), a ``sensor_msgs/Imu`` (gyro, accelerometer, orientation) and a
``geometry_msgs/Twist`` (``cmd_vel``: forward speed and turn rate lean the arm);
``policy`` (ONNX) turns it into ``action`` (the network's output, one message per result) and
``joint_targets`` (the reference pose plus a bounded correction: kind
``target/joint/position``, played out at the controller's rate). The spec runs ``preprocess``
at the sensors' 500 Hz and ``policy`` at 50 Hz (``pipeline.configs.node_frequency``). The
traced functions take batches too: :func:`eager` runs them on many input sets at once.
"""

from __future__ import annotations

import array
import math
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

__all__ = [
    "JOINTS",
    "POLICY_HZ",
    "SENSOR_HZ",
    "Plant",
    "Reading",
    "eager",
    "export_rate_arm",
    "imu_message",
    "joint_state_message",
    "loop_parameters",
    "twist_message",
    "write_model",
]

JOINTS = ("shoulder", "elbow")
REFERENCE = (0.3, -0.6)  # rad: upright, bent
SENSOR_HZ = 500.0  # joint states, IMU and the physics step
POLICY_HZ = 50.0
TIMESTEP_S = 1.0 / SENSOR_HZ
CORRECTION = 0.2  # rad: the largest change the policy makes to the reference
SENSOR_PORTS = ("joint_pos", "joint_vel", "gyro", "accel", "quat")
COMMAND_NAMES = ["lin_vel_x", "lin_vel_y", "ang_vel_z"]
NOISE = {"position": 2e-3, "velocity": 0.02, "gyro": 0.02, "accel": 0.05}  # per instant
_PUSH_N, _PUSH_HZ = 2.0, 0.9

_MJCF = """<mujoco model="rate_arm">
  <compiler angle="radian"/>
  <option timestep="{timestep}" gravity="0 0 -9.81" integrator="implicitfast"/>
  <default>
    <joint type="hinge" axis="0 1 0" damping="0.08" armature="0.01"/>
    <geom type="capsule" size="0.03" rgba="0.6 0.7 0.8 1"/>
    <position kp="80" kv="4" ctrlrange="-3 3"/>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1"/>
    <body name="base" pos="0 0 0.1">
      <geom type="box" size="0.08 0.08 0.05" mass="4"/>
      <body name="upper" pos="0 0 0.05">
        <joint name="shoulder"/>
        <geom fromto="0 0 0 0 0 0.35" mass="1.2"/>
        <body name="forearm" pos="0 0 0.35">
          <joint name="elbow"/>
          <geom fromto="0 0 0 0 0 0.3" mass="0.7"/>
          <site name="imu" pos="0 0 0.2"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="shoulder_pd" joint="shoulder"/>
    <position name="elbow_pd" joint="elbow"/>
  </actuator>
  <sensor>
    <gyro name="gyro" site="imu"/>
    <accelerometer name="accel" site="imu"/>
    <framequat name="orientation" objtype="site" objname="imu"/>
  </sensor>
</mujoco>
"""


def write_model(folder: Path) -> Path:
    """The arm's MJCF written as ``folder/rate_arm.xml``."""
    path = Path(folder) / "rate_arm.xml"
    path.write_text(_MJCF.format(timestep=TIMESTEP_S), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Reading:
    """What the sensors say at one instant, noise included (float64; orientation ``wxyz``)."""

    position: np.ndarray
    velocity: np.ndarray
    gyro: np.ndarray
    accel: np.ndarray
    quat: np.ndarray


class Plant:
    """The arm of ``model_path`` at :data:`REFERENCE`, one physics step (2 ms) at a time, its
    servos at the target :meth:`step` is given."""

    def __init__(self, model_path: Path, seed: int = 3):
        import mujoco

        self._mujoco = mujoco
        self.model = mujoco.MjModel.from_xml_path(str(model_path))
        self.data = mujoco.MjData(self.model)
        self._forearm = self.model.body("forearm").id
        self._seed = seed
        self.data.qpos[:] = REFERENCE
        self.data.ctrl[:] = REFERENCE
        mujoco.mj_forward(self.model, self.data)

    @property
    def stamp_ns(self) -> int:
        """The simulated time, in whole nanoseconds (the messages' stamp)."""
        return round(self.data.time * 1e9)

    def step(self, target: np.ndarray | None) -> None:
        """One physics step with the servos at ``target`` (None: the last one kept)."""
        if target is not None:
            self.data.ctrl[:] = target
        push = _PUSH_N * math.sin(2 * math.pi * _PUSH_HZ * self.data.time)
        self.data.xfrc_applied[self._forearm, 0] = push
        self._mujoco.mj_step(self.model, self.data)

    def read(self) -> Reading:
        """The sensors now, with the noise of this instant (seeded by its stamp)."""
        data = self.data
        noise = np.random.default_rng([self._seed, self.stamp_ns])
        return Reading(
            position=data.qpos + noise.normal(0, NOISE["position"], 2),
            velocity=data.qvel + noise.normal(0, NOISE["velocity"], 2),
            gyro=data.sensor("gyro").data + noise.normal(0, NOISE["gyro"], 3),
            accel=data.sensor("accel").data + noise.normal(0, NOISE["accel"], 3),
            quat=data.sensor("orientation").data.copy(),
        )

    def deviation(self) -> float:
        """The largest distance of a joint from the reference pose (rad)."""
        return float(np.max(np.abs(self.data.qpos - np.asarray(REFERENCE))))


# --- the policy ------------------------------------------------------------------------------

_generator = torch.Generator().manual_seed(17)
_W1 = torch.randn(16, 16, generator=_generator) * 0.5
_B1 = torch.randn(16, generator=_generator) * 0.1
_W2 = torch.randn(2, 16, generator=_generator) * 0.5


def _gravity(quat: torch.Tensor) -> torch.Tensor:
    """The world's down direction in the frame rotated by ``quat`` (``wxyz``, last axis)."""
    q = quat / quat.norm(dim=-1, keepdim=True)
    w, axis = q.narrow(-1, 0, 1), -q.narrow(-1, 1, 3)  # the conjugate
    down = torch.zeros_like(axis) + torch.tensor([0.0, 0.0, -1.0])
    twice = 2.0 * torch.linalg.cross(axis, down, dim=-1)
    return down + w * twice + torch.linalg.cross(axis, twice, dim=-1)


def preprocess(joint_pos, joint_vel, gyro, accel, quat, command):
    """The observation (16 values on the last axis)."""
    from leapp import InputKindEnum, TensorSemantics, annotate

    joint_pos, joint_vel, gyro, accel, quat, command = annotate.input_tensors(
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
                name="quat", ref=quat, kind=InputKindEnum.BODY_ROTATION, element_names=list("wxyz")
            ),
            TensorSemantics(
                name="command",
                ref=command,
                kind=InputKindEnum.COMMAND_BODY_VELOCITY,
                element_names=COMMAND_NAMES,
            ),
        ],
    )
    obs = torch.cat(
        [
            (joint_pos - torch.tensor(REFERENCE)) * 2.0,
            joint_vel * 0.5,
            gyro * 0.5,
            accel * 0.05,
            _gravity(quat),
            command * torch.tensor([1.0, 1.0, 0.5]),
        ],
        dim=-1,
    )
    annotate.output_tensors("preprocess", {"obs": obs}, export_with="jit")
    return obs


def policy(obs):
    """``action`` (the network's output) and ``joint_targets`` (reference plus correction)."""
    from leapp import OutputKindEnum, TensorSemantics, annotate

    obs = annotate.input_tensors("policy", {"obs": obs})
    hidden = torch.tanh(torch.nn.functional.linear(obs, _W1, _B1))
    action = torch.tanh(torch.nn.functional.linear(hidden, _W2))
    targets = torch.tensor(REFERENCE) + CORRECTION * action
    annotate.output_tensors(
        "policy",
        [
            TensorSemantics(name="action", ref=action),
            TensorSemantics(
                name="joint_targets",
                ref=targets,
                kind=OutputKindEnum.JOINT_POSITION,
                element_names=list(JOINTS),
            ),
        ],
        export_with="onnx",
    )
    return action, targets


def export_rate_arm(save_path: Path, name: str = "rate_arm") -> SimpleNamespace:
    """The pipeline exported into ``save_path``: ``path`` (the export folder), ``name``."""
    import leapp

    rest = [torch.tensor(REFERENCE), torch.zeros(2), torch.zeros(3), torch.tensor([0, 0, 9.81])]
    leapp.start(name=name, save_path=save_path)
    with torch.no_grad():
        policy(preprocess(*rest, torch.tensor([1.0, 0, 0, 0]), torch.zeros(3)))
    leapp.stop()
    configs = leapp.GraphConfigs(frequency=SENSOR_HZ, node_frequency={"policy": POLICY_HZ})
    compiled = leapp.compile_graph(graph_configs=configs)
    return SimpleNamespace(path=Path(compiled.path).parent, name=name)


def loop_parameters(namespace: str = "/rate_arm") -> dict[str, Any]:
    """The nodes' parameters file of the rate loop: ``preprocess`` fires on the JointState and
    Imu of one stamp (``sync: exact``; the command is a newest-value input), ``policy`` runs on
    its spec's 50 Hz timer and plays ``joint_targets`` out at 500 Hz, ``linear``; a fused node
    runs the whole pipeline on a 50 Hz timer on the newest whole set of one stamp (``firing:
    timer`` with ``sync: exact``), its targets at 500 Hz too."""

    def sensors() -> dict[str, Any]:  # a fresh dict each: YAML aliases are no parameters file
        return {"sync": "exact", "triggers": list(SENSOR_PORTS)}

    def targets() -> dict[str, Any]:
        return {"joint_targets": {"output_rate_hz": SENSOR_HZ, "interpolate": "linear"}}

    return {
        f"{namespace}/preprocess": {"ros__parameters": sensors()},
        f"{namespace}/policy": {"ros__parameters": {"ports": targets()}},
        f"{namespace}/leapp_fused": {
            "ros__parameters": {
                "firing": "timer",
                "rate_hz": POLICY_HZ,
                **sensors(),
                "ports": targets(),
            }
        },
    }


def eager(readings: list[Reading], commands: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``action`` and ``joint_targets`` eager PyTorch computes for each reading with the
    command of the same row (``[N, 3]``), float32 as the nodes decode the messages."""

    def stack(field: str) -> torch.Tensor:
        return torch.tensor(np.stack([getattr(r, field) for r in readings]), dtype=torch.float32)

    fields = ("position", "velocity", "gyro", "accel", "quat")
    with torch.no_grad():
        command = torch.tensor(np.asarray(commands), dtype=torch.float32)
        action, targets = policy(preprocess(*map(stack, fields), command))
    return action.numpy(), targets.numpy()


# --- robot messages ----------------------------------------------------------------------


def _stamp(stamp_ns: int) -> Any:
    from builtin_interfaces.msg import Time

    return Time(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000)


def joint_state_message(reading: Reading, stamp_ns: int, reverse: bool = False) -> Any:
    """``sensor_msgs/JointState`` of ``reading`` (joints reversed when ``reverse``)."""
    from sensor_msgs.msg import JointState

    order = slice(None, None, -1 if reverse else 1)
    message = JointState(name=list(JOINTS)[order])
    message.header.stamp = _stamp(stamp_ns)
    message.position = array.array("d", reading.position[order].tolist())
    message.velocity = array.array("d", reading.velocity[order].tolist())
    return message


def imu_message(reading: Reading, stamp_ns: int) -> Any:
    """``sensor_msgs/Imu`` of ``reading`` (frame ``imu``)."""
    from sensor_msgs.msg import Imu

    message = Imu()
    message.header.stamp = _stamp(stamp_ns)
    message.header.frame_id = "imu"
    rate, accel, q = message.angular_velocity, message.linear_acceleration, message.orientation
    rate.x, rate.y, rate.z = reading.gyro.tolist()
    accel.x, accel.y, accel.z = reading.accel.tolist()
    q.w, q.x, q.y, q.z = reading.quat.tolist()
    return message


def twist_message(command: np.ndarray) -> Any:
    """``geometry_msgs/Twist`` of ``command`` (forward, sideways, turn rate)."""
    from geometry_msgs.msg import Twist

    message = Twist()
    message.linear.x, message.linear.y, message.angular.z = (float(v) for v in command)
    return message
