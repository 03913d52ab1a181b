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
======================================  ===============================================

Outputs of kind ``target/joint/*`` go out as ``std_msgs/Float64MultiArray`` in the order of the
joints a ros2_control forward command controller lists (``order``; default: the port's own
names), or as ``sensor_msgs/JointState`` / ``trajectory_msgs/JointTrajectory`` with the joint
names; ``kp`` and ``kd`` as ``Float64MultiArray`` in the same kind of order. Every input of
one node that comes from one message type shares one topic, so one subscription and one decode
feed them all (a JointState feeding position and velocity ports).

A :class:`PortOverride` (from the node's ``ports.<port>.*`` parameters) sets what an export
lacks or changes the choice: ``kind``, ``names`` (element names of the last axis),
``message`` (a type from :data:`MESSAGES`, or ``multiarray`` to keep the std_msgs array) and,
for outputs, ``order``. Without an override a port that does not fit its kind's message (no
joint names, another number of elements) keeps its MultiArray, and :attr:`Binding.note` /
:func:`bind_port`'s note says why; an override that does not fit is a :class:`BindingError`.

Quaternions are ``(w, x, y, z)`` (Isaac Lab's order) unless the port's names say otherwise
(any order of ``x y z w``, also ``qx qy qz qw``); a pose is position then quaternion. A
3-element body velocity command is ``(linear.x, linear.y, angular.z)``, 6 elements are
``linear.xyz, angular.xyz``; names such as ``lin_vel_x``, ``vx``, ``ang_vel_z`` or ``yaw_rate``
say otherwise. Pure data, no rclpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from leapp.errors import LeappError

__all__ = [
    "JOINT_STATE",
    "MESSAGES",
    "MULTIARRAY",
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
MULTIARRAY = "multiarray"  # the override that keeps the dtype's std_msgs MultiArray

#: every message type a port can be bound to, by direction
MESSAGES = {
    "input": (JOINT_STATE, IMU, TWIST, TWIST_STAMPED, POSE_STAMPED),
    "output": (FLOAT64_ARRAY, JOINT_STATE, JOINT_TRAJECTORY),
}
_TEMPORAL = "__temporal_axis__"


class BindingError(LeappError):
    """A port override asks for a message that cannot carry the port."""


@dataclass(frozen=True)
class PortOverride:
    """What the node parameters ``ports.<port>.*`` say about one port (empty: the spec's)."""

    message: str = ""
    kind: str = ""
    names: tuple[str, ...] = ()
    order: tuple[str, ...] = ()


@dataclass(frozen=True)
class Binding:
    """How one port travels in a standard message.

    ``elements`` are, in the port's element order (its last axis), the joint names
    (JointState, JointTrajectory, Float64MultiArray of joint targets) or the message fields as
    attribute paths (``angular_velocity.x``). ``field`` is the JointState / trajectory point
    field (``position``, ``velocity``, ``effort``). ``order`` is the joint order on the wire
    (outputs). ``stem`` names the shared input topic ``<node>/<stem>``.
    """

    message_type: str
    kind: str
    elements: tuple[str, ...]
    field: str = ""
    order: tuple[str, ...] = ()
    stem: str = ""
    period_s: float = 0.0  # JointTrajectory: time between points (0: one point)

    def describe(self) -> str:
        """One line for ``leapp-ros inspect``: kind, fields or names, order."""
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
) -> tuple[Binding | None, str]:
    """The binding of a port (None: its std_msgs MultiArray) and a note on the choice.

    Args:
        direction: ``input`` (an external input) or ``output``.
        kind, shape, element_names, temporal_period_ms: the port's spec entry.
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
        choose = _choose_input if direction == "input" else _choose_output
        binding = choose(kind, tuple(shape), names, message, override.order, temporal_period_ms)
    except _UnfitError as e:
        if message or override.kind or override.names or override.order:
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
    if kind in _IMU_FIELDS:
        _check_message(message, IMU, kind)
        base, count = _IMU_FIELDS[kind]
        axes = _quaternion_axes(names) if count == 4 else ("x", "y", "z")
        _check_count(kind, shape, count, IMU)
        return Binding(IMU, kind, tuple(f"{base}.{axis}" for axis in axes), stem="imu")
    if kind == "command/body/velocity":
        _check_message(message, (TWIST, TWIST_STAMPED), kind)
        fields = _twist_fields(kind, shape, names)
        if message == TWIST_STAMPED:
            stamped = tuple(f"twist.{field}" for field in fields)
            return Binding(TWIST_STAMPED, kind, stamped, stem="cmd_vel")
        return Binding(TWIST, kind, fields, stem="cmd_vel")
    if kind in _POSE_KINDS:
        _check_message(message, POSE_STAMPED, kind)
        fields = _pose_fields(kind, shape, names)
        stem = "goal_pose" if kind.startswith("command/") else "pose"
        return Binding(POSE_STAMPED, kind, tuple(f"pose.{f}" for f in fields), stem=stem)
    return None


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


def _check_message(asked: str, fits: str | tuple[str, ...], kind: str) -> None:
    fits = (fits,) if isinstance(fits, str) else fits
    if asked and asked not in fits:
        raise _UnfitError(f"kind {kind!r} comes in {' or '.join(fits)}, not {asked}")


def _check_count(kind: str, shape: tuple[int, ...], count: int, message: str) -> None:
    if not shape or shape[-1] != count or math.prod(shape) != count:
        raise _UnfitError(
            f"kind {kind!r} in {message} has {count} elements, the port's shape is {list(shape)}"
        )


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


def _quaternion_axes(names: tuple) -> tuple[str, ...]:
    plain = tuple(str(name).lower().removeprefix("q") for name in names)
    if names and sorted(plain) == ["w", "x", "y", "z"]:
        return plain
    return ("w", "x", "y", "z")


_TWIST_NAMES = {
    "linear.x": ("lin_vel_x", "vx", "linear_x", "x"),
    "linear.y": ("lin_vel_y", "vy", "linear_y", "y"),
    "linear.z": ("lin_vel_z", "vz", "linear_z", "z"),
    "angular.x": ("ang_vel_x", "wx", "angular_x", "roll_rate"),
    "angular.y": ("ang_vel_y", "wy", "angular_y", "pitch_rate"),
    "angular.z": ("ang_vel_z", "wz", "angular_z", "yaw_rate", "yaw"),
}
_TWIST_ALIASES = {alias: field for field, aliases in _TWIST_NAMES.items() for alias in aliases}
_TWIST_ALIASES.update({field: field for field in _TWIST_NAMES})


def _twist_fields(kind: str, shape: tuple[int, ...], names: tuple) -> tuple[str, ...]:
    count = math.prod(shape) if shape else 1
    if names:
        fields = tuple(_TWIST_ALIASES.get(str(name).lower(), "") for name in names)
        if all(fields) and len(set(fields)) == len(fields) and len(fields) == count:
            return fields
        raise _UnfitError(f"names {list(names)} are not Twist fields (e.g. lin_vel_x, ang_vel_z)")
    if count == 3:
        return ("linear.x", "linear.y", "angular.z")
    if count == 6:
        return tuple(_TWIST_NAMES)
    raise _UnfitError(
        f"kind {kind!r} with {count} elements needs names such as lin_vel_x, ang_vel_z "
        "(3 elements are vx, vy, yaw rate; 6 are linear then angular)"
    )


def _pose_fields(kind: str, shape: tuple[int, ...], names: tuple) -> tuple[str, ...]:
    position = ("position.x", "position.y", "position.z")
    if kind == "state/body/position":
        _check_count(kind, shape, 3, POSE_STAMPED)
        return position
    _check_count(kind, shape, 7, POSE_STAMPED)
    axes = _quaternion_axes(names[3:]) if len(names) == 7 else ("w", "x", "y", "z")
    return position + tuple(f"orientation.{axis}" for axis in axes)
