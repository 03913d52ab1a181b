"""A MuJoCo model as the robot a graph controls: its sensor messages, its command, its falls.

:class:`SimulatedRobot` loads an MJCF file and checks it, with the :class:`SimMap`, against the
graph's plan before anything runs (:class:`~leapp_ros.sim.sim_map.SimMapError` naming the
joint, body, site or topic), then sets the map's physics timestep, initial joint positions and
base pose. Each control tick, :meth:`SimulatedRobot.sensor_messages` gives the CDR bytes of
every graph input topic, all read from one physics state and stamped with its simulated time
(``sensor_msgs/JointState``: the joints' positions, velocities and last torques under their
MJCF names; ``sensor_msgs/Imu``: the orientation, angular velocity and linear acceleration of
the map's IMU body or site, in its frame, as MuJoCo's framequat, gyro and accelerometer
sensors there read them (:class:`~leapp_ros.sim.imu_frame.ImuFrame`); ``geometry_msgs/Twist``
or ``TwistStamped``: ``command_velocity``; ``nav_msgs/Odometry``: the pose of the map's
odometry body in the world and its twist in its own frame; ``sensor_msgs/Image``: a camera's
depth or colour frame, on the ticks its ``every`` picks,
:mod:`~leapp_ros.sim.camera_frames`; ``sensor_msgs/PointCloud2``: the height scan,
:mod:`~leapp_ros.sim.height_scan`). :meth:`SimulatedRobot.act` takes the command
(position targets, turned into torques by the map's PD gains at every physics step, or
torques), steps the physics ``decimation`` times and runs ``mj_forward``, so that every
quantity MuJoCo derives (body poses and velocities, accelerations) is of the state reached,
as ``qpos`` and ``qvel`` are (``mj_step`` leaves them one step behind); ``mj_forward`` changes
no state, so the trajectory is the one plain ``mj_step`` calls give. Then the base's height
and tilt tell whether it fell, and its velocity in its own frame how well it tracks
``command_velocity``.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from leapp_ros.messages import cdr
from leapp_ros.messages.robot_codecs import message_class
from leapp_ros.plan.bindings import (
    IMAGE,
    IMU,
    JOINT_STATE,
    ODOMETRY,
    POINT_CLOUD2,
    TWIST,
    TWIST_STAMPED,
)
from leapp_ros.plan.pipeline import OutputPlan, PipelinePlan
from leapp_ros.sim.camera_frames import CameraFrames, camera_streams, fill_image
from leapp_ros.sim.height_scan import HeightScanner, check_scan_port
from leapp_ros.sim.imu_frame import ImuFrame, fill_odometry
from leapp_ros.sim.sim_map import SimMap, SimMapError

__all__ = ["SimulatedRobot", "TickState", "command_output", "require_mujoco"]

_PUBLISHED = (JOINT_STATE, IMU, TWIST, TWIST_STAMPED, ODOMETRY, IMAGE, POINT_CLOUD2)
_INSTALL = "pip install 'leapp_ros[sim]' (or: pip install mujoco)"


def require_mujoco() -> Any:
    """The ``mujoco`` module, or DependencyError saying what to install. On Linux without a
    display, with ``MUJOCO_GL`` unset, MuJoCo is asked to render through EGL (headless)."""
    from leapp.errors import DependencyError

    headless = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if sys.platform.startswith("linux") and headless and "mujoco" not in sys.modules:
        os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        import mujoco
    except ImportError as e:
        raise DependencyError(f"leapp-ros sim needs MuJoCo ({e}): {_INSTALL}") from e
    return mujoco


@dataclass(frozen=True)
class TickState:
    """The robot after one control tick: simulated time, the base's height and tilt, the
    velocity tracking error (the largest difference between ``command_velocity`` and the
    base's velocity in its own frame; None without a commanded velocity), the joint target
    error (position mode) and the base's position in the world."""

    time_s: float
    height: float
    tilt_deg: float
    velocity_error: float | None
    joint_error: float | None
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)


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
        self.imu = self._imu_frame()
        body = self._body(sim_map.odometry.body or model.body(self.base).name, "odometry.body")
        self.odometry = ImuFrame(mujoco, model.body(body).name, body, site=False)
        streams = camera_streams(model, sim_map, plan)
        fed = {stream.topic for stream in streams}
        unfed = [t for t, kind in self.topics.items() if kind == IMAGE and t not in fed]
        if unfed:
            raise SimMapError(f"{sim_map.path}: graph input(s) {unfed} take sensor_msgs/Image: "
                              "map a camera to each (cameras: {<MJCF camera>: {depth: <topic>} "
                              "or {colour: <topic>}})")  # fmt: skip
        scan = sim_map.height_scan
        self.scanner = None if scan is None else HeightScanner(
            mujoco, model, scan, self.base, sim_map.odometry.frame_id)  # fmt: skip
        if scan is not None and plan.resolve(scan.topic) not in self._clouds:
            raise SimMapError(f"{sim_map.path}: height_scan.topic {plan.resolve(scan.topic)} "
                              f"is no PointCloud2 input of graph {plan.namespace}; its "
                              f"PointCloud2 inputs: {list(self._clouds) or 'none'}")  # fmt: skip
        self._layouts = {
            kind: cdr.layout(message_class(kind)) for kind in set(self.topics.values())
        }
        if sim_map.timestep is not None:
            model.opt.timestep = sim_map.timestep
        for joint, value in sim_map.initial.items():
            (address,) = self._addresses((joint,), names, model.jnt_qposadr, "initial")
            self.data.qpos[address] = value
        if sim_map.base_pose is not None:
            address = self._free_joint_address()
            if sim_map.base_pose.position is not None:
                self.data.qpos[address : address + 3] = sim_map.base_pose.position
            if sim_map.base_pose.orientation is not None:
                self.data.qpos[address + 3 : address + 7] = sim_map.base_pose.orientation
        mujoco.mj_forward(model, self.data)
        self._torque = np.zeros(count)
        self._target: np.ndarray | None = None
        self.tick = 0  # control ticks done
        self.cameras = CameraFrames(mujoco, model, streams)  # last: it holds GL contexts

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

    def _imu_frame(self) -> ImuFrame:
        model, site = self.model, self.map.imu_site
        if not site:
            body = self._body(self.map.imu or model.body(self.base).name, "imu")
            return ImuFrame(self._mujoco, model.body(body).name, body, site=False)
        try:
            return ImuFrame(self._mujoco, site, int(model.site(site).id), site=True)
        except KeyError:
            sites = [model.site(i).name for i in range(model.nsite)]
            raise SimMapError(f"{self.map.path}: imu_site: {site!r} is no site of the MJCF "
                              f"model; it has {sites or 'no sites'} (or name a body with "
                              "imu)") from None  # fmt: skip

    def _free_joint_address(self) -> int:
        """The qpos address of the base's free joint (for base_pose)."""
        model = self.model
        joints = [i for i in range(model.njnt) if int(model.jnt_bodyid[i]) == self.base]
        free = int(self._mujoco.mjtJoint.mjJNT_FREE)
        for joint in joints:
            if int(model.jnt_type[joint]) == free:
                return int(model.jnt_qposadr[joint])
        names = [model.joint(joint).name or f"#{joint}" for joint in joints]
        raise SimMapError(
            f"{self.map.path}: base_pose needs a free joint on the base body "
            f"{model.body(self.base).name!r}; it has {names or 'no joints'}: set its pose in "
            "the MJCF, or name the floating body with base"
        )

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
        topics, self._clouds = {}, {}
        for node in plan.nodes:
            for port in node.inputs:
                if port.kind != "external" or port.topic is None:
                    continue
                topic = plan.resolve(port.topic)
                if port.message_type not in _PUBLISHED:
                    raise SimMapError(
                        f"graph input {topic} ({node.name}/{port.port}) takes "
                        f"{port.message_type}; the simulator publishes JointState, Imu, Twist, "
                        "Odometry, Image and PointCloud2: give the port a kind that binds it to "
                        "one (state/joint/*, state/body/*, command/body/velocity, "
                        "state/camera/*, state/terrain/height)"
                    )
                if port.message_type == POINT_CLOUD2:
                    check_scan_port(self.map.height_scan, topic, port, str(self.map.path))
                    self._clouds[topic] = port
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
        """The serialized message of every graph input topic due this tick (a camera's on
        the ticks its ``every`` picks, every other topic each tick), all of the state now."""
        frames = self.cameras.render(self.data, self.tick)
        return {
            topic: self._message(kind, topic, frames)
            for topic, kind in self.topics.items()
            if kind != IMAGE or topic in frames
        }

    def _message(self, kind: str, topic: str, frames: dict[str, np.ndarray]) -> bytes:
        fields = self._layouts[kind]
        if kind == POINT_CLOUD2:
            message = self.scanner.message(self.data, fields)  # type: ignore[union-attr]
        else:
            message = cdr.defaults(fields)
        nanoseconds = round(self.data.time * 1e9)
        if hasattr(message, "header"):
            message.header.stamp.sec, message.header.stamp.nanosec = divmod(nanoseconds, 10**9)
        data, model = self.data, self.model
        if kind == JOINT_STATE:
            message.name = list(self.joints)
            message.position = data.qpos[self._qpos].astype("<f8")
            message.velocity = data.qvel[self._dofs].astype("<f8")
            effort = dict(zip(self.commanded, self._torque, strict=True))
            message.effort = np.array([effort.get(joint, 0.0) for joint in self.joints], "<f8")
        elif kind == IMAGE:
            stream = next(s for s in self.cameras.streams if s.topic == topic)
            fill_image(message, frames[topic], stream)
        elif kind == ODOMETRY:
            fill_odometry(message, self.odometry, model, data, self.map.odometry.frame_id)
        elif kind == IMU:
            message.header.frame_id = self.imu.name
            w, x, y, z = self.imu.orientation(data)
            q = message.orientation
            q.x, q.y, q.z, q.w = float(x), float(y), float(z), float(w)
            _set(message.angular_velocity, self.imu.angular_velocity(model, data))
            _set(message.linear_acceleration, self.imu.linear_acceleration(model, data))
        elif kind != POINT_CLOUD2:
            twist = message.twist if kind == TWIST_STAMPED else message
            linear, angular = self._commanded_velocity()
            _set(twist.linear, linear)
            _set(twist.angular, angular)
        return cdr.write(message, fields)

    def _commanded_velocity(self) -> tuple[np.ndarray, np.ndarray]:
        command = np.asarray(self.map.command_velocity or (0.0, 0.0, 0.0), np.float64)
        if command.size == 3:
            return np.array([command[0], command[1], 0.0]), np.array([0.0, 0.0, command[2]])
        return command[:3], command[3:]

    def act(self, command: Any) -> TickState:
        """Apply ``command`` (the command output's values, its joints' order) for one control
        tick of ``decimation`` physics steps, then ``mj_forward``; the state after it."""
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
        mujoco.mj_forward(model, data)  # poses, velocities, accelerations of the state reached
        self.tick += 1
        return self.state()

    def close(self) -> None:
        """Free the cameras' renderers (their GL contexts)."""
        self.cameras.close()

    def state(self) -> TickState:
        """The robot now (after :meth:`act`, or at the start)."""
        data = self.data
        tilt = math.degrees(math.acos(min(1.0, max(-1.0, float(data.xmat[self.base][8])))))
        velocity_error = None
        if self.map.command_velocity:
            velocity = np.zeros(6)  # angular, linear: of the base's origin, in its frame
            frame = self._mujoco.mjtObj.mjOBJ_XBODY
            self._mujoco.mj_objectVelocity(self.model, data, frame, self.base, velocity, 1)
            linear, angular = self._commanded_velocity()
            measured = np.concatenate([velocity[3:], velocity[:3]])
            wanted = np.concatenate([linear, angular])
            axes = [0, 1, 5] if len(self.map.command_velocity) == 3 else list(range(6))
            velocity_error = float(np.abs(measured - wanted)[axes].max())
        joint_error = None
        if self._target is not None:
            joint_error = float(np.abs(self._target - data.qpos[self._command_qpos]).max())
        x, y, z = (float(value) for value in data.xpos[self.base])
        return TickState(self.time_s, z, tilt, velocity_error, joint_error, (x, y, z))


def _set(vector: Any, values: Any) -> None:
    vector.x, vector.y, vector.z = (float(value) for value in values)
