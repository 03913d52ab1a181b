"""Which fields of a body message (``Imu``, ``Twist``, ``PoseStamped``, ``nav_msgs/Odometry``)
carry a body port's elements, as attribute paths (``twist.twist.linear.x``).

Quaternions are ``(w, x, y, z)`` (Isaac Lab's order) unless the port's names say otherwise
(any order of ``x y z w``, also ``qx qy qz qw``); a pose is position then quaternion. A
3-element body velocity is ``(linear.x, linear.y, angular.z)``, 6 elements are
``linear.xyz, angular.xyz``; names such as ``lin_vel_x``, ``vx``, ``ang_vel_z`` or ``yaw_rate``
say otherwise. An Odometry's twist is in its ``child_frame_id``, the body frame (REP 105), as
the policies' base velocities are; its pose is in ``header.frame_id`` (``odom``). A port that
does not fit is an :class:`UnfitFieldsError` saying why. Pure data.
"""

from __future__ import annotations

import math

__all__ = [
    "UnfitFieldsError",
    "check_count",
    "odometry_fields",
    "pose_fields",
    "quaternion_axes",
    "twist_fields",
]

_ODOMETRY = "nav_msgs/msg/Odometry"
_ODOMETRY_FIELDS = {
    "state/body/linear_velocity": ("twist.twist.linear", 3),
    "state/body/angular_velocity": ("twist.twist.angular", 3),
    "state/body/position": ("pose.pose.position", 3),
    "state/body/rotation": ("pose.pose.orientation", 4),
}
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


class UnfitFieldsError(ValueError):
    """The port does not fit the body message its kind would choose."""


def check_count(kind: str, shape: tuple[int, ...], count: int, message: str) -> None:
    """A port of ``count`` elements (any leading axes of 1), else UnfitFieldsError."""
    if not shape or shape[-1] != count or math.prod(shape) != count:
        raise UnfitFieldsError(
            f"kind {kind!r} in {message} has {count} elements, the port's shape is {list(shape)}"
        )


def quaternion_axes(names: tuple) -> tuple[str, ...]:
    """The quaternion's axes in the port's order: its names', else ``w x y z``."""
    plain = tuple(str(name).lower().removeprefix("q") for name in names)
    if names and sorted(plain) == ["w", "x", "y", "z"]:
        return plain
    return ("w", "x", "y", "z")


def twist_fields(kind: str, shape: tuple[int, ...], names: tuple) -> tuple[str, ...]:
    """A velocity port's Twist fields (``linear.x``...), from its names or element count."""
    count = math.prod(shape) if shape else 1
    if names:
        fields = tuple(_TWIST_ALIASES.get(str(name).lower(), "") for name in names)
        if all(fields) and len(set(fields)) == len(fields) and len(fields) == count:
            return fields
        raise UnfitFieldsError(
            f"names {list(names)} are not Twist fields (e.g. lin_vel_x, ang_vel_z)"
        )
    if count == 3:
        return ("linear.x", "linear.y", "angular.z")
    if count == 6:
        return tuple(_TWIST_NAMES)
    raise UnfitFieldsError(
        f"kind {kind!r} with {count} elements needs names such as lin_vel_x, ang_vel_z "
        "(3 elements are vx, vy, yaw rate; 6 are linear then angular)"
    )


def pose_fields(kind: str, shape: tuple[int, ...], names: tuple, message: str) -> tuple[str, ...]:
    """A position (3) or pose (7) port's Pose fields (``position.x``...)."""
    position = ("position.x", "position.y", "position.z")
    if kind == "state/body/position":
        check_count(kind, shape, 3, message)
        return position
    check_count(kind, shape, 7, message)
    axes = quaternion_axes(names[3:]) if len(names) == 7 else ("w", "x", "y", "z")
    return position + tuple(f"orientation.{axis}" for axis in axes)


def odometry_fields(kind: str, shape: tuple[int, ...], names: tuple) -> tuple[str, ...] | None:
    """The Odometry fields of a body port (None: its kind has none): linear and angular
    velocity and a 6-element ``state/body/velocity`` from ``twist.twist``; position, rotation
    and a 7-element ``state/body/pose`` from ``pose.pose``."""
    if kind == "state/body/velocity":
        return tuple(f"twist.twist.{field}" for field in twist_fields(kind, shape, names))
    if kind == "state/body/pose":
        return tuple(f"pose.pose.{f}" for f in pose_fields(kind, shape, names, _ODOMETRY))
    if kind not in _ODOMETRY_FIELDS:
        return None
    base, count = _ODOMETRY_FIELDS[kind]
    check_count(kind, shape, count, _ODOMETRY)
    axes = quaternion_axes(names) if count == 4 else ("x", "y", "z")
    return tuple(f"{base}.{axis}" for axis in axes)
