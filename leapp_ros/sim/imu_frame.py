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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ImuFrame"]


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
