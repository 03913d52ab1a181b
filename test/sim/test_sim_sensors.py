"""The simulated robot's sensor messages are what MuJoCo itself reads of the same physics state,
in the frame each message defines (REP 103 / 145): a ``sensor_msgs/Imu`` carries the
orientation of its body or site in the world, its angular velocity in that frame and what an
accelerometer there reads (gravity included); the JointState and the Imu of one tick come from
one state, and reading them leaves the physics as a plain MuJoCo loop steps it.

The robot is the trotter of :mod:`support.trotter`: its base's principal inertia axes are
rotated 180 deg from its frame, an IMU site is offset and rotated from it and a massless IMU
board is welded to it at another pose. Each tick the robot is moved by scripted joint targets
(the legs swing out of phase, so the base bounces, pitches and rolls on its feet); the
reference is a fresh ``MjData`` given the robot's state (``mj_setState``) and ``mj_forward``:
``data.sensordata`` of the gyro, accelerometer, velocimeter and frame quaternion sensors the
model carries at each IMU's frame, and ``mj_objectVelocity`` of the frame.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from support.trotter import JOINTS, MAP, export_trot_policy, write_trotter_model

from leapp_ros.run.processes import load_plan
from leapp_ros.sim.sim_map import parse_map

mujoco = pytest.importorskip(
    "mujoco", reason="leapp-ros sim needs MuJoCo: pip install 'leapp_ros[sim]'"
)

TICKS = 30
EXACT = 1e-9  # float64 from the same state: only the last bits may differ
IMU_TOPIC = "/trot_policy/observe/imu"
JOINT_TOPIC = "/trot_policy/observe/joint_states"


@pytest.fixture(scope="module")
def trotter(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trotter")
    export = export_trot_policy(folder)
    return SimpleNamespace(folder=folder, mjcf=write_trotter_model(folder), plan=load_plan(export))


def robot_of(trotter, **changes):
    from leapp_ros.sim.mujoco_robot import SimulatedRobot

    document = {**MAP, **changes}
    for key in [key for key, value in document.items() if value is None]:
        del document[key]
    return SimulatedRobot(trotter.mjcf, parse_map(document, Path("map.yaml")), trotter.plan)


def scripted_targets(tick: int) -> np.ndarray:
    """Joint targets that swing every leg out of phase with the others."""
    phases = np.arange(len(JOINTS)) * 0.9
    stance = np.array([MAP["initial"][joint] for joint in JOINTS])
    return stance + 0.35 * np.sin(2 * math.pi * 3.0 * tick * 0.02 + phases)


def decoded(robot) -> dict[str, object]:
    """The robot's messages of now, decoded by rclpy."""
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import Imu, JointState

    messages = robot.sensor_messages()
    return {
        "imu": deserialize_message(messages[IMU_TOPIC], Imu),
        "joints": deserialize_message(messages[JOINT_TOPIC], JointState),
    }


def mujoco_reading(robot):
    """A fresh MjData in the robot's state, forward-computed: MuJoCo's own reading of it."""
    model = robot.model
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    state = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, robot.data, state, spec)
    fresh = mujoco.MjData(model)
    mujoco.mj_setState(model, fresh, state, spec)
    mujoco.mj_forward(model, fresh)
    return fresh


def vector(field) -> np.ndarray:
    return np.array([field.x, field.y, field.z])


def same_rotation(message_quat, wxyz) -> np.ndarray:
    """The message's quaternion as (w, x, y, z), signed like ``wxyz`` (q and -q are one
    rotation)."""
    q = np.array([message_quat.w, message_quat.x, message_quat.y, message_quat.z])
    return q if np.dot(q, wxyz) >= 0 else -q


def walk_and_compare(robot, site: str, frame: tuple[int, int]) -> None:
    """Every tick: the Imu equals the sensors at ``site`` and ``mj_objectVelocity`` of
    ``frame`` (object type, id) in a fresh forward of the robot's state."""
    for tick in range(TICKS):
        imu = decoded(robot)["imu"]
        fresh = mujoco_reading(robot)
        velocity = np.zeros(6)
        mujoco.mj_objectVelocity(robot.model, fresh, *frame, velocity, 1)
        where = f"tick {tick}, t = {robot.time_s:.3f} s"
        gyro = fresh.sensor(f"{site}_gyro").data
        np.testing.assert_allclose(vector(imu.angular_velocity), gyro, rtol=0, atol=EXACT,
                                   err_msg=f"angular velocity, {where}")  # fmt: skip
        np.testing.assert_allclose(gyro, velocity[:3], rtol=0, atol=EXACT)
        quat = fresh.sensor(f"{site}_quat").data
        np.testing.assert_allclose(same_rotation(imu.orientation, quat), quat, rtol=0,
                                   atol=EXACT, err_msg=f"orientation, {where}")  # fmt: skip
        np.testing.assert_allclose(vector(imu.linear_acceleration),
                                   fresh.sensor(f"{site}_accel").data, rtol=0, atol=EXACT,
                                   err_msg=f"linear acceleration, {where}")  # fmt: skip
        robot.act(scripted_targets(tick))


@pytest.mark.parametrize(("body", "site"), [("base", "base_origin"), ("imu_board", "board")])
def test_an_imu_body_reads_its_own_frame_though_its_inertia_axes_are_rotated(trotter, body, site):
    robot = robot_of(trotter, imu=body)
    assert decoded(robot)["imu"].header.frame_id == body
    frame = (mujoco.mjtObj.mjOBJ_XBODY, robot.model.body(body).id)
    walk_and_compare(robot, site, frame)
    assert robot.data.xpos[robot.model.body("base").id][2] > 0.15, "the robot fell"


def test_an_imu_site_reads_the_site_frame_offset_and_rotated_from_its_body(trotter):
    robot = robot_of(trotter, imu=None, imu_site="imu")
    assert decoded(robot)["imu"].header.frame_id == "imu"
    walk_and_compare(robot, "imu", (mujoco.mjtObj.mjOBJ_SITE, robot.model.site("imu").id))


def test_the_imu_reads_gravity_as_an_accelerometer_does_at_rest_and_in_free_fall(trotter):
    standing = robot_of(trotter, imu=None, imu_site="imu")
    stance = np.array([MAP["initial"][joint] for joint in JOINTS])
    for _ in range(50):  # settle on its feet
        standing.act(stance)
    accel = vector(decoded(standing)["imu"].linear_acceleration)
    up = standing.data.site("imu").xmat.reshape(3, 3).T @ np.array([0.0, 0.0, 9.81])
    np.testing.assert_allclose(accel, up, atol=0.05)  # 1 g up, in the site frame
    falling = robot_of(trotter, imu=None, imu_site="board", base_pose={"position": [0, 0, 2.0]})
    assert np.linalg.norm(vector(decoded(falling)["imu"].linear_acceleration)) < 1e-9


def test_joint_states_and_the_imu_of_a_tick_come_from_one_physics_state(trotter):
    robot = robot_of(trotter, imu="base")
    for tick in range(TICKS):
        robot.act(scripted_targets(tick))
        messages, fresh = decoded(robot), mujoco_reading(robot)
        stamps = {name: m.header.stamp.sec * 10**9 + m.header.stamp.nanosec
                  for name, m in messages.items()}  # fmt: skip
        assert set(stamps.values()) == {round(robot.time_s * 1e9)}, stamps
        joints = messages["joints"]
        assert tuple(joints.name) == JOINTS
        positions = [fresh.sensor(f"{joint}_pos").data[0] for joint in JOINTS]
        velocities = [fresh.sensor(f"{joint}_vel").data[0] for joint in JOINTS]
        np.testing.assert_array_equal(joints.position, positions)
        np.testing.assert_array_equal(joints.velocity, velocities)
        np.testing.assert_array_equal(
            vector(messages["imu"].angular_velocity), fresh.sensor("base_origin_gyro").data
        )
        quat = fresh.sensor("base_origin_quat").data
        np.testing.assert_array_equal(same_rotation(messages["imu"].orientation, quat), quat)


def test_reading_the_sensors_leaves_the_trajectory_as_a_plain_mujoco_loop_steps_it(trotter):
    robot = robot_of(trotter, imu="base")
    model, plain = robot.model, mujoco.MjData(robot.model)
    joints = [model.joint(joint) for joint in JOINTS]
    qpos = np.array([joint.qposadr[0] for joint in joints])
    dofs = np.array([joint.dofadr[0] for joint in joints])
    plain.qpos[qpos] = [MAP["initial"][joint] for joint in JOINTS]
    kp, kd, limit = (MAP["command"][key] for key in ("kp", "kd", "torque_limit"))
    for tick in range(TICKS):
        decoded(robot)
        robot.act(scripted_targets(tick))
        for _ in range(MAP["decimation"]):
            torque = kp * (scripted_targets(tick) - plain.qpos[qpos]) - kd * plain.qvel[dofs]
            plain.qfrc_applied[dofs] = np.clip(torque, -limit, limit)
            mujoco.mj_step(model, plain)
        np.testing.assert_array_equal(robot.data.qpos, plain.qpos, err_msg=f"tick {tick}")
        np.testing.assert_array_equal(robot.data.qvel, plain.qvel, err_msg=f"tick {tick}")


def test_the_velocity_tracking_error_is_the_base_velocity_in_its_own_frame(trotter):
    robot = robot_of(trotter, imu="base")
    command = np.array(MAP["command_velocity"])
    for tick in range(TICKS):
        state = robot.act(scripted_targets(tick))
        fresh = mujoco_reading(robot)
        linear, angular = (fresh.sensor(f"base_origin_{kind}").data
                           for kind in ("velocity", "gyro"))  # fmt: skip
        measured = np.array([linear[0], linear[1], angular[2]])
        assert state.velocity_error == pytest.approx(np.abs(measured - command).max(), abs=1e-9)


def test_the_map_sets_the_initial_base_pose_and_the_physics_timestep(trotter):
    half = math.sqrt(0.5)
    pose = {"position": [0.5, -0.2, 0.4], "orientation": [2 * half, 0.0, 0.0, 2 * half]}
    robot = robot_of(trotter, base_pose=pose, timestep=0.001)
    root = robot.model.joint("root").qposadr[0]
    np.testing.assert_allclose(robot.data.qpos[root : root + 7],
                               [0.5, -0.2, 0.4, half, 0.0, 0.0, half], atol=1e-12)  # fmt: skip
    np.testing.assert_allclose(robot.data.xpos[robot.model.body("base").id], [0.5, -0.2, 0.4])
    assert robot.model.opt.timestep == 0.001
    robot.act(scripted_targets(0))
    assert robot.time_s == pytest.approx(MAP["decimation"] * 0.001, abs=1e-12)
