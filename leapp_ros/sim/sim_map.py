"""The map between a MuJoCo model and a pipeline's graph, for ``leapp-ros sim``: a YAML file.

::

    decimation: 4            # physics steps per control tick
    timestep: 0.002          # s per physics step (default: the MJCF's option timestep)
    ticks: 200               # control ticks per run
    base: torso              # the robot's base body: falls, command tracking (default: the
                             # first body of the model)
    base_pose:               # where the base starts (its free joint's qpos; default: the MJCF's)
      position: [0.0, 0.0, 0.45]          # m, in the world
      orientation: [1.0, 0.0, 0.0, 0.0]   # w, x, y, z (normalized here)
    joints: [hip, knee]      # MJCF joints in the JointState (default: every hinge and slide)
    initial: {hip: 0.1}      # initial joint positions (rad or m; default: the model's)
    imu: torso               # the body whose frame the Imu reads (default: the base) ...
    imu_site: imu            # ... or the site (give one of the two)
    command_velocity: [0.5, 0.0, 0.2]   # the commanded Twist: linear x, y, angular z (or 6)
    command:
      topic: policy/joint_targets       # default: the graph's one joint target output
      mode: position         # position targets through PD gains, or torque
      kp: 40.0               # one number, or one per commanded joint
      kd: 2.0
      torque_limit: 50.0     # optional, N m (or N) per joint
    fall:
      min_height: 0.3        # m: the base below this height is a fall
      max_tilt_deg: 60       # the base's z axis this far from the world's is a fall
    cameras:                 # MJCF cameras rendered offscreen (MuJoCo's Renderer)
      head:                  # the camera's name in the MJCF
        depth: observe/depth # the graph input taking its depth image (32FC1, metres)
        colour: observe/rgb  # ... its colour image (rgb8); give depth, colour or both
        every: 2             # control ticks per frame (default 1: every tick)
    odometry:                # the nav_msgs/Odometry (default: of the base, in frame world)
      body: torso
      frame_id: world
    height_scan:             # terrain heights around the base by ray casts, a PointCloud2
      topic: observe/heights # the graph input taking them
      grid: [5, 7]           # rows (along the base's heading), columns (to its left)
      spacing: [0.1, 0.1]    # m between rows, between columns (or one number)
      relative_to: base      # heights less the base's height, or world
      cast_from: 1.0         # m above the base the rays start, straight down

Every key but ``command`` is optional. What is published each tick follows from the graph's
input topics: a ``sensor_msgs/JointState`` topic gets the joints' positions and velocities
(and the last torques as effort) under their MJCF names, a ``sensor_msgs/Imu`` topic the
orientation, angular velocity and linear acceleration of the ``imu`` body's frame or the
``imu_site``'s, as MuJoCo's framequat, gyro and accelerometer sensors there read them
(:mod:`leapp_ros.sim.imu_frame`), a ``geometry_msgs/Twist`` (or ``TwistStamped``) topic
``command_velocity``, a ``nav_msgs/Odometry`` topic the pose of the ``odometry`` body in
the world and its twist in its own frame (REP 105), a ``sensor_msgs/Image`` topic the frame a
``cameras`` entry renders for it, a ``sensor_msgs/PointCloud2`` topic the ``height_scan``
(:mod:`leapp_ros.sim.camera_frames`, :mod:`leapp_ros.sim.height_scan`). :func:`load_map`
checks the file's schema, and
:class:`~leapp_ros.sim.mujoco_robot.SimulatedRobot` checks it against the model and the plan;
both raise :class:`SimMapError` naming the key, joint, body, site or topic that does not fit,
and what to write instead.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leapp.errors import LeappError

__all__ = [
    "BasePose",
    "CameraMap",
    "CommandMap",
    "FallRule",
    "HeightScan",
    "OdometryMap",
    "SimMap",
    "SimMapError",
    "load_map",
    "parse_map",
]

_KEYS = {"decimation", "timestep", "ticks", "base", "base_pose", "joints", "initial", "imu",
         "imu_site", "command_velocity", "command", "fall", "cameras", "odometry",
         "height_scan"}  # fmt: skip
_COMMAND_KEYS = {"topic", "mode", "kp", "kd", "torque_limit"}
_FALL_KEYS = {"min_height", "max_tilt_deg"}
_POSE_KEYS = {"position", "orientation"}
_CAMERA_KEYS = {"depth", "colour", "every"}
_ODOMETRY_KEYS = {"body", "frame_id"}
_SCAN_KEYS = {"topic", "grid", "spacing", "relative_to", "cast_from"}
MODES = ("position", "torque")
HEIGHT_ORIGINS = ("base", "world")


class SimMapError(LeappError):
    """A simulation map that does not fit its file's schema, the model or the graph."""


@dataclass(frozen=True)
class CommandMap:
    """How the command output moves the joints: ``mode`` ``position`` (``kp`` / ``kd``, one
    per joint) or ``torque``; ``topic`` relative to the namespace (empty: find it)."""

    topic: str
    mode: str
    kp: tuple[float, ...] | float
    kd: tuple[float, ...] | float
    torque_limit: tuple[float, ...] | float | None


@dataclass(frozen=True)
class FallRule:
    """When the base has fallen: lower than ``min_height`` or tilted more than ``max_tilt_deg``
    (None: not checked)."""

    min_height: float | None = None
    max_tilt_deg: float | None = None

    def fallen(self, height: float, tilt_deg: float) -> bool:
        return (self.min_height is not None and height < self.min_height) or (
            self.max_tilt_deg is not None and tilt_deg > self.max_tilt_deg
        )


@dataclass(frozen=True)
class BasePose:
    """The base's initial pose: ``position`` (m) and ``orientation`` (unit ``w, x, y, z``) in
    the world; None keeps the model's."""

    position: tuple[float, float, float] | None
    orientation: tuple[float, float, float, float] | None


@dataclass(frozen=True)
class CameraMap:
    """The MJCF camera ``name``: its depth image on the graph input topic ``depth``, its
    colour image on ``colour`` (relative to the namespace; empty: not rendered), one frame
    every ``every`` control ticks (the first tick's included)."""

    name: str
    depth: str = ""
    colour: str = ""
    every: int = 1


@dataclass(frozen=True)
class OdometryMap:
    """Whose ``nav_msgs/Odometry``: the ``body`` (empty: the base), its pose in the frame
    ``frame_id`` (the MuJoCo world)."""

    body: str = ""
    frame_id: str = "world"


@dataclass(frozen=True)
class HeightScan:
    """Terrain heights on a ``rows`` x ``columns`` grid, ``spacing`` (m, between rows and
    between columns) apart, centred under the base and turned with its heading, published on
    the graph input ``topic``; ``relative_to`` ``base`` (the hit's height less the base's) or
    ``world``; the rays start ``cast_from`` m above the base."""

    topic: str
    rows: int
    columns: int
    spacing: tuple[float, float]
    relative_to: str = "base"
    cast_from: float = 1.0


@dataclass(frozen=True)
class SimMap:
    """A checked map (see the module documentation); ``path`` for messages. ``imu`` is the
    Imu's body, or empty when ``imu_site`` names its site; ``timestep`` None keeps the
    MJCF's."""

    path: Path
    decimation: int
    ticks: int
    base: str
    joints: tuple[str, ...]
    initial: Mapping[str, float]
    imu: str
    command_velocity: tuple[float, ...]
    command: CommandMap
    fall: FallRule
    imu_site: str = ""
    base_pose: BasePose | None = None
    timestep: float | None = None
    cameras: tuple[CameraMap, ...] = ()
    odometry: OdometryMap = OdometryMap()
    height_scan: HeightScan | None = None


def load_map(path: str | os.PathLike[str]) -> SimMap:
    """The map in the YAML file ``path`` (its schema; the model and the graph are checked
    when the run is set up).

    Raises:
        SimMapError: unreadable, not a mapping, unknown keys, values of the wrong kind.
    """
    import yaml

    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise SimMapError(f"simulation map {path} cannot be read: {e}") from e
    return parse_map(document, path)


def parse_map(document: Any, path: Path) -> SimMap:
    """:func:`load_map` of an already parsed YAML ``document``."""
    what = f"simulation map {path}"
    if not isinstance(document, dict):
        raise SimMapError(f"{what}: expected a mapping of keys ({', '.join(sorted(_KEYS))})")
    _unknown(document, _KEYS, what)
    if "command" not in document:
        raise SimMapError(f"{what}: no 'command' (at least: command: {{mode: torque}})")
    command = _mapping(document["command"], f"{what}: command")
    _unknown(command, _COMMAND_KEYS, f"{what}: command")
    mode = command.get("mode", "position")
    if mode not in MODES:
        raise SimMapError(f"{what}: command.mode is {mode!r}; choose {' or '.join(MODES)}")
    if mode == "position" and ("kp" not in command or "kd" not in command):
        raise SimMapError(f"{what}: command.mode position needs the PD gains command.kp and "
                          "command.kd (a number, or one per commanded joint)")  # fmt: skip
    fall = _mapping(document.get("fall", {}), f"{what}: fall")
    _unknown(fall, _FALL_KEYS, f"{what}: fall")
    joints = document.get("joints", [])
    if not isinstance(joints, list) or not all(isinstance(j, str) for j in joints):
        raise SimMapError(f"{what}: joints must be a list of MJCF joint names, got {joints!r}")
    initial = _mapping(document.get("initial", {}), f"{what}: initial")
    velocity = document.get("command_velocity", [])
    if velocity and len(_numbers(velocity, f"{what}: command_velocity")) not in (3, 6):
        raise SimMapError(f"{what}: command_velocity takes 3 values (linear x, y, angular z) "
                          f"or 6 (linear, angular), got {velocity!r}")  # fmt: skip
    base = document.get("base", "")
    if "imu" in document and "imu_site" in document:
        raise SimMapError(f"{what}: give the Imu's frame as imu (a body) or imu_site (a site), "
                          f"not both (imu: {document['imu']!r}, imu_site: "
                          f"{document['imu_site']!r})")  # fmt: skip
    imu_site = _name(document.get("imu_site", ""), f"{what}: imu_site")
    timestep = document.get("timestep")
    if timestep is not None and _number(timestep, f"{what}: timestep") <= 0:
        raise SimMapError(f"{what}: timestep must be a positive number of seconds, got "
                          f"{timestep!r}")  # fmt: skip
    return SimMap(
        path=path,
        decimation=_positive_int(document.get("decimation", 1), f"{what}: decimation"),
        ticks=_positive_int(document.get("ticks", 200), f"{what}: ticks"),
        base=_name(base, f"{what}: base"),
        joints=tuple(joints),
        initial={str(k): _number(v, f"{what}: initial.{k}") for k, v in initial.items()},
        imu="" if imu_site else _name(document.get("imu", base), f"{what}: imu"),
        command_velocity=tuple(_numbers(velocity, f"{what}: command_velocity")),
        command=CommandMap(
            topic=_name(command.get("topic", ""), f"{what}: command.topic"),
            mode=mode,
            kp=_gains(command.get("kp", 0.0), f"{what}: command.kp"),
            kd=_gains(command.get("kd", 0.0), f"{what}: command.kd"),
            torque_limit=None
            if command.get("torque_limit") is None
            else _gains(command["torque_limit"], f"{what}: command.torque_limit"),
        ),
        fall=FallRule(
            min_height=_optional(fall.get("min_height"), f"{what}: fall.min_height"),
            max_tilt_deg=_optional(fall.get("max_tilt_deg"), f"{what}: fall.max_tilt_deg"),
        ),
        imu_site=imu_site,
        base_pose=_pose(document["base_pose"], what) if "base_pose" in document else None,
        timestep=None if timestep is None else float(timestep),
        cameras=_cameras(document.get("cameras", {}), what),
        odometry=_odometry(document.get("odometry", {}), what),
        height_scan=_scan(document["height_scan"], what) if "height_scan" in document else None,
    )


def _cameras(value: Any, what: str) -> tuple[CameraMap, ...]:
    cameras = []
    for name, entry in _mapping(value, f"{what}: cameras").items():
        where = f"{what}: cameras.{name}"
        entry = _mapping(entry, where)
        _unknown(entry, _CAMERA_KEYS, where)
        depth = _name(entry.get("depth", ""), f"{where}.depth")
        colour = _name(entry.get("colour", ""), f"{where}.colour")
        if not depth and not colour:
            raise SimMapError(
                f"{where}: give the graph input topic of its depth image (depth: <topic>), of "
                "its colour image (colour: <topic>) or both"
            )
        every = _positive_int(entry.get("every", 1), f"{where}.every")
        cameras.append(CameraMap(str(name), depth, colour, every))
    return tuple(cameras)


def _odometry(value: Any, what: str) -> OdometryMap:
    entry = _mapping(value, f"{what}: odometry")
    _unknown(entry, _ODOMETRY_KEYS, f"{what}: odometry")
    frame = _name(entry.get("frame_id", "world"), f"{what}: odometry.frame_id")
    return OdometryMap(_name(entry.get("body", ""), f"{what}: odometry.body"), frame or "world")


def _scan(value: Any, what: str) -> HeightScan:
    where = f"{what}: height_scan"
    entry = _mapping(value, where)
    _unknown(entry, _SCAN_KEYS, where)
    for key in ("topic", "grid", "spacing"):
        if key not in entry:
            raise SimMapError(f"{where}: no {key} (topic: the graph input, grid: [rows, "
                              "columns], spacing: m between samples)")  # fmt: skip
    grid = entry["grid"]
    if not isinstance(grid, list) or len(grid) != 2:
        raise SimMapError(f"{where}.grid takes [rows, columns], got {grid!r}")
    rows, columns = (_positive_int(n, f"{where}.grid") for n in grid)
    spacing = entry["spacing"]
    spacing = _numbers(spacing, f"{where}.spacing") if isinstance(spacing, list) else [
        _number(spacing, f"{where}.spacing")] * 2  # fmt: skip
    if len(spacing) != 2 or min(spacing) <= 0:
        raise SimMapError(f"{where}.spacing takes one positive number of m or two (between "
                          f"rows, between columns), got {entry['spacing']!r}")  # fmt: skip
    relative = entry.get("relative_to", "base")
    if relative not in HEIGHT_ORIGINS:
        raise SimMapError(f"{where}.relative_to is {relative!r}; choose "
                          f"{' or '.join(HEIGHT_ORIGINS)}")  # fmt: skip
    cast_from = _number(entry.get("cast_from", 1.0), f"{where}.cast_from")
    topic = _name(entry["topic"], f"{where}.topic")
    return HeightScan(topic, rows, columns, (spacing[0], spacing[1]), relative, cast_from)


def _pose(value: Any, what: str) -> BasePose:
    pose = _mapping(value, f"{what}: base_pose")
    _unknown(pose, _POSE_KEYS, f"{what}: base_pose")
    position = orientation = None
    if "position" in pose:
        position = _numbers(pose["position"], f"{what}: base_pose.position")
        if len(position) != 3:
            raise SimMapError(f"{what}: base_pose.position takes 3 numbers (x, y, z in m), "
                              f"got {pose['position']!r}")  # fmt: skip
    if "orientation" in pose:
        orientation = _numbers(pose["orientation"], f"{what}: base_pose.orientation")
        norm = math.sqrt(sum(value * value for value in orientation))
        if len(orientation) != 4 or norm < 1e-9:
            raise SimMapError(f"{what}: base_pose.orientation takes a quaternion of 4 numbers "
                              f"(w, x, y, z), not all 0, got {pose['orientation']!r}")  # fmt: skip
        orientation = [value / norm for value in orientation]
    return BasePose(
        position=None if position is None else tuple(position),  # type: ignore[arg-type]
        orientation=None if orientation is None else tuple(orientation),  # type: ignore[arg-type]
    )


def _unknown(document: Mapping[str, Any], known: set[str], what: str) -> None:
    unknown = sorted(set(document) - known)
    if unknown:
        raise SimMapError(f"{what}: unknown key(s) {unknown}; known: {', '.join(sorted(known))}")


def _mapping(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise SimMapError(f"{what} must be a mapping, got {value!r}")
    return value


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise SimMapError(f"{what} must be a name, got {value!r}")
    return value


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SimMapError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _numbers(value: Any, what: str) -> list[float]:
    if not isinstance(value, list):
        raise SimMapError(f"{what} must be a list of numbers, got {value!r}")
    return [_number(item, what) for item in value]


def _gains(value: Any, what: str) -> tuple[float, ...] | float:
    if isinstance(value, list):
        return tuple(_numbers(value, what))
    return _number(value, what)


def _optional(value: Any, what: str) -> float | None:
    return None if value is None else _number(value, what)


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SimMapError(f"{what} must be a positive whole number, got {value!r}")
    return value
