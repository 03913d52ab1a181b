"""``sensor_msgs/PointCloud2`` height samples into one port's array, and an array into a cloud.

:class:`CloudCodec` reads the ``z`` field of every point (``float32``, or ``float64``; the
fields in any order, any ``point_step`` and ``row_step``, either byte order) as a strided NumPy
view of the cloud's bytes, and copies it once into the port: the points in cloud order (port
layout ``P`` or ``NP``: ``height`` × ``width`` must be the port's size, whatever the cloud's
organization), or an organized cloud's ``height`` × ``width`` grid (layout ``HW`` / ``NHW``:
both must be the port's). ``x`` and ``y`` are not read: the samples' places are the
publisher's, the port takes their heights in a fixed order. NaN heights (a non-dense cloud's
missing points) go into the array as they are, so the node's ``on_nonfinite`` decides (drop
the cloud, by default, or hand it on). A cloud of another size, without a ``z`` field, or
shorter than its steps say is a :class:`~leapp_ros.messages.multiarray.MessageError` naming
both sides.

:meth:`CloudCodec.encode` builds a cloud of ``x y z`` float32 points (16-byte points, the
``x``, ``y`` of a grid port its column and row unless given) holding a port's heights, for the
test harness and simulators.
"""

from __future__ import annotations

import array
from typing import Any

import numpy as np

from leapp_ros.messages.multiarray import MessageError, numpy_dtype
from leapp_ros.plan.bindings import Binding

__all__ = ["CloudCodec"]

_FLOATS = {7: "f4", 8: "f8"}  # sensor_msgs/PointField FLOAT32, FLOAT64
_POINT_STEP = 16  # x, y, z float32 and 4 bytes of padding, as PCL writes a PointXYZ


class CloudCodec:
    """Heights of one PointCloud2 port (see the module documentation).

    Args:
        binding: the port's binding (its layout).
        dtype, shape: the port's.
    """

    def __init__(self, binding: Binding, dtype: str, shape: tuple[int, ...]):
        self.binding = binding
        self.shape = tuple(shape)
        self.dtype = numpy_dtype(dtype)
        self.grid = binding.layout.lstrip("N") == "HW"
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self._grid_shape = self.shape[-2:] if self.grid else (1, self.size)

    def decode(self, message: Any) -> np.ndarray:
        """The port's heights in ``message`` (a PointCloud2, typed or read from CDR).

        Raises:
            MessageError: another number of points (or grid), no float ``z``, too few bytes.
        """
        height, width = message.height, message.width
        if self.grid and (height, width) != tuple(self._grid_shape):
            rows, columns = self._grid_shape
            raise MessageError(
                f"a PointCloud2 of {height}x{width} points (height x width) for a height grid "
                f"of {rows}x{columns}; publish an organized cloud of that grid"
            )
        if not self.grid and height * width != self.size:
            raise MessageError(
                f"a PointCloud2 of {height * width} points ({height}x{width}) for a port of "
                f"{self.size} heights; publish every sample, NaN where one is missing"
            )
        z = self._z(message)
        out = np.empty(self.shape, self.dtype)
        np.copyto(out.reshape(height, width), z, casting="unsafe")
        return out

    @staticmethod
    def _z(message: Any) -> np.ndarray:
        """The z of every point as a ``[height, width]`` view of the cloud's bytes."""
        field = next((f for f in message.fields if f.name == "z"), None)
        if field is None or field.datatype not in _FLOATS or field.count not in (0, 1):
            found = [f"{f.name} ({f.datatype})" for f in message.fields]
            raise MessageError(
                f"a PointCloud2 without a float32 or float64 field z (its fields: {found})"
            )
        code = _FLOATS[field.datatype]
        item = int(code[1])
        height, width = message.height, message.width
        point, row, data = message.point_step, message.row_step, message.data
        needed = row * (height - 1) + point * (width - 1) + field.offset + item
        if point < field.offset + item or row < point * width or len(data) < needed:
            raise MessageError(
                f"a PointCloud2 of {height}x{width} points with point_step {point}, row_step "
                f"{row} and z at byte {field.offset} needs {needed} bytes; it has {len(data)}"
            )
        order = ">" if message.is_bigendian else "<"
        return np.ndarray(
            (height, width),
            np.dtype(order + code),
            buffer=data,
            offset=field.offset,
            strides=(row, point),
        )

    def encode(self, value: Any, stamp: Any = None, xy: Any = None) -> Any:
        """An rclpy PointCloud2 holding the heights ``value`` (the port's shape), at the
        places ``xy`` (``[..., 2]``, the port's points; default: column and row)."""
        from sensor_msgs.msg import PointCloud2, PointField

        heights = np.asarray(value, np.float32)
        if heights.shape != self.shape:
            raise MessageError(f"expected shape {list(self.shape)}, got {list(heights.shape)}")
        rows, columns = self._grid_shape
        points = np.zeros((rows, columns, _POINT_STEP // 4), np.float32)
        if xy is None:
            points[..., 0], points[..., 1] = np.meshgrid(
                np.arange(columns, dtype=np.float32), np.arange(rows, dtype=np.float32)
            )
        else:
            points[..., :2] = np.asarray(xy, np.float32).reshape(rows, columns, 2)
        points[..., 2] = heights.reshape(rows, columns)
        fields = [
            PointField(name=name, offset=4 * i, datatype=PointField.FLOAT32, count=1)
            for i, name in enumerate("xyz")
        ]
        message = PointCloud2(
            height=rows,
            width=columns,
            fields=fields,
            is_bigendian=False,
            point_step=_POINT_STEP,
            row_step=_POINT_STEP * columns,
            is_dense=bool(np.isfinite(heights).all()),
        )
        message.data = array.array("B", points.astype("<f4").tobytes())
        if stamp is not None:
            message.header.stamp = stamp
        return message

    def __repr__(self) -> str:
        return f"CloudCodec({self.binding.describe()}, {self.dtype}, {list(self.shape)})"
