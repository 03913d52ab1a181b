"""``leapp-ros bounds``: the ranges of a recorded run's inputs become out-of-domain guards
(:mod:`leapp_ros.tools.bounds_command`). A bag of the arm's JointState and Imu messages
(joints shuffled, an extra joint) is written with known values; the params file must give each
float input port, per element by joint / field, the range seen widened by the margin."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from support.sim import JOINTS, Reading, export_arm_policy, imu_message, joint_state_message

from leapp_ros.bag.bag_file import BagWriter
from leapp_ros.tools.cli import main

MARGIN = 0.25


@pytest.fixture(scope="module")
def arm(tmp_path_factory):
    return export_arm_policy(tmp_path_factory.mktemp("arm"))


def write_run(path, readings):
    from rclpy.serialization import serialize_message

    namespace = "/arm_policy/preprocess"
    with BagWriter(path) as writer:
        writer.add_topic(f"{namespace}/joint_states", "sensor_msgs/msg/JointState")
        writer.add_topic(f"{namespace}/imu", "sensor_msgs/msg/Imu")
        for tick, reading in enumerate(readings):
            order = ("wrist", "finger", "shoulder", "elbow") if tick % 2 else (*JOINTS, "finger")
            stamp = tick * 0.02
            time_ns = tick * 20_000_000
            imu = serialize_message(imu_message(reading, stamp))
            joints = serialize_message(joint_state_message(reading, stamp, order))
            writer.write(f"{namespace}/imu", time_ns, imu)
            writer.write(f"{namespace}/joint_states", time_ns + 1, joints)


def test_the_params_file_holds_each_elements_range_with_the_margin(arm, tmp_path):
    rng = np.random.default_rng(3)
    readings = [
        Reading(
            position=rng.uniform(-1, 1, 3),
            velocity=rng.uniform(-3, 3, 3),
            gyro=rng.normal(0, 0.5, 3),
            accel=np.array([0.0, 0.0, 9.81]),  # constant: widened by its magnitude
            quat=np.array([1.0, 0.0, 0.0, 0.0]),
        )
        for _ in range(40)
    ]
    write_run(tmp_path / "run", readings)
    out = tmp_path / "bounds.yaml"
    code = main(["bounds", str(arm.path), "--bag", str(tmp_path / "run"), "--out", str(out),
                 "--margin", str(MARGIN), "--action", "safe"])  # fmt: skip
    assert code == 0
    document = yaml.safe_load(out.read_text())
    ports = document["/arm_policy/preprocess"]["ros__parameters"]["ports"]
    assert document["/arm_policy/leapp_fused"]["ros__parameters"]["ports"] == ports
    for name, field in (("joint_vel", "velocity"), ("gyro", "gyro"), ("accel", "accel")):
        seen = np.stack([getattr(r, field) for r in readings]).astype(np.float32)
        low, high = seen.min(axis=0).astype(np.float64), seen.max(axis=0).astype(np.float64)
        spread = high - low
        pad = np.where(spread > 0, spread, np.maximum(np.abs(high), 1.0)) * MARGIN
        np.testing.assert_allclose(ports[name]["min"], low - pad, rtol=0, atol=1e-6)
        np.testing.assert_allclose(ports[name]["max"], high + pad, rtol=0, atol=1e-6)
        assert ports[name]["on_out_of_domain"] == "safe"
    assert set(ports) == {"joint_pos", "joint_vel", "gyro", "accel", "quat"}


def test_a_bag_without_an_input_topic_is_refused_naming_it(arm, tmp_path, capsys):
    with BagWriter(tmp_path / "empty") as writer:
        writer.add_topic("/other", "std_msgs/msg/String")
    code = main(["bounds", str(arm.path), "--bag", str(tmp_path / "empty"),
                 "--out", str(tmp_path / "b.yaml")])  # fmt: skip
    assert code == 2
    assert "/arm_policy/preprocess/" in capsys.readouterr().err
