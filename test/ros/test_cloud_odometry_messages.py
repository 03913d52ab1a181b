"""sensor_msgs/PointCloud2 heights and nav_msgs/Odometry into ports, checked without DDS.

Clouds are built here as a driver or a height-map node builds them (rclpy's typed message:
fields in any order, extra fields, points and rows padded, either byte order) from a height
array, which is what the port must hold (in cloud order, or the organized grid); NaN heights go
through for ``on_nonfinite`` to decide. An Odometry feeds several ports from one message: its
twist (body frame) and its pose. Every message is decoded the typed way and from its CDR bytes.
The live graph is tested in test_sensor_topics.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.serialization import serialize_message
from support.sensors import cloud

from leapp_ros.messages import cdr
from leapp_ros.messages.multiarray import MessageError
from leapp_ros.messages.robot_codecs import InputDecoder
from leapp_ros.plan.bindings import ODOMETRY, POINT_CLOUD2, BindingError, PortOverride, bind_port

HEIGHT = "state/terrain/height"


def decoder(message_type, ports):
    """An InputDecoder of ``[(kind, shape, dtype, override)]``."""
    bound = []
    for kind, shape, dtype, override in ports:
        binding, note = bind_port("input", kind, shape, None, override, dtype=dtype)
        assert binding is not None and binding.message_type == message_type, note
        bound.append((binding, dtype, shape))
    return InputDecoder(message_type, bound)


def both_ways(dec, message):
    """The decoded values from the typed message and from its CDR bytes (equal)."""
    typed = dec.decode(message)
    raw = dec.decode(cdr.read(serialize_message(message), cdr.layout(type(message))))
    for a, b in zip(typed, raw, strict=True):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype
    return typed


@pytest.mark.parametrize("big", [False, True], ids=["little", "big_endian"])
@pytest.mark.parametrize(
    ("shape", "organized"),
    [((12,), False), ((1, 12), False), ((12,), True), ((3, 4), True), ((1, 3, 4), True)],
    ids=["points", "batch_of_points", "points_of_organized", "grid", "batch_grid"],
)
def test_z_of_every_point_fills_the_port_in_cloud_order(shape, organized, big):
    heights = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    dec = decoder(POINT_CLOUD2, [(HEIGHT, shape, "float32", None)])
    (value,) = both_ways(dec, cloud(heights, organized=organized, big=big, row_pad=5))
    np.testing.assert_array_equal(value, heights.reshape(shape))


def test_nan_points_go_into_the_port_for_on_nonfinite_to_decide():
    heights = np.arange(12, dtype=np.float32)
    heights[[2, 7]] = np.nan
    dec = decoder(POINT_CLOUD2, [(HEIGHT, (12,), "float64", None)])
    (value,) = both_ways(dec, cloud(heights, organized=False))
    np.testing.assert_array_equal(value, heights.astype(np.float64))  # NaN where NaN


def test_a_cloud_of_another_size_or_organization_is_an_error_naming_both():
    points = decoder(POINT_CLOUD2, [(HEIGHT, (12,), "float32", None)])
    grid = decoder(POINT_CLOUD2, [(HEIGHT, (3, 4), "float32", None)])
    with pytest.raises(MessageError, match=r"10 points \(1x10\) for a port of 12 heights"):
        points.decode(cloud(np.zeros(10, np.float32), organized=False))
    with pytest.raises(MessageError, match=r"of 1x12 points .* height grid of 3x4"):
        grid.decode(cloud(np.zeros((3, 4), np.float32), organized=False))
    with pytest.raises(MessageError, match=r"of 4x3 points .* height grid of 3x4"):
        grid.decode(cloud(np.zeros((4, 3), np.float32), organized=True))


def test_a_cloud_without_a_float_z_or_with_too_few_bytes_is_an_error():
    dec = decoder(POINT_CLOUD2, [(HEIGHT, (12,), "float32", None)])
    message = cloud(np.zeros(12, np.float32), organized=False)
    message.data = message.data[:-30]
    with pytest.raises(MessageError, match=r"z at byte 4 needs 272 bytes; it has 258"):
        dec.decode(message)
    message = cloud(np.zeros(12, np.float32), organized=False)
    message.fields[1].name = "height"
    with pytest.raises(
        MessageError, match=r"without a float32 or float64 field z .*'height \(7\)'"
    ):
        dec.decode(message)


def test_cloud_encode_round_trips_for_the_harness():
    heights = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    for shape in [(12,), (3, 4), (1, 3, 4)]:
        dec = decoder(POINT_CLOUD2, [(HEIGHT, shape, "float32", None)])
        np.testing.assert_array_equal(
            dec.decode(dec.encode([heights.reshape(shape)]))[0], heights.reshape(shape)
        )


@pytest.mark.parametrize(
    ("shape", "layout", "match"),
    [((2, 3, 4), "", r"\[N\] .* shape is \[2, 3, 4\]"), ((12,), "HW", "does not fit")],
)
def test_height_ports_that_are_no_cloud_are_errors(shape, layout, match):
    override = PortOverride(layout=layout, message="sensor_msgs/PointCloud2")
    with pytest.raises(BindingError, match=match):
        bind_port("input", HEIGHT, shape, None, override, dtype="float32")


def test_an_odometry_feeds_body_velocities_pose_position_and_rotation():
    from nav_msgs.msg import Odometry

    odometry = PortOverride(message="nav_msgs/msg/Odometry")
    dec = decoder(
        ODOMETRY,
        [
            ("state/body/linear_velocity", (3,), "float32", None),
            ("state/body/angular_velocity", (1, 3), "float64", odometry),
            ("state/body/position", (3,), "float32", odometry),
            ("state/body/rotation", (4,), "float32", odometry),
            ("state/body/velocity", (6,), "float32", None),
            ("state/body/pose", (7,), "float32", odometry),
        ],
    )
    rng = np.random.default_rng(3)
    linear, angular, position, quaternion = (rng.standard_normal(n) for n in (3, 3, 3, 4))
    message = Odometry(child_frame_id="base_link")
    message.header.frame_id = "odom"
    twist, pose = message.twist.twist, message.pose.pose
    twist.linear.x, twist.linear.y, twist.linear.z = linear
    twist.angular.x, twist.angular.y, twist.angular.z = angular
    pose.position.x, pose.position.y, pose.position.z = position
    o = pose.orientation
    o.w, o.x, o.y, o.z = quaternion
    message.twist.covariance = rng.standard_normal(36)  # other fields: ignored
    values = both_ways(dec, message)
    expected = [
        linear.astype(np.float32),
        angular.reshape(1, 3),
        position.astype(np.float32),
        quaternion.astype(np.float32),
        np.concatenate([linear, angular]).astype(np.float32),
        np.concatenate([position, quaternion]).astype(np.float32),
    ]
    for value, wanted in zip(values, expected, strict=True):
        assert value.dtype == wanted.dtype
        np.testing.assert_array_equal(value, wanted)


def test_odometry_ports_share_one_topic_and_other_messages_stay_the_default():
    linear, _ = bind_port("input", "state/body/linear_velocity", (3,), None)
    angular, _ = bind_port("input", "state/body/angular_velocity", (3,), None)
    odom_angular, _ = bind_port(
        "input",
        "state/body/angular_velocity",
        (3,),
        None,
        PortOverride(message="nav_msgs/Odometry"),
    )
    assert (linear.message_type, linear.stem) == (ODOMETRY, "odom")
    assert (odom_angular.message_type, odom_angular.stem) == (ODOMETRY, "odom")
    assert angular.message_type == "sensor_msgs/msg/Imu"  # a gyro, unless asked otherwise
    with pytest.raises(
        BindingError, match=r"Odometry but the port's kind is state/body/linear_acceleration"
    ):
        bind_port(
            "input",
            "state/body/linear_acceleration",
            (3,),
            None,
            PortOverride(message="nav_msgs/msg/Odometry"),
        )
