"""A MuJoCo model as the robot a graph controls: its sensor messages, its command, its falls.

:class:`SimulatedRobot` loads an MJCF file and checks it, with the :class:`SimMap`, against the
graph's plan before anything runs (:class:`~leapp_ros.sim.sim_map.SimMapError` naming the
joint, body or topic). Each control tick, :meth:`SimulatedRobot.sensor_messages` gives the CDR
bytes of every graph input topic (``sensor_msgs/JointState``: the joints' positions,
velocities and last torques under their MJCF names; ``sensor_msgs/Imu``: the ``imu`` body's
orientation, angular velocity in its own frame and what an accelerometer at its origin reads
(the change of its velocity over the last control tick, less gravity);
``geometry_msgs/Twist`` or ``TwistStamped``: ``command_velocity``), stamped with
the simulated time. :meth:`SimulatedRobot.act` takes the command (position targets, turned into
torques by the map's PD gains at every physics step, or torques) and steps the physics
``decimation`` times; then the base's height and tilt tell whether it fell, and its velocity
how well it tracks ``command_velocity``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from leapp_ros.messages import cdr
from leapp_ros.messages.robot_codecs import message_class
from leapp_ros.plan.bindings import IMU, JOINT_STATE, TWIST, TWIST_STAMPED
from leapp_ros.plan.pipeline import OutputPlan, PipelinePlan
from leapp_ros.sim.sim_map import SimMap, SimMapError

__all__ = ["SimulatedRobot", "TickState", "command_output", "require_mujoco"]

_INSTALL = "pip install 'leapp_ros[sim]' (or: pip install mujoco)"


def require_mujoco() -> Any:
    """The ``mujoco`` module, or DependencyError saying what to install."""
    from leapp.errors import DependencyError

    try:
        import mujoco
    except ImportError as e:
        raise DependencyError(f"leapp-ros sim needs MuJoCo ({e}): {_INSTALL}") from e
    return mujoco


@dataclass(frozen=True)
class TickState:
    """The robot after one control tick: simulated time, the base's height and tilt, the
    velocity tracking error (None without a commanded velocity) and the joint target error
    (position mode)."""

    time_s: float
    height: float
    tilt_deg: float
    velocity_error: float | None
    joint_error: float | None


def command_output(plan: PipelinePlan, topic: str = "") -> tuple[str, OutputPlan]:
    """``("node/port", plan)`` of the command output: the one at ``topic`` (relative to the
    namespace, or absolute), else the graph's one joint target output."""
    outputs = [(f"{n.name}/{o.port}", o) for n in plan.nodes for o in n.outputs]
    if topic:
        wanted = topic if topic.startswith("/") else plan.resolve(topic)
        found = [(key, o) for key, o in outputs if plan.resolve(o.topic) == wanted]
        if not found:
            listed = ", ".join(key for key, _ in outputs)
            raise SimMapError(
                f"command.topic {topic!r}: graph {plan.namespace} publishes no {wanted}; its "
                f"outputs are {listed}"
            )
        return found[0]
    targets = [
        (key, o)
        for key, o in outputs
        if o.binding is not None and o.binding.kind.startswith("target/joint/")
    ]
    if len(targets) != 1:
        raise SimMapError(
            f"graph {plan.namespace} has {len(targets)} joint target outputs "
            f"({', '.join(k for k, _ in targets) or 'none'}); name the command with "
            "command.topic in the map"
        )
    return targets[0]


class SimulatedRobot:
    """The MJCF model at ``mjcf`` run as ``sim_map`` says for the graph of ``plan``."""

    def __init__(self, mjcf: str | os.PathLike[str], sim_map: SimMap, plan: PipelinePlan):
        mujoco = require_mujoco()
        self._mujoco = mujoco
        self.map = sim_map
        path = Path(mjcf)
        try:
            self.model = mujoco.MjModel.from_xml_path(str(path))
        except (ValueError, OSError) as e:  # MuJoCo's parser says where
            raise SimMapError(f"MJCF model {path} cannot be loaded: {e}") from e
        self.data = mujoco.MjData(self.model)
        model = self.model
        movable = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
        names = [model.joint(i).name for i in range(model.njnt)
                 if int(model.jnt_type[i]) in movable]  # fmt: skip
        self.joints = tuple(sim_map.joints) or tuple(names)
        self._qpos = self._addresses(self.joints, names, model.jnt_qposadr, "joints")
        self._dofs = self._addresses(self.joints, names, model.jnt_dofadr, "joints")
        self.topics = self._input_topics(plan)
        self.base = self._body(sim_map.base or model.body(1).name, "base")
        self.command_key, port = command_output(plan, sim_map.command.topic)
        if port.binding is None or not port.binding.elements:
            raise SimMapError(f"{sim_map.path}: the command {self.command_key} names no joints "
                              "(kind target/joint/* with element_names)")  # fmt: skip
        self.commanded = tuple(port.binding.elements)
        self._command_qpos = self._addresses(self.commanded, names, model.jnt_qposadr, "command")
        self._command_dofs = self._addresses(self.commanded, names, model.jnt_dofadr, "command")
        count = len(self.commanded)
        command = sim_map.command
        self._kp, self._kd = self._per_joint(command.kp, count), self._per_joint(command.kd, count)
        self._limit = None if command.torque_limit is None else self._per_joint(
            command.torque_limit, count)  # fmt: skip
        self._imu = self._body(sim_map.imu or model.body(self.base).name, "imu")
        self._layouts = {
            kind: cdr.layout(message_class(kind)) for kind in set(self.topics.values())
        }
        for joint, value in sim_map.initial.items():
            (address,) = self._addresses((joint,), names, model.jnt_qposadr, "initial")
            self.data.qpos[address] = value
        mujoco.mj_forward(model, self.data)
        self._torque = np.zeros(count)
        self._target: np.ndarray | None = None
        self._imu_reading: tuple[np.ndarray | None, float] = (None, 0.0)  # velocity, time

    # --- checks against the model and the graph ------------------------------------------

    def _addresses(self, joints: Any, names: list[str], table: Any, key: str) -> np.ndarray:
        missing = [joint for joint in joints if joint not in names]
        if missing:
            raise SimMapError(
                f"{self.map.path}: {key}: joint(s) {missing} are no hinge or slide joint of the "
                f"MJCF model; it has {names}"
            )
        return np.array([table[self.model.joint(joint).id] for joint in joints], np.intp)

    def _body(self, name: str, key: str) -> int:
        try:
            return int(self.model.body(name).id)
        except KeyError:
            bodies = [self.model.body(i).name for i in range(1, self.model.nbody)]
            raise SimMapError(f"{self.map.path}: {key}: {name!r} is no body of the MJCF model; "
                              f"it has {bodies}") from None  # fmt: skip

    def _per_joint(self, value: Any, count: int) -> np.ndarray:
        values = np.asarray(value, np.float64)
        if values.ndim == 0:
            values = np.full(count, float(values))
        if values.shape != (count,):
            raise SimMapError(
                f"{self.map.path}: command gains and limits take one number or {count} "
                f"(joints {list(self.commanded)}), got {values.tolist()}"
            )
        return values

    def _input_topics(self, plan: PipelinePlan) -> dict[str, str]:
        """Absolute graph input topic -> the message type published on it."""
        topics = {}
        for node in plan.nodes:
            for port in node.inputs:
                if port.kind != "external" or port.topic is None:
                    continue
                topic = plan.resolve(port.topic)
                if port.message_type not in (JOINT_STATE, IMU, TWIST, TWIST_STAMPED):
                    raise SimMapError(
                        f"graph input {topic} ({node.name}/{port.port}) takes "
                        f"{port.message_type}; the simulator publishes JointState, Imu and "
                        "Twist: give the port a kind that binds it to one (state/joint/*, "
                        "state/body/*, command/body/velocity)"
                    )
                missing = [j for j in (port.binding.elements if port.message_type == JOINT_STATE
                                       else ()) if j not in self.joints]  # fmt: skip
                if missing:
                    raise SimMapError(f"{self.map.path}: graph input {topic} needs joint(s) "
                                      f"{missing}, which the JointState lacks: add them to "
                                      f"joints (now {list(self.joints)})")  # fmt: skip
                topics[topic] = port.message_type
        return topics

    # --- one control tick ----------------------------------------------------------------

    @property
    def time_s(self) -> float:
        return float(self.data.time)

    def sensor_messages(self) -> dict[str, bytes]:
        """The serialized message of every graph input topic, now."""
        return {topic: self._message(kind) for topic, kind in self.topics.items()}

    def _message(self, kind: str) -> bytes:
        fields = self._layouts[kind]
        message = cdr.defaults(fields)
        nanoseconds = round(self.data.time * 1e9)
        if hasattr(message, "header"):
            message.header.stamp.sec, message.header.stamp.nanosec = divmod(nanoseconds, 10**9)
        data, mujoco = self.data, self._mujoco
        if kind == JOINT_STATE:
            message.name = list(self.joints)
            message.position = data.qpos[self._qpos].astype("<f8")
            message.velocity = data.qvel[self._dofs].astype("<f8")
            effort = dict(zip(self.commanded, self._torque, strict=True))
            message.effort = np.array([effort.get(joint, 0.0) for joint in self.joints], "<f8")
        elif kind == IMU:
            message.header.frame_id = self.model.body(self._imu).name
            velocity = np.zeros(6)
            body = mujoco.mjtObj.mjOBJ_BODY
            mujoco.mj_objectVelocity(self.model, data, body, self._imu, velocity, 1)
            w, x, y, z = data.xquat[self._imu]
            q = message.orientation
            q.x, q.y, q.z, q.w = float(x), float(y), float(z), float(w)
            _set(message.angular_velocity, velocity[:3])
            _set(message.linear_acceleration, self._proper_acceleration())
        else:
            twist = message.twist if kind == TWIST_STAMPED else message
            linear, angular = self._commanded_velocity()
            _set(twist.linear, linear)
            _set(twist.angular, angular)
        return cdr.write(message, fields)

    def _proper_acceleration(self) -> np.ndarray:
        """What an accelerometer at the Imu body's origin reads, in the body's frame: the change
        of the origin's velocity since the last reading (0 before), less gravity."""
        mujoco, data = self._mujoco, self.data
        velocity = np.zeros(6)
        mujoco.mj_objectVelocity(
            self.model, data, mujoco.mjtObj.mjOBJ_BODY, self._imu, velocity, 0
        )
        # the velocity is the body's centre of mass's: move it to the body's origin
        offset = data.xpos[self._imu] - data.xipos[self._imu]
        linear = velocity[3:] + np.cross(velocity[:3], offset)
        elapsed = data.time - self._imu_reading[1]
        acceleration = np.zeros(3)
        if self._imu_reading[0] is not None and elapsed > 0:
            acceleration = (linear - self._imu_reading[0]) / elapsed
        self._imu_reading = (linear, data.time)
        rotation = data.xmat[self._imu].reshape(3, 3)
        return rotation.T @ (acceleration - self.model.opt.gravity)

    def _commanded_velocity(self) -> tuple[np.ndarray, np.ndarray]:
        command = np.asarray(self.map.command_velocity or (0.0, 0.0, 0.0), np.float64)
        if command.size == 3:
            return np.array([command[0], command[1], 0.0]), np.array([0.0, 0.0, command[2]])
        return command[:3], command[3:]

    def act(self, command: Any) -> TickState:
        """Apply ``command`` (the command output's values, its joints' order) for one control
        tick of ``decimation`` physics steps; the state after it."""
        values = np.asarray(command, np.float64).reshape(-1, len(self.commanded))[0]
        mujoco, model, data = self._mujoco, self.model, self.data
        position = self.map.command.mode == "position"
        self._target = values if position else None
        for _ in range(self.map.decimation):
            if position:
                q, qd = data.qpos[self._command_qpos], data.qvel[self._command_dofs]
                torque = self._kp * (values - q) - self._kd * qd
            else:
                torque = values
            if self._limit is not None:
                torque = np.clip(torque, -self._limit, self._limit)
            data.qfrc_applied[self._command_dofs] = torque
            self._torque = torque
            mujoco.mj_step(model, data)
        return self.state()

    def state(self) -> TickState:
        data = self.data
        tilt = math.degrees(math.acos(min(1.0, max(-1.0, float(data.xmat[self.base][8])))))
        velocity_error = None
        if self.map.command_velocity:
            velocity = np.zeros(6)
            body = self._mujoco.mjtObj.mjOBJ_BODY
            self._mujoco.mj_objectVelocity(self.model, data, body, self.base, velocity, 1)
            linear, angular = self._commanded_velocity()
            measured = np.concatenate([velocity[3:], velocity[:3]])
            wanted = np.concatenate([linear, angular])
            axes = [0, 1, 5] if len(self.map.command_velocity) == 3 else list(range(6))
            velocity_error = float(np.abs(measured - wanted)[axes].max())
        joint_error = None
        if self._target is not None:
            joint_error = float(np.abs(self._target - data.qpos[self._command_qpos]).max())
        return TickState(self.time_s, float(data.xpos[self.base][2]), tilt, velocity_error,
                         joint_error)  # fmt: skip


def _set(vector: Any, values: Any) -> None:
    vector.x, vector.y, vector.z = (float(value) for value in values)
