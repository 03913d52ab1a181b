"""The frame a simulated ``sensor_msgs/Imu`` describes: a body's or a site's of a MuJoCo model.

REP 145 (and the message's own definition) make an Imu's three fields readings *of its frame*
(``header.frame_id``): the orientation of that frame in the world, the angular velocity in
that frame, and what an accelerometer there reads, also in that frame (gravity included: 1 g
up at rest, 0 in free fall). :class:`ImuFrame` reads them as MuJoCo's own ``framequat``,
``gyro`` and ``accelerometer`` sensors at that frame would: a body's frame is ``xpos`` /
``xquat`` (MuJoCo's object type ``mjOBJ_XBODY``), not the frame of its principal axes of
inertia (``mjOBJ_BODY``, at ``xipos`` / ``ximat``), which for most real robots is rotated from
it; the acceleration comes from ``mj_rnePostConstraint`` and ``mj_objectAcceleration``. The
readings are of the state ``data`` holds after ``mj_forward``.

A ``nav_msgs/Odometry`` reads the same frame of a body (:func:`fill_odometry`): its pose in
the world, and its twist in its own frame as REP 105 asks (``child_frame_id``): the linear
velocity of the frame's origin and the angular velocity, as MuJoCo's ``velocimeter`` and
``gyro`` sensors there read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ImuFrame", "fill_odometry"]


@dataclass(frozen=True)
class ImuFrame:
    """The body or site ``name`` (``site``: True for a site) with MuJoCo id ``id``."""

    mujoco: Any
    name: str
    id: int
    site: bool

    @property
    def object_type(self) -> Any:
        kinds = self.mujoco.mjtObj
        return kinds.mjOBJ_SITE if self.site else kinds.mjOBJ_XBODY

    def orientation(self, data: Any) -> np.ndarray:
        """The frame's orientation in the world as ``(w, x, y, z)``."""
        if not self.site:
            return np.array(data.xquat[self.id])
        quat = np.zeros(4)
        self.mujoco.mju_mat2Quat(quat, data.site_xmat[self.id])
        return quat

    def position(self, data: Any) -> np.ndarray:
        """The frame's origin in the world (m)."""
        return np.array(data.site_xpos[self.id] if self.site else data.xpos[self.id])

    def velocity(self, model: Any, data: Any) -> np.ndarray:
        """``(angular, linear)`` velocity of the frame (rad/s, m/s of its origin), in the
        frame."""
        velocity = np.zeros(6)
        self.mujoco.mj_objectVelocity(model, data, self.object_type, self.id, velocity, 1)
        return velocity

    def angular_velocity(self, model: Any, data: Any) -> np.ndarray:
        """The frame's angular velocity in the frame (rad/s), as a gyro there reads it."""
        velocity = np.zeros(6)
        self.mujoco.mj_objectVelocity(model, data, self.object_type, self.id, velocity, 1)
        return velocity[:3]

    def linear_acceleration(self, model: Any, data: Any) -> np.ndarray:
        """What an accelerometer at the frame's origin reads, in the frame (m/s^2): the
        origin's acceleration less gravity. Computes ``data.cacc`` first."""
        self.mujoco.mj_rnePostConstraint(model, data)
        acceleration = np.zeros(6)
        self.mujoco.mj_objectAcceleration(model, data, self.object_type, self.id, acceleration, 1)
        return acceleration[3:]


def fill_odometry(message: Any, frame: ImuFrame, model: Any, data: Any, world: str) -> None:
    """Set ``message`` (an Odometry: :mod:`~leapp_ros.messages.cdr` defaults or rclpy's) to
    ``frame``'s pose in ``world`` and its twist in its own frame; covariances stay 0."""
    message.header.frame_id, message.child_frame_id = world, frame.name
    pose, twist = message.pose.pose, message.twist.twist
    p = pose.position
    p.x, p.y, p.z = (float(value) for value in frame.position(data))
    q = pose.orientation
    q.w, q.x, q.y, q.z = (float(value) for value in frame.orientation(data))
    angular, linear = np.split(frame.velocity(model, data), 2)
    twist.linear.x, twist.linear.y, twist.linear.z = (float(value) for value in linear)
    twist.angular.x, twist.angular.y, twist.angular.z = (float(value) for value in angular)
