"""Terrain heights around a robot's base by ray casts, as a ``sensor_msgs/PointCloud2``.

:class:`HeightScanner` samples a map's :class:`~leapp_ros.sim.sim_map.HeightScan`: a grid of
``rows`` x ``columns`` points centred under the base and turned with its heading (its yaw
only, as legged-robot policies sample terrain: pitch and roll do not tilt the grid). Row ``i``
lies ``(i - (rows - 1) / 2) * spacing[0]`` m ahead of the base (rows run from behind it to in
front), column ``j`` ``(j - (columns - 1) / 2) * spacing[1]`` m to its left. From each point,
``cast_from`` m above the base, a ray goes straight down (``mj_ray``) to the first geom that
is no part of the robot (the ray goes on through every geom of the base's kinematic tree,
into and out of each); the hit's height is the sample, NaN where the ray hits nothing (the
cloud is then not ``is_dense``). Geoms MuJoCo's ray casts skip (fully transparent ones) are
not terrain here either.

The cloud is organized, ``height`` = rows, ``width`` = columns, in row order: points of 16
bytes with ``x``, ``y``, ``z`` float32 (offsets 0, 4, 8; PCL's ``PointXYZ``). With
``relative_to: base`` ``x`` and ``y`` are the offsets in the heading frame and ``z`` the hit's
height less the base origin's (negative below the base; ``header.frame_id`` the base body's
name); with ``relative_to: world``, all three are world coordinates (``frame_id`` the
odometry's world frame). Samples of the state ``data`` holds after ``mj_forward``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from leapp_ros.messages import cdr
from leapp_ros.sim.sim_map import HeightScan, SimMapError

__all__ = ["HeightScanner", "check_scan_port"]

_POINT_STEP = 16
_FLOAT32 = 7  # sensor_msgs/PointField FLOAT32
_THROUGH_M = 1e-6  # how far past a robot geom's surface a ray goes on


class HeightScanner:
    """Samples ``scan`` around the body ``base`` of ``model`` (``mujoco`` the module);
    ``world_frame`` names the world in the messages."""

    def __init__(self, mujoco: Any, model: Any, scan: HeightScan, base: int, world_frame: str):
        self._mujoco, self._model = mujoco, model
        self.scan, self.base = scan, base
        root = model.body_rootid[base]
        self.robot_geoms = frozenset(
            int(g) for g in range(model.ngeom) if model.body_rootid[model.geom_bodyid[g]] == root
        )
        rows = (np.arange(scan.rows) - (scan.rows - 1) / 2) * scan.spacing[0]
        columns = (np.arange(scan.columns) - (scan.columns - 1) / 2) * scan.spacing[1]
        ahead, left = np.meshgrid(rows, columns, indexing="ij")
        self.offsets = np.stack([ahead, left], axis=-1)  # [rows, columns, 2], heading frame
        self.frame_id = model.body(base).name if scan.relative_to == "base" else world_frame
        self._geom = np.zeros(1, np.int32)

    def sample(self, data: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(xy, z)``: ``[rows, columns, 2]`` and ``[rows, columns]`` float64, as the cloud
        carries them (see the module documentation)."""
        origin = np.array(data.xpos[self.base])
        rotation = np.asarray(data.xmat[self.base]).reshape(3, 3)
        yaw = math.atan2(rotation[1, 0], rotation[0, 0])
        cos, sin = math.cos(yaw), math.sin(yaw)
        turn = np.array([[cos, -sin], [sin, cos]])
        world_xy = origin[:2] + self.offsets @ turn.T
        top = origin[2] + self.scan.cast_from
        z = np.array([[self._ground(data, x, y, top) for x, y in row] for row in world_xy])
        if self.scan.relative_to == "base":
            return self.offsets.copy(), z - origin[2]
        return world_xy, z

    def _ground(self, data: Any, x: float, y: float, top: float) -> float:
        """The height of the first geom under ``(x, y, top)`` that is not the robot's."""
        mujoco, model = self._mujoco, self._model
        point, down = np.array([x, y, top]), np.array([0.0, 0.0, -1.0])
        for _ in range(2 * len(self.robot_geoms) + 2):  # into and out of each robot geom
            distance = mujoco.mj_ray(model, data, point, down, None, 1, -1, self._geom)
            if distance < 0:
                return math.nan
            point[2] -= distance
            if int(self._geom[0]) not in self.robot_geoms:
                return float(point[2])
            point[2] -= _THROUGH_M
        return math.nan

    def message(self, data: Any, layout: cdr.Layout) -> Any:
        """The PointCloud2 (:mod:`~leapp_ros.messages.cdr` fields of ``layout``) of now;
        the caller sets its stamp."""
        xy, z = self.sample(data)
        points = np.zeros((self.scan.rows, self.scan.columns, _POINT_STEP // 4), "<f4")
        points[..., :2], points[..., 2] = xy, z
        message = cdr.defaults(layout)
        message.header.frame_id = self.frame_id
        message.height, message.width = self.scan.rows, self.scan.columns
        message.fields = [
            cdr.Fields(name=name, offset=4 * i, datatype=_FLOAT32, count=1)
            for i, name in enumerate("xyz")
        ]
        message.is_bigendian = False
        message.point_step, message.row_step = _POINT_STEP, _POINT_STEP * self.scan.columns
        message.data = points.view(np.uint8).reshape(-1)
        message.is_dense = bool(np.isfinite(z).all())
        return message


def check_scan_port(scan: HeightScan | None, topic: str, port: Any, where: str) -> None:
    """That the graph's PointCloud2 input ``topic`` (absolute; ``port`` its InputPlan) is
    the one ``scan`` feeds (``scan.topic`` resolved to it) and holds its grid.

    Raises:
        SimMapError: no scan, or a grid the port does not take.
    """
    if scan is None:
        raise SimMapError(f"{where}: graph input {topic} takes sensor_msgs/PointCloud2 height "
                          "samples: map a height_scan to it (height_scan: {topic: ..., grid: "
                          "[rows, columns], spacing: ...})")  # fmt: skip
    shape, layout = tuple(port.shape), port.binding.layout
    grid = (scan.rows, scan.columns)
    if layout.lstrip("N") == "HW":
        fits = shape[-2:] == grid
    else:
        fits = math.prod(shape) == math.prod(grid)
    if not fits:
        raise SimMapError(f"{where}: height_scan.grid {list(grid)} does not fill graph input "
                          f"{topic} of shape {list(shape)} (layout {layout}): give it "
                          f"{math.prod(shape)} samples, or the port's grid")  # fmt: skip
