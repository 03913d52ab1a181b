"""Which standard robot message carries a port, chosen from what the port means.

A port whose spec entry has a ``kind`` (and ``element_names``), as LEAPP's ``TensorSemantics``
writes them, travels in the message a robot already speaks instead of a ``std_msgs``
MultiArray:

======================================  ===============================================
inputs (kind)                           message (topic ``<node>/<stem>``), fields
======================================  ===============================================
``state/joint/position|velocity|effort``  ``sensor_msgs/JointState`` (``joint_states``),
                                        picked and reordered by joint name
``state/body/angular_velocity``         ``sensor_msgs/Imu`` (``imu``) ``angular_velocity``
``state/body/linear_acceleration``      ``sensor_msgs/Imu`` ``linear_acceleration``
``state/body/rotation``                 ``sensor_msgs/Imu`` ``orientation`` (4 elements)
``command/body/velocity``               ``geometry_msgs/Twist`` (``cmd_vel``), or TwistStamped
``state/body/pose`` / ``position``      ``geometry_msgs/PoseStamped`` (``pose``)
``command/body/pose``                   ``geometry_msgs/PoseStamped`` (``goal_pose``)
``state/body/linear_velocity``          ``nav_msgs/Odometry`` (``odom``) ``twist.twist.linear``
``state/body/velocity``                 ``nav_msgs/Odometry`` ``twist.twist`` (6 elements)
``state/camera/image``                  ``sensor_msgs/Image`` (``<port>``): rgb8, bgr8,
                                        rgba8, bgra8 or mono8
``state/camera/depth``                  ``sensor_msgs/Image`` (``<port>``): 32FC1, 16UC1
``state/terrain/height``                ``sensor_msgs/PointCloud2`` (``<port>``) z of its
                                        points, or a 32FC1 ``Image`` elevation grid
======================================  ===============================================

An Odometry also carries ``state/body/angular_velocity`` (``twist.twist.angular``),
``position``, ``rotation`` and ``pose`` (``pose.pose``) for ports whose ``ports.<port>.message``
asks for it (REP 105: the twist is in the body frame, ``child_frame_id``). Images and clouds
have one topic per port (``<node>/<port>``); how their pixels or points fill the port is
:mod:`leapp_ros.plan.sensor_layout`'s (``layout`` and channel names in ``elements``), with
``scale`` for integer pixels in a float port.

Outputs of kind ``target/joint/*`` go out as ``std_msgs/Float64MultiArray`` in the order of the
joints a ros2_control forward command controller lists (``order``; default: the port's own
names), or as ``sensor_msgs/JointState`` / ``trajectory_msgs/JointTrajectory`` with the joint
names; ``kp`` and ``kd`` as ``Float64MultiArray`` in the same kind of order. Every input of
one node that comes from one message type shares one topic, so one subscription and one decode
feed them all (a JointState feeding position and velocity ports).

A :class:`PortOverride` (from the node's ``ports.<port>.*`` parameters) sets what an export
lacks or changes the choice: ``kind``, ``names`` (element names of the last axis),
``message`` (a type from :data:`MESSAGES`, or ``multiarray`` to keep the std_msgs array),
``layout`` and ``scale`` (images) and, for outputs, ``order``
(:mod:`leapp_ros.plan.port_override`). Without an override a port that does not fit its kind's
message (no joint names, another number of elements) keeps its MultiArray, and the note of
:func:`bind_port` says why; an override that does not fit is a :class:`BindingError`.

Which fields of a body message carry a port (quaternion order, velocity names) is
:mod:`leapp_ros.plan.body_fields`'s. Pure data, no rclpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from leapp.errors import LeappError
from leapp_ros.plan.body_fields import (
    UnfitFieldsError,
    check_count,
    odometry_fields,
    pose_fields,
    quaternion_axes,
    twist_fields,
)
from leapp_ros.plan.port_override import PortOverride
from leapp_ros.plan.sensor_layout import (
    CAMERA_DEPTH,
    CAMERA_IMAGE,
    TERRAIN_HEIGHT,
    UnfitLayoutError,
    accepted_encodings,
    cloud_layout,
    default_scale,
    image_layout,
)

__all__ = [
    "IMAGE",
    "JOINT_STATE",
    "MESSAGES",
    "MULTIARRAY",
    "ODOMETRY",
    "POINT_CLOUD2",
    "Binding",
    "BindingError",
    "PortOverride",
    "bind_port",
    "normalize_message",
]

JOINT_STATE = "sensor_msgs/msg/JointState"
IMU = "sensor_msgs/msg/Imu"
TWIST = "geometry_msgs/msg/Twist"
TWIST_STAMPED = "geometry_msgs/msg/TwistStamped"
POSE_STAMPED = "geometry_msgs/msg/PoseStamped"
FLOAT64_ARRAY = "std_msgs/msg/Float64MultiArray"
JOINT_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
ODOMETRY = "nav_msgs/msg/Odometry"
IMAGE = "sensor_msgs/msg/Image"
POINT_CLOUD2 = "sensor_msgs/msg/PointCloud2"
MULTIARRAY = "multiarray"  # the override that keeps the dtype's std_msgs MultiArray

#: every message type a port can be bound to, by direction
MESSAGES = {
    "input": (JOINT_STATE, IMU, TWIST, TWIST_STAMPED, POSE_STAMPED, ODOMETRY, IMAGE, POINT_CLOUD2),
    "output": (FLOAT64_ARRAY, JOINT_STATE, JOINT_TRAJECTORY),
}
_TEMPORAL = "__temporal_axis__"


class BindingError(LeappError):
    """A port override asks for a message that cannot carry the port."""


@dataclass(frozen=True)
class Binding:
    """How one port travels in a standard message.

    ``elements`` are, in the port's element order (its last axis), the joint names
    (JointState, JointTrajectory, Float64MultiArray of joint targets), the message fields as
    attribute paths (``angular_velocity.x``), or an image's channels (``r``, ``g``, ``b``,
    ``a``, ``mono``, ``depth``, ``height``). ``field`` is the JointState / trajectory point
    field (``position``, ``velocity``, ``effort``). ``order`` is the joint order on the wire
    (outputs). ``stem`` names the input topic ``<node>/<stem>``. ``layout`` is an Image or
    PointCloud2 port's axes (:mod:`leapp_ros.plan.sensor_layout`), ``scale`` what an integer
    pixel is multiplied by in a float port.
    """

    message_type: str
    kind: str
    elements: tuple[str, ...]
    field: str = ""
    order: tuple[str, ...] = ()
    stem: str = ""
    period_s: float = 0.0  # JointTrajectory: time between points (0: one point)
    layout: str = ""
    scale: float = 1.0

    def describe(self) -> str:
        """One line for ``leapp-ros inspect``: kind, fields or names, order, layout."""
        if self.layout:
            text = f"{self.kind}: {self.layout} [{', '.join(self.elements)}]"
            return text + (f" x {self.scale:g}" if self.scale != 1.0 else "")
        what = f"{self.field} of " if self.field else ""
        elements = ", ".join(self.elements)
        text = f"{self.kind}: {what}[{elements}]"
        if self.order and self.order != self.elements:
            text += f" sent in order [{', '.join(self.order)}]"
        return text


def normalize_message(text: str) -> str:
    """``sensor_msgs/JointState`` or ``sensor_msgs/msg/JointState`` -> the latter;
    ``multiarray`` and ``""`` as they are."""
    text = text.strip()
    if not text or text.lower() == MULTIARRAY:
        return text.lower()
    parts = [part for part in text.split("/") if part]
    if len(parts) == 2:
        parts.insert(1, "msg")
    return "/".join(parts)


def bind_port(
    direction: str,
    kind: str | None,
    shape: tuple[int, ...],
    element_names: tuple[object, ...] | None,
    override: PortOverride | None = None,
    *,
    where: str = "port",
    temporal_period_ms: float | None = None,
    dtype: str = "float32",
) -> tuple[Binding | None, str]:
    """The binding of a port (None: its std_msgs MultiArray) and a note on the choice.

    Args:
        direction: ``input`` (an external input) or ``output``.
        kind, shape, element_names, temporal_period_ms, dtype: the port's spec entry.
        override: the node's ``ports.<port>.*`` parameters.
        where: the port in words for errors (``node 'policy' input 'q'``).

    Raises:
        BindingError: the override names an unknown message, or one that cannot carry the
            port (the message says why and what to set).
    """
    override = override or PortOverride()
    kind = override.kind or kind or ""
    names = override.names or _last_names(element_names, shape)
    message = normalize_message(override.message)
    if message == MULTIARRAY:
        return None, "std_msgs MultiArray (ports.<port>.message: multiarray)"
    if message and message not in MESSAGES[direction]:
        raise BindingError(
            f"{where}: ports.<port>.message is {override.message!r}; an {direction} can be "
            f"{', '.join(MESSAGES[direction])} or 'multiarray'"
        )
    try:
        if kind in _SENSOR_KINDS and direction == "input":
            port = (kind, tuple(shape), dtype, tuple(element_names or ()))
            binding = _choose_sensor(*port, message, override)
        elif override.layout or override.scale is not None:
            raise _UnfitError("ports.<port>.layout and scale apply to image and height inputs")
        else:
            choose = _choose_input if direction == "input" else _choose_output
            binding = choose(
                kind, tuple(shape), names, message, override.order, temporal_period_ms
            )
    except (_UnfitError, UnfitFieldsError, UnfitLayoutError) as e:
        if message or override.given:
            raise BindingError(f"{where}: {e}") from None
        return None, f"std_msgs MultiArray: {e}"
    if binding is None:
        if message:
            raise BindingError(
                f"{where}: ports.<port>.message is {message} but the port's kind is "
                f"{kind or 'not set'}; set ports.<port>.kind to one this message carries "
                "(see the docs' how-to on robot messages)"
            )
        reason = f" (kind {kind} has no robot message)" if kind else ""
        return None, "std_msgs MultiArray" + reason
    return binding, f"{binding.message_type} ({binding.describe()})"


class _UnfitError(Exception):
    """The port does not fit the message its kind would choose."""


def _last_names(element_names: tuple[object, ...] | None, shape: tuple[int, ...]) -> tuple:
    """The names of the last axis (element_names aligns from the end), or ()."""
    if not element_names or not shape:
        return ()
    last = element_names[-1]
    if isinstance(last, (list, tuple)) and all(isinstance(name, str) for name in last):
        return tuple(last)
    return ()


def _choose_input(kind, shape, names, message, order, period_ms) -> Binding | None:
    if order:
        raise _UnfitError("ports.<port>.order applies to outputs only")
    if kind.startswith("state/joint/") and kind.rsplit("/", 1)[1] in _JOINT_FIELDS:
        _check_message(message, JOINT_STATE, kind)
        joints = _joint_names(kind, shape, names, leading_one=True)
        field = _JOINT_FIELDS[kind.rsplit("/", 1)[1]]
        return Binding(JOINT_STATE, kind, joints, field=field, stem="joint_states")
    if message == ODOMETRY or (not message and kind in _ODOMETRY_KINDS):
        return _odometry(kind, shape, names)
    if kind in _IMU_FIELDS:
        _check_message(message, IMU, kind)
        base, count = _IMU_FIELDS[kind]
        axes = quaternion_axes(names) if count == 4 else ("x", "y", "z")
        check_count(kind, shape, count, IMU)
        return Binding(IMU, kind, tuple(f"{base}.{axis}" for axis in axes), stem="imu")
    if kind == "command/body/velocity":
        _check_message(message, (TWIST, TWIST_STAMPED), kind)
        fields = twist_fields(kind, shape, names)
        if message == TWIST_STAMPED:
            stamped = tuple(f"twist.{field}" for field in fields)
            return Binding(TWIST_STAMPED, kind, stamped, stem="cmd_vel")
        return Binding(TWIST, kind, fields, stem="cmd_vel")
    if kind in _POSE_KINDS:
        _check_message(message, POSE_STAMPED, kind)
        fields = pose_fields(kind, shape, names, POSE_STAMPED)
        stem = "goal_pose" if kind.startswith("command/") else "pose"
        return Binding(POSE_STAMPED, kind, tuple(f"pose.{f}" for f in fields), stem=stem)
    return None


def _odometry(kind: str, shape: tuple[int, ...], names: tuple) -> Binding | None:
    fields = odometry_fields(kind, shape, names)
    return None if fields is None else Binding(ODOMETRY, kind, fields, stem="odom")


def _choose_sensor(
    kind: str,
    shape: tuple[int, ...],
    dtype: str,
    element_names: tuple,
    message: str,
    override: PortOverride,
) -> Binding:
    """An Image or PointCloud2 binding; its topic is the port's own (no ``stem``)."""
    if kind == TERRAIN_HEIGHT and message != IMAGE:
        _check_message(message, POINT_CLOUD2, kind)
        if override.scale is not None or override.names:
            raise _UnfitError("ports.<port>.scale and names apply to images, not PointCloud2")
        if not dtype.startswith("float"):
            raise _UnfitError(f"heights from a PointCloud2 go into a float port, not {dtype}")
        return Binding(POINT_CLOUD2, kind, ("z",), layout=cloud_layout(shape, override.layout))
    _check_message(message, IMAGE, kind)
    layout, channels = image_layout(
        kind, shape, dtype, element_names, channels=override.names, layout=override.layout
    )
    encodings = accepted_encodings(kind, channels, dtype)
    integer = [name for name in encodings if name != "32FC1"]
    scale = default_scale(kind, dtype) if integer else 1.0
    if override.scale is not None:
        if not integer or not dtype.startswith("float"):
            raise _UnfitError(
                f"ports.<port>.scale applies to a float port taking integer pixels; this "
                f"{dtype} port takes {', '.join(encodings)} as they are"
            )
        scale = override.scale
    return Binding(IMAGE, kind, channels, layout=layout, scale=scale)


def _choose_output(kind, shape, names, message, order, period_ms) -> Binding | None:
    joint_target = kind.startswith("target/joint/") and (
        kind.rsplit("/", 1)[1].split("_")[0] in _JOINT_TARGETS
    )
    if not joint_target and kind not in ("kp", "kd"):
        if order:
            raise _UnfitError(f"ports.<port>.order needs joint targets, kp or kd, not {kind!r}")
        return None
    message = message or FLOAT64_ARRAY
    joints = _joint_names(kind, shape, names, leading_one=message == JOINT_STATE)
    order = _wire_order(kind, joints, order)
    field = ""
    if message != FLOAT64_ARRAY:
        if not joint_target:
            raise _UnfitError(f"kind {kind!r} goes out as {FLOAT64_ARRAY} only")
        quantity = kind.rsplit("/", 1)[1].split("_")[0]
        field = {"position": "position", "velocity": "velocity"}.get(quantity, "effort")
        if message == JOINT_TRAJECTORY:
            field = {"position": "positions", "velocity": "velocities"}.get(field, "effort")
    rows = math.prod(shape[:-1])
    period = (period_ms or 0.0) / 1e3 if rows > 1 else 0.0
    return Binding(message, kind, joints, field=field, order=order, period_s=period)


_JOINT_FIELDS = {"position": "position", "velocity": "velocity", "effort": "effort"}
_JOINT_TARGETS = ("position", "velocity", "effort", "torques")  # target/joint/<these>[_...]
_IMU_FIELDS = {
    "state/body/angular_velocity": ("angular_velocity", 3),
    "state/body/linear_acceleration": ("linear_acceleration", 3),
    "state/body/rotation": ("orientation", 4),
}
_POSE_KINDS = ("state/body/pose", "state/body/position", "command/body/pose")
_ODOMETRY_KINDS = ("state/body/linear_velocity", "state/body/velocity")  # Odometry by default
_SENSOR_KINDS = (CAMERA_IMAGE, CAMERA_DEPTH, TERRAIN_HEIGHT)


def _check_message(asked: str, fits: str | tuple[str, ...], kind: str) -> None:
    fits = (fits,) if isinstance(fits, str) else fits
    if asked and asked not in fits:
        raise _UnfitError(f"kind {kind!r} comes in {' or '.join(fits)}, not {asked}")


def _joint_names(kind: str, shape: tuple[int, ...], names: tuple, *, leading_one: bool) -> tuple:
    if not names:
        raise _UnfitError(
            f"kind {kind!r} needs the joint names of the last axis (element_names in the "
            "spec, or the parameter ports.<port>.names)"
        )
    if not shape or shape[-1] != len(names):
        raise _UnfitError(f"{len(names)} joint names for a port of shape {list(shape)}")
    if len(set(names)) != len(names):
        raise _UnfitError(f"joint names {list(names)} repeat a name")
    if leading_one and math.prod(shape) != len(names):
        raise _UnfitError(f"one value per joint is needed, the port's shape is {list(shape)}")
    return tuple(names)


def _wire_order(kind: str, joints: tuple, order: tuple) -> tuple:
    if not order:
        return joints
    missing = [name for name in joints if name not in order]
    unknown = [name for name in order if name not in joints]
    if missing or unknown or len(set(order)) != len(order):
        raise _UnfitError(
            f"ports.<port>.order {list(order)} must list each joint of the port once "
            f"{list(joints)} (missing {missing}, unknown {unknown})"
        )
    return tuple(order)
