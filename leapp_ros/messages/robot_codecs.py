"""Standard robot messages to NumPy arrays and back, for ports with a :class:`Binding`.

:class:`InputDecoder` turns one message (``sensor_msgs/JointState``, ``Imu``,
``geometry_msgs/Twist``, ``TwistStamped``, ``PoseStamped``, ``nav_msgs/Odometry``) into one
array per port that the message feeds, in one pass; an ``Image`` or ``PointCloud2`` feeds one
port, through :class:`~leapp_ros.messages.image_codec.ImageCodec` or
:class:`~leapp_ros.messages.cloud_codec.CloudCodec`. A JointState's fields are picked and
reordered by joint name to each port's names (names the port lacks are ignored; a name the
port needs and the message lacks, a field with another number of values than names, repeated
names are :class:`~leapp_ros.messages.multiarray.MessageError`\\ s); fixed messages are read
field by field.
:class:`OutputEncoder` writes an output array as ``std_msgs/Float64MultiArray`` (its last axis
reordered to the wire order), ``sensor_msgs/JointState`` or ``trajectory_msgs/JointTrajectory``
(one point per row, ``period_s`` apart), and reads such a message back into the port's order
(a consuming node, a test). Both also go the other way (:meth:`InputDecoder.encode`,
:meth:`OutputEncoder.decode`) for tests and probes. NumPy only; message classes are imported
when a codec is built.
"""

from __future__ import annotations

import array
import functools
import importlib
import operator
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from leapp_ros.messages import cdr
from leapp_ros.messages.cloud_codec import CloudCodec
from leapp_ros.messages.image_codec import ImageCodec
from leapp_ros.messages.multiarray import MessageError, numpy_dtype
from leapp_ros.plan.bindings import FLOAT64_ARRAY, IMAGE, JOINT_STATE, POINT_CLOUD2, Binding

__all__ = ["InputDecoder", "OutputEncoder", "message_class"]

_STAMP = struct.Struct("<iI")  # builtin_interfaces/Time in little-endian CDR


def message_class(message_type: str) -> Any:
    """The rclpy class of ``pkg/msg/Name``; MessageError saying what to install if missing."""
    package, _, name = message_type.split("/")
    try:
        return getattr(importlib.import_module(f"{package}.msg"), name)
    except (ImportError, AttributeError) as e:
        wheel = "ros-" + package.replace("_", "-")
        raise MessageError(
            f"message type {message_type} is not installed ({e}); install the ROS 2 package "
            f"{package} (apt: ros-<distro>-{package.replace('_', '-')}; with ROS 2 from pip: "
            f"pip install {wheel})"
        ) from e


class _JointOrder:
    """Index arrays picking each port's joints out of a message's name list (cached: robots
    send the same names every time)."""

    def __init__(self, joints: Sequence[tuple[str, ...]]):
        self._joints = list(joints)
        self._seen: list[str] | None = None
        self._picks: list[np.ndarray] = []

    def picks(self, names: Sequence[str], what: str) -> list[np.ndarray]:
        if names == self._seen:
            return self._picks
        index = {name: i for i, name in enumerate(names)}
        if len(index) != len(names):
            raise MessageError(f"{what} repeats joint names: {list(names)}")
        picks = []
        for joints in self._joints:
            missing = [joint for joint in joints if joint not in index]
            if missing:
                raise MessageError(
                    f"{what} lacks joint(s) {missing}; it names {list(names)} (extra names "
                    "are ignored; rename the joints in the export or in ports.<port>.names)"
                )
            picks.append(np.fromiter((index[j] for j in joints), np.intp, len(joints)))
        self._seen, self._picks = list(names), picks
        return picks


def _field(message: Any, field: str, count: int, what: str) -> np.ndarray:
    data = getattr(message, field)
    if len(data) != count:
        raise MessageError(f"{what} has {count} names but {len(data)} {field} values")
    if isinstance(data, array.array) and data.typecode == "d":
        return np.frombuffer(data, np.float64)
    return np.asarray(data, np.float64)


def _cast(values: np.ndarray, dtype: np.dtype, what: str) -> np.ndarray:
    """``values`` (float64) as ``dtype``; an integer port refuses what it cannot hold."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        # float(info.max) + 1 is exact: 2**bits (or 2**(bits-1)), where a cast would wrap.
        held = (values >= info.min) & (values < float(info.max) + 1)  # NaN is not held
        if not held.all():
            raise MessageError(
                f"{what} carries {values[~held].tolist()} for a port of dtype {dtype}, which "
                f"holds {info.min}..{info.max} only; send finite values in that range"
            )
    return values.astype(dtype)


class InputDecoder:
    """Decodes one subscription's messages into the arrays of the ports it feeds.

    Args:
        message_type: ``pkg/msg/Name`` of the topic.
        ports: ``(binding, dtype, shape)`` of each port, in the order :meth:`decode` returns.
        copy: an image may be decoded as a read-only view of the message (False), for a
            model that never writes into its inputs.
    """

    def __init__(
        self,
        message_type: str,
        ports: Sequence[tuple[Binding, str, tuple[int, ...]]],
        copy: bool = True,
    ):
        self.message_type = message_type
        self.message_class = message_class(message_type)
        self._ports = [(b, numpy_dtype(dtype), tuple(shape)) for b, dtype, shape in ports]
        self._what = message_type.rsplit("/", 1)[1]
        self._sensor: ImageCodec | CloudCodec | None = None
        if message_type in (IMAGE, POINT_CLOUD2):
            if len(ports) != 1:
                raise MessageError(f"one {self._what} feeds one port, not {len(ports)}")
            ((binding, dtype, shape),) = ports
            if message_type == IMAGE:
                self._sensor = ImageCodec(binding, dtype, tuple(shape), copy)
            else:
                self._sensor = CloudCodec(binding, dtype, tuple(shape))
        elif message_type == JOINT_STATE:
            self._order = _JointOrder([binding.elements for binding, _, _ in self._ports])
        else:
            self._getters = [
                operator.attrgetter(*binding.elements) for binding, _, _ in self._ports
            ]

    def decode(self, message: Any) -> list[np.ndarray]:
        """One array per port (the port's dtype and shape), in the order of ``ports``.

        Raises:
            MessageError: missing joints, fields whose length is not the number of names, a
                value an integer port cannot hold (NaN, infinite, out of its range); an image
                or cloud of another size or encoding.
        """
        if self._sensor is not None:
            return [self._sensor.decode(message)]
        if self.message_type != JOINT_STATE:
            return [
                _cast(np.array(get(message), np.float64), dtype, self._what).reshape(shape)
                for get, (_, dtype, shape) in zip(self._getters, self._ports, strict=True)
            ]
        names = message.name
        picks = self._order.picks(names, self._what)
        values, fields = [], {}
        for pick, (binding, dtype, shape) in zip(picks, self._ports, strict=True):
            data = fields.get(binding.field)
            if data is None:
                data = _field(message, binding.field, len(names), "JointState")
                fields[binding.field] = data
            values.append(_cast(data[pick], dtype, self._what).reshape(shape))
        return values

    def encode(self, values: Sequence[Any], stamp: Any = None) -> Any:
        """A message carrying ``values`` (one array-like per port); for tests and probes.

        A JointState names the union of the ports' joints; a field no port sets stays empty,
        an element of a set field that no port gives is NaN. An image or a cloud is its
        codec's ``encode``.
        """
        if self._sensor is not None:
            return self._sensor.encode(values[0], stamp)
        message = self.message_class()
        if stamp is not None and hasattr(message, "header"):
            message.header.stamp = stamp
        arrays = [np.asarray(value, np.float64).reshape(-1) for value in values]
        if self.message_type != JOINT_STATE:
            for (binding, _, _), flat in zip(self._ports, arrays, strict=True):
                for path, value in zip(binding.elements, flat, strict=True):
                    *parents, leaf = path.split(".")
                    setattr(functools.reduce(getattr, parents, message), leaf, float(value))
            return message
        names = list(dict.fromkeys(j for binding, _, _ in self._ports for j in binding.elements))
        index = {name: i for i, name in enumerate(names)}
        fields: dict[str, np.ndarray] = {}
        for (binding, _, _), flat in zip(self._ports, arrays, strict=True):
            data = fields.setdefault(binding.field, np.full(len(names), np.nan))
            data[[index[j] for j in binding.elements]] = flat
        message.name = names
        for field, data in fields.items():
            setattr(message, field, array.array("d", data.tobytes()))
        return message


class OutputEncoder:
    """Writes one output port's arrays as its bound message, and reads them back.

    Args:
        binding: the port's binding (Float64MultiArray, JointState or JointTrajectory).
        dtype, shape: the port's.
        labels: the layout label of each axis (Float64MultiArray).
    """

    def __init__(
        self, binding: Binding, dtype: str, shape: tuple[int, ...], labels: Sequence[str] = ()
    ):
        self.binding = binding
        self.message_type = binding.message_type
        self.message_class = message_class(binding.message_type)
        self.dtype = numpy_dtype(dtype)
        self.shape = tuple(shape)
        joints = len(binding.elements)
        self._rows = int(np.prod(self.shape, dtype=np.int64)) // max(joints, 1)
        position = {name: i for i, name in enumerate(binding.elements)}
        order = binding.order or binding.elements
        self._to_wire = np.array([position[name] for name in order], np.intp)
        self._from_wire = np.argsort(self._to_wire)
        self._order = list(order)
        self._read = _JointOrder([binding.elements])
        self._labels = tuple(labels) or tuple(f"dim{i}" for i in range(len(self.shape)))
        self._template = self._raw_template()

    def _wire(self, value: Any) -> np.ndarray:
        rows = np.asarray(value).reshape(self._rows, -1)[:, self._to_wire]
        return np.ascontiguousarray(rows, np.float64)

    def encode(self, value: Any, stamp: Any = None) -> Any:
        """The message for one output array (the port's shape; any float or int dtype)."""
        rows = self._wire(value)
        if self.message_type == FLOAT64_ARRAY:
            from std_msgs.msg import MultiArrayDimension, MultiArrayLayout

            shape = (*self.shape[:-1], rows.shape[1]) if self.shape else (1,)
            strides = [int(np.prod(shape[axis:], dtype=np.int64)) for axis in range(len(shape))]
            dims = [
                MultiArrayDimension(label=label, size=size, stride=stride)
                for label, size, stride in zip(self._labels, shape, strides, strict=False)
            ]
            return self.message_class(
                layout=MultiArrayLayout(dim=dims, data_offset=0),
                data=array.array("d", rows.tobytes()),
            )
        if self.message_type == JOINT_STATE:
            message = self.message_class(name=self._order)
            if stamp is not None:
                message.header.stamp = stamp
            setattr(message, self.binding.field, array.array("d", rows[0].tobytes()))
            return message
        return self._trajectory(rows)

    def encode_raw(self, value: Any, stamp: Any = None) -> bytes:
        """:meth:`encode` as CDR bytes: a Float64MultiArray or a JointState is its cached
        bytes with the values (and the stamp) written in; a JointTrajectory is serialized
        from its fields."""
        rows = self._wire(value)
        if self._template is not None:
            head, at, tail = self._template
            if self.message_type == JOINT_STATE:
                data = rows[0].astype("<f8", copy=False).tobytes()
                sec, nanosec = (stamp.sec, stamp.nanosec) if stamp is not None else (0, 0)
                return b"".join((head, _STAMP.pack(sec, nanosec), at, data, tail))
            return b"".join((head, rows.astype("<f8", copy=False).tobytes(), tail))
        fields = self._raw_fields
        message = cdr.defaults(fields)
        message.joint_names = self._order
        message.points = []
        for step, row in enumerate(rows):
            point = cdr.defaults(self._point_fields)
            nanoseconds = round((step + 1) * self.binding.period_s * 1e9)
            point.time_from_start.sec = nanoseconds // 10**9
            point.time_from_start.nanosec = nanoseconds % 10**9
            setattr(point, self.binding.field, row)
            message.points.append(point)
        return cdr.write(message, fields)

    def _raw_template(self) -> tuple[bytes, bytes, bytes] | None:
        """The bytes of a Float64MultiArray or JointState of this port around its values
        (and, for a JointState, after its stamp): ``(head, middle, tail)``."""
        self._raw_fields = cdr.layout(self.message_class)
        if self.message_type not in (FLOAT64_ARRAY, JOINT_STATE):
            point = message_class("trajectory_msgs/msg/JointTrajectoryPoint")
            self._point_fields = cdr.layout(point)
            return None
        values = len(self._to_wire) * (self._rows if self.message_type == FLOAT64_ARRAY else 1)
        marker = np.full(values, np.pi, "<f8").tobytes()
        if self.message_type == FLOAT64_ARRAY:
            typed = self.encode(np.zeros(self.shape))
            message = cdr.Fields(layout=typed.layout, data=np.frombuffer(marker))
            serialized = cdr.write(message, self._raw_fields)
            at = serialized.index(marker)
            return serialized[:at], b"", serialized[at + len(marker) :]
        message = cdr.defaults(self._raw_fields)
        message.name = self._order
        setattr(message, self.binding.field, np.frombuffer(marker))
        serialized = cdr.write(message, self._raw_fields)
        at = serialized.index(marker)
        stamp_at = len(cdr.LITTLE_ENDIAN)  # the header's stamp comes first
        head, middle = serialized[:stamp_at], serialized[stamp_at + _STAMP.size : at]
        return head, middle, serialized[at + len(marker) :]

    def _trajectory(self, rows: np.ndarray) -> Any:
        from builtin_interfaces.msg import Duration
        from trajectory_msgs.msg import JointTrajectoryPoint

        points = []
        for step, row in enumerate(rows):
            nanoseconds = round((step + 1) * self.binding.period_s * 1e9)
            point = JointTrajectoryPoint(
                time_from_start=Duration(sec=nanoseconds // 10**9, nanosec=nanoseconds % 10**9)
            )
            setattr(point, self.binding.field, array.array("d", row.tobytes()))
            points.append(point)
        return self.message_class(joint_names=self._order, points=points)

    def decode(self, message: Any) -> np.ndarray:
        """The port's array (its dtype, shape and element order) in ``message``.

        Raises:
            MessageError: the message does not carry the port's joints or values.
        """
        if self.message_type == FLOAT64_ARRAY:
            size = self._rows * len(self._to_wire)
            if len(message.data) != size:
                raise MessageError(f"expected {size} values, got {len(message.data)}")
            rows = np.frombuffer(message.data, np.float64).reshape(self._rows, -1)
            rows = rows[:, self._from_wire]
        elif self.message_type == JOINT_STATE:
            (pick,) = self._read.picks(message.name, "JointState")
            rows = _field(message, self.binding.field, len(message.name), "JointState")[pick]
        else:
            (pick,) = self._read.picks(message.joint_names, "JointTrajectory")
            if len(message.points) != self._rows:
                raise MessageError(f"expected {self._rows} points, got {len(message.points)}")
            count = len(message.joint_names)
            where = "a JointTrajectory point"
            points = [_field(p, self.binding.field, count, where) for p in message.points]
            rows = np.stack([values[pick] for values in points])
        return rows.astype(self.dtype).reshape(self.shape)
