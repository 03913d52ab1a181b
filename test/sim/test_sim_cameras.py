"""The simulator's camera frames are what the camera sees of the tick's physics state: a depth
``sensor_msgs/Image`` (``32FC1``) holds each pixel's distance along the optical axis in metres,
a colour one is ``rgb8`` at the port's size, a camera publishes on every ``every``-th tick
only, and a machine without a working OpenGL backend gets an error saying what to install.

The robot is :mod:`support.sighted`'s: a camera fixed 1.5 m above a floor with a 0.2 m step
under it, and a camera under a free base that falls. The references are analytic (the floor
and the step's top at known distances) and MuJoCo's own ray casts (``mj_ray``) along each
pixel's ray in the state the frame was rendered from.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from support.sighted import COLOUR, DEPTH, MAP, STEP, export_sighted_policy, write_sighted_model

from leapp_ros.run.processes import load_plan
from leapp_ros.sim.sim_map import SimMapError, parse_map

mujoco = pytest.importorskip(
    "mujoco", reason="leapp-ros sim needs MuJoCo: pip install 'leapp_ros[sim]'"
)

DEPTH_TOPIC, COLOUR_TOPIC = "/sighted/see/depth", "/sighted/look/rgb"
OVERHEAD = {"overhead": {"depth": "see/depth", "colour": "look/rgb"}}
AWAY = {"position": [-1.5, 0.0, 0.6]}  # the base out of the overhead camera's view


@pytest.fixture(scope="module")
def sighted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sighted")
    plan = load_plan(export_sighted_policy(folder))
    return SimpleNamespace(mjcf=write_sighted_model(folder), plan=plan)


def robot_of(sighted, **changes):
    from leapp_ros.sim.mujoco_robot import SimulatedRobot

    return SimulatedRobot(
        sighted.mjcf, parse_map({**MAP, **changes}, Path("m.yaml")), sighted.plan
    )


def image_of(messages, topic):
    """The Image on ``topic``, by rclpy, and its pixels by NumPy alone."""
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import Image

    image = deserialize_message(messages[topic], Image)
    dtype, channels = {"32FC1": ("<f4", 1), "rgb8": (np.uint8, 3)}[image.encoding]
    pixels = np.frombuffer(bytes(image.data), dtype).reshape(image.height, image.width, channels)
    return image, pixels.squeeze(-1) if channels == 1 else pixels


def pixel_rays(model, camera: int, rows: int, columns: int) -> np.ndarray:
    """Each pixel centre's ray in the camera frame, ``[rows, columns, 3]``, of unit depth
    (z = -1: a MuJoCo camera looks along its -z axis; row 0 is the picture's top)."""
    half = math.tan(math.radians(model.cam_fovy[camera]) / 2)
    y = (1 - 2 * (np.arange(rows) + 0.5) / rows) * half
    x = (2 * (np.arange(columns) + 0.5) / columns - 1) * half * columns / rows
    grid_x, grid_y = np.meshgrid(x, y)
    return np.stack([grid_x, grid_y, -np.ones_like(grid_x)], axis=-1)


def cast_depth(robot, camera: str) -> np.ndarray:
    """MuJoCo's ray cast along every pixel's ray from the camera, in the robot's state: the
    distance along the optical axis (the rays have unit depth)."""
    model, data = robot.model, robot.data
    camera_id = model.camera(camera).id
    rays = pixel_rays(model, camera_id, *DEPTH) @ data.cam_xmat[camera_id].reshape(3, 3).T
    body = int(model.cam_bodyid[camera_id]) or -1
    found = np.zeros(1, np.int32)
    return np.array([[mujoco.mj_ray(model, data, data.cam_xpos[camera_id], ray, None, 1, body,
                                    found) for ray in row] for row in rays])  # fmt: skip


def test_a_depth_frame_holds_the_distances_to_the_floor_and_the_step_in_metres(sighted):
    robot = robot_of(sighted, cameras=OVERHEAD, base_pose=AWAY)
    image, depth = image_of(robot.sensor_messages(), DEPTH_TOPIC)
    assert (image.encoding, image.is_bigendian, image.step) == ("32FC1", 0, 4 * DEPTH[1])
    assert (image.height, image.width, image.header.frame_id) == (*DEPTH, "overhead")
    # where each pixel's ray meets the floor and the step's top: x of the camera plus the
    # ray's x times the distance (the camera at x = 0.3 looks straight down, x to the right)
    ray_x = pixel_rays(robot.model, robot.model.camera("overhead").id, *DEPTH)[..., 0]
    low, high = STEP["x"]
    floor_x, top_x = 0.3 + ray_x * 1.5, 0.3 + ray_x * (1.5 - STEP["top"])
    on_floor = (floor_x < low - 0.01) & (top_x < low - 0.01)
    on_top = (top_x > low + 0.01) & (top_x < high - 0.01)
    assert on_floor.sum() > 500 and on_top.sum() > 500
    np.testing.assert_allclose(depth[on_floor], 1.5, rtol=0, atol=1e-4)
    np.testing.assert_allclose(depth[on_top], 1.5 - STEP["top"], rtol=0, atol=1e-4)


def test_each_depth_frame_is_the_ray_cast_distance_in_the_state_it_was_rendered_from(sighted):
    robot = robot_of(sighted)  # the belly camera, under a falling base
    heights = []
    for _ in range(6):
        messages = robot.sensor_messages()
        image, depth = image_of(messages, DEPTH_TOPIC)
        stamp = image.header.stamp.sec * 10**9 + image.header.stamp.nanosec
        assert stamp == round(robot.time_s * 1e9)
        expected = cast_depth(robot, "belly")
        close = np.abs(depth - expected) < 1e-3
        assert close.mean() > 0.98, f"t = {robot.time_s:.3f} s: {np.abs(depth - expected).max()}"
        heights.append(float(robot.data.cam_xpos[robot.model.camera("belly").id][2]))
        robot.act([0.0])
    assert heights[0] - heights[-1] > 0.005, "the base did not fall: a frame of one state only"


def test_a_colour_frame_is_rgb8_of_the_port_size_and_shows_the_red_step(sighted):
    robot = robot_of(sighted, cameras=OVERHEAD, base_pose=AWAY)
    image, pixels = image_of(robot.sensor_messages(), COLOUR_TOPIC)
    assert (image.encoding, image.height, image.width, image.step) == (
        "rgb8", *COLOUR, 3 * COLOUR[1])  # fmt: skip
    ray_x = pixel_rays(robot.model, robot.model.camera("overhead").id, *COLOUR)[..., 0]
    top_x = 0.3 + ray_x * (1.5 - STEP["top"])
    on_top, on_floor = (top_x > 0.3) & (top_x < 0.7), 0.3 + ray_x * 1.5 < 0.2
    red, green = pixels[..., 0].astype(int), pixels[..., 1].astype(int)
    assert (red[on_top] - green[on_top]).min() > 100, "the step is red"
    assert (np.abs(red[on_floor] - green[on_floor]) < 10).all(), "the floor is grey"


@pytest.mark.parametrize("every", [1, 3])
def test_a_camera_publishes_on_every_kth_tick_only(sighted, every):
    cameras = {"belly": {"depth": "see/depth"}, "overhead": {"colour": "look/rgb", "every": every}}
    robot = robot_of(sighted, cameras=cameras)
    seen = {}
    for tick in range(10):
        for topic in robot.sensor_messages():
            seen.setdefault(topic, []).append(tick)
        robot.act([0.0])
    assert seen.pop(COLOUR_TOPIC) == list(range(0, 10, every))
    assert all(ticks == list(range(10)) for ticks in seen.values()), seen


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cameras": {"nose": {"depth": "see/depth"}}}, "'nose' is no camera"),
        ({"cameras": {"belly": {"depth": "see/dept"}}}, "/sighted/see/dept is no Image input"),
        ({"cameras": {"belly": {"colour": "see/depth"}}}, "sends colour as rgb8"),
        ({"cameras": {"belly": {"depth": "see/depth"}}}, "take sensor_msgs/Image: map a camera"),
        ({"height_scan": {"topic": "see/heights", "grid": [7, 5], "spacing": 0.1}},
         "does not fill graph input /sighted/see/heights"),
        ({"height_scan": None}, "map a height_scan to it"),
    ],
)  # fmt: skip
def test_a_map_whose_sensors_do_not_fit_the_model_or_the_graph_is_refused(
    sighted, change, message
):
    changes = {key: value for key, value in change.items() if value is not None}
    document = {**MAP, **changes}
    for key in [key for key, value in change.items() if value is None]:
        del document[key]
    from leapp_ros.sim.mujoco_robot import SimulatedRobot

    with pytest.raises(SimMapError, match=message):
        SimulatedRobot(sighted.mjcf, parse_map(document, Path("m.yaml")), sighted.plan)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cameras": {"belly": {}}}, "cameras.belly: give the graph input topic of its depth"),
        ({"cameras": {"belly": {"depth": "d", "every": 0}}}, "every must be a positive whole"),
        ({"cameras": {"belly": {"depth": "d", "fps": 30}}}, r"unknown key\(s\) \['fps'\]"),
        ({"odometry": {"frame": "odom"}}, r"odometry: unknown key\(s\) \['frame'\]"),
        ({"height_scan": {"topic": "h", "grid": [5], "spacing": 0.1}}, "takes \\[rows, col"),
        ({"height_scan": {"topic": "h", "grid": [5, 7]}}, "height_scan: no spacing"),
        ({"height_scan": {"topic": "h", "grid": [5, 7], "spacing": [0.1, 0]}}, "one positive"),
        ({"height_scan": {"topic": "h", "grid": [5, 7], "spacing": 0.1, "relative_to": "map"}},
         "relative_to is 'map'; choose base or world"),
    ],
)  # fmt: skip
def test_a_sensor_section_that_does_not_fit_the_schema_is_refused(change, message):
    with pytest.raises(SimMapError, match=message):
        parse_map({**MAP, **change}, Path("m.yaml"))


def test_a_slow_camera_on_the_command_path_or_into_a_fused_node_is_refused(sighted):
    from leapp_ros.sim.sim_loop import check_rates

    robot = robot_of(sighted)  # overhead every 3 feeds look, off the command's path
    check_rates(sighted.plan, robot)
    with pytest.raises(SimMapError, match="the fused node, which takes every input"):
        check_rates(sighted.plan, robot, fused=True)
    cameras = {**MAP["cameras"], "belly": {"depth": "see/depth", "every": 2}}
    with pytest.raises(SimMapError, match=r"belly on /sighted/see/depth \(every 2\)"):
        check_rates(sighted.plan, robot_of(sighted, cameras=cameras))


def test_a_machine_without_a_working_gl_backend_gets_told_what_to_install(tmp_path):
    script = (
        "import mujoco\n"
        "from leapp_ros.sim.camera_frames import CameraFrames, CameraStream\n"
        'model = mujoco.MjModel.from_xml_string(\'<mujoco><worldbody><camera name="c"/>'
        "</worldbody></mujoco>')\n"
        "CameraFrames(mujoco, model, (CameraStream('c', 0, '/c', True, 8, 8),))\n"
    )
    environment = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    environment["MUJOCO_GL"] = "glfw"  # needs a display, and there is none
    done = subprocess.run([sys.executable, "-c", script], env=environment, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert "DependencyError" in done.stderr and "MUJOCO_GL=egl" in done.stderr, done.stderr
    assert "MUJOCO_GL='glfw'" in done.stderr and "libegl1" in done.stderr, done.stderr
