"""The simulator's ``nav_msgs/Odometry`` and height samples are MuJoCo's own readings of the
tick's physics state: the Odometry's pose is the base's in the world and its twist is in the
base's own frame (REP 105), as a ``velocimeter`` and a ``gyro`` at the base's origin read it
(not the world frame, not the frame of the base's principal inertia axes); the height scan's
``PointCloud2`` holds the terrain's height under each grid point, through the robot's own
geoms, relative to the base or in the world; every message of a tick carries its stamp.

The robot is :mod:`support.sighted`'s: a free base with rotated inertia axes that is thrown
(spinning, sideways) and falls onto a floor with a 0.2 m step; the reference for the Odometry
is a fresh ``MjData`` set to the robot's state and forward-computed (its ``data.sensordata``),
for the heights the step's known geometry.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from support.sighted import GRID, MAP, STEP, export_sighted_policy, write_sighted_model

from leapp_ros.run.processes import load_plan
from leapp_ros.sim.sim_map import parse_map

mujoco = pytest.importorskip(
    "mujoco", reason="leapp-ros sim needs MuJoCo: pip install 'leapp_ros[sim]'"
)

EXACT = 1e-9  # float64 from the same state
SPACING = 0.1
ODOM, HEIGHTS = "/sighted/see/odom", "/sighted/see/heights"


@pytest.fixture(scope="module")
def sighted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sighted")
    plan = load_plan(export_sighted_policy(folder))
    return SimpleNamespace(mjcf=write_sighted_model(folder), plan=plan)


def robot_of(sighted, **changes):
    from leapp_ros.sim.mujoco_robot import SimulatedRobot

    document = {**MAP, **changes}
    return SimulatedRobot(sighted.mjcf, parse_map(document, Path("m.yaml")), sighted.plan)


def read(messages, topic):
    from nav_msgs.msg import Odometry
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import PointCloud2

    kind = {ODOM: Odometry, HEIGHTS: PointCloud2}[topic]
    return deserialize_message(messages[topic], kind)


def mujoco_reading(robot):
    """A fresh MjData in the robot's state, forward-computed: MuJoCo's own reading of it."""
    model, spec = robot.model, mujoco.mjtState.mjSTATE_INTEGRATION
    state = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, robot.data, state, spec)
    fresh = mujoco.MjData(model)
    mujoco.mj_setState(model, fresh, state, spec)
    mujoco.mj_forward(model, fresh)
    return fresh


def vector(field) -> np.ndarray:
    return np.array([field.x, field.y, field.z])


def throw(robot) -> None:
    """Set the base spinning about a tilted axis and moving sideways (qvel of a free joint:
    linear in the world, angular in the body frame)."""
    root = robot.model.joint("root").dofadr[0]
    robot.data.qvel[root : root + 6] = [0.4, -0.3, 1.0, 2.0, -1.5, 3.0]
    mujoco.mj_forward(robot.model, robot.data)


def test_the_odometry_twist_is_in_the_base_frame_and_its_pose_in_the_world(sighted):
    half = math.sqrt(0.5)
    robot = robot_of(sighted, base_pose={"orientation": [half, 0.0, 0.3, half]})
    throw(robot)
    base = robot.model.body("base").id
    frame_differences, inertia_differences = [], []
    for tick in range(15):
        odometry, fresh = read(robot.sensor_messages(), ODOM), mujoco_reading(robot)
        where = f"tick {tick}, t = {robot.time_s:.3f} s"
        assert (odometry.header.frame_id, odometry.child_frame_id) == ("world", "base")
        twist, pose = odometry.twist.twist, odometry.pose.pose
        linear = fresh.sensor("base_velocity").data
        np.testing.assert_allclose(vector(twist.linear), linear, atol=EXACT, err_msg=where)
        gyro = fresh.sensor("base_gyro").data
        np.testing.assert_allclose(vector(twist.angular), gyro, atol=EXACT, err_msg=where)
        position = fresh.sensor("base_pos").data
        np.testing.assert_allclose(vector(pose.position), position, atol=EXACT, err_msg=where)
        q = pose.orientation
        quat = np.array([q.w, q.x, q.y, q.z])
        expected = fresh.sensor("base_quat").data
        np.testing.assert_allclose(quat * np.sign(quat @ expected), expected, atol=EXACT)
        # the test can tell the frames apart: the world's and the inertia axes' differ
        world = fresh.xmat[base].reshape(3, 3) @ linear
        frame_differences.append(np.abs(world - linear).max())
        inertial = np.zeros(6)
        mujoco.mj_objectVelocity(robot.model, fresh, mujoco.mjtObj.mjOBJ_BODY, base, inertial, 1)
        inertia_differences.append(np.abs(inertial[:3] - gyro).max())
        robot.act([0.0])
    assert min(frame_differences) > 0.1 and min(inertia_differences) > 0.1


def expected_height(world_x: np.ndarray) -> np.ndarray:
    low, high = STEP["x"]
    return np.where((world_x > low) & (world_x < high), STEP["top"], 0.0)


def grid_offsets() -> tuple[np.ndarray, np.ndarray]:
    """The grid's offsets ahead of the base and to its left, ``[rows, columns]`` each."""
    rows, columns = GRID
    ahead = (np.arange(rows) - (rows - 1) / 2) * SPACING
    left = (np.arange(columns) - (columns - 1) / 2) * SPACING
    return np.meshgrid(ahead, left, indexing="ij")


def cloud_points(cloud) -> np.ndarray:
    assert [(f.name, f.offset, f.datatype) for f in cloud.fields] == [
        ("x", 0, 7), ("y", 4, 7), ("z", 8, 7)]  # fmt: skip
    assert (cloud.height, cloud.width, cloud.point_step) == (*GRID, 16)
    assert cloud.row_step == 16 * GRID[1] and not cloud.is_bigendian
    return np.frombuffer(bytes(cloud.data), "<f4").reshape(*GRID, 4)[..., :3]


@pytest.mark.parametrize("yaw_deg", [0.0, 90.0, -35.0])
def test_height_samples_are_the_terrain_under_the_grid_turned_with_the_heading(sighted, yaw_deg):
    half = math.radians(yaw_deg) / 2
    pose = {"position": [0.3, 0.0, 0.6], "orientation": [math.cos(half), 0, 0, math.sin(half)]}
    robot = robot_of(sighted, base_pose=pose)
    ahead, left = grid_offsets()
    yaw = math.radians(yaw_deg)
    world_x = 0.3 + math.cos(yaw) * ahead - math.sin(yaw) * left
    world_y = math.sin(yaw) * ahead + math.cos(yaw) * left
    assert 0 < expected_height(world_x).mean() < STEP["top"], "the grid spans the step's edge"
    under = (np.abs(world_x - 0.3) < 0.2) & (np.abs(world_y) < 0.1)
    assert under.sum() >= 3, "some rays pass through the base"
    for tick in range(4):
        cloud = read(robot.sensor_messages(), HEIGHTS)
        base_z = float(robot.data.xpos[robot.model.body("base").id][2])
        assert cloud.header.frame_id == "base" and cloud.is_dense
        points = cloud_points(cloud)
        np.testing.assert_allclose(points[..., 0], ahead, atol=1e-6)
        np.testing.assert_allclose(points[..., 1], left, atol=1e-6)
        np.testing.assert_allclose(points[..., 2], expected_height(world_x) - base_z, atol=1e-5,
                                   err_msg=f"tick {tick}, base at {base_z:.4f} m")  # fmt: skip
        robot.act([0.0])


def test_height_samples_relative_to_the_world_carry_world_coordinates(sighted):
    scan = {**MAP["height_scan"], "relative_to": "world"}
    robot = robot_of(sighted, height_scan=scan, base_pose={"position": [0.3, 0.2, 0.6]})
    cloud = read(robot.sensor_messages(), HEIGHTS)
    assert cloud.header.frame_id == "world"
    ahead, left = grid_offsets()
    points = cloud_points(cloud)
    np.testing.assert_allclose(points[..., 0], 0.3 + ahead, atol=1e-6)
    np.testing.assert_allclose(points[..., 1], 0.2 + left, atol=1e-6)
    np.testing.assert_allclose(points[..., 2], expected_height(0.3 + ahead), atol=1e-6)


def test_a_sample_whose_ray_hits_nothing_is_nan_and_the_cloud_not_dense(sighted):
    robot = robot_of(sighted, base_pose={"position": [2.9, 0.0, 0.6]})  # the floor ends at 3
    cloud = read(robot.sensor_messages(), HEIGHTS)
    z = cloud_points(cloud)[..., 2]
    ahead, _ = grid_offsets()
    assert np.isnan(z[ahead > 0.1]).all() and np.isfinite(z[ahead < 0.1]).all()
    assert not cloud.is_dense


def test_every_message_of_a_tick_carries_the_stamp_of_its_physics_state(sighted):
    robot = robot_of(sighted)
    throw(robot)
    from rclpy.serialization import deserialize_message

    from leapp_ros.messages.robot_codecs import message_class

    for _ in range(8):
        messages = robot.sensor_messages()
        for topic, data in messages.items():
            message = deserialize_message(data, message_class(robot.topics[topic]))
            stamp = message.header.stamp.sec * 10**9 + message.header.stamp.nanosec
            assert stamp == round(robot.time_s * 1e9), topic
        odometry = read(messages, ODOM)
        fresh = mujoco_reading(robot)
        np.testing.assert_array_equal(vector(odometry.twist.twist.angular),
                                      fresh.sensor("base_gyro").data)  # fmt: skip
        robot.act([0.1])
