"""A hand-written rclpy node of the rate loop's shape: what a user writes without leapp for a
50 Hz policy in front of a 500 Hz position controller.

One node under ``--namespace`` keeps the newest ``preprocess/joint_states`` (JointState, joints
picked by name), ``preprocess/imu`` (Imu) and ``preprocess/cmd_vel`` (Twist) as they arrive;
a 50 Hz timer calls the export's artifacts the plain way (``preprocess.pt`` with
``torch.jit.load``, one thread; ``policy.onnx`` with ONNX Runtime, one intra-op and one
inter-op thread) on the newest values, publishes ``policy/action`` (``Float32MultiArray``)
and starts a ramp; a 500 Hz timer publishes ``policy/joint_targets`` (``Float64MultiArray``)
in a straight line from the last target to the result over one policy period, then holds it.
Topics and QoS are the graph's (publishers reliable, subscriptions best effort, depth 1), the
executor the one leapp's nodes use::

    python bench/hand_written_rate_node.py --namespace NS --export FOLDER

prints :data:`READY` once its topics exist and runs until SIGINT/SIGTERM. It takes the newest
JointState and the newest Imu apart, as such nodes do: when the timer comes between the two
messages of one instant, it computes from two (the rate loop bench counts it).
"""

from __future__ import annotations

import argparse
import array
import sys
from pathlib import Path
from typing import Any

import numpy as np
from hand_written_nodes import load_jit
from rate_arm import JOINTS, POLICY_HZ, SENSOR_HZ

__all__ = ["READY", "make_node"]

READY = "hand-written rate node ready"
STEPS = round(SENSOR_HZ / POLICY_HZ)  # targets per policy period


def _policy_call(path: Path) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return lambda obs: session.run(None, {name: obs})


def make_node(context: Any, namespace: str, export: Path) -> Any:
    """The node (see the module documentation) on ``context``."""
    import rclpy
    from geometry_msgs.msg import Twist
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Imu, JointState
    from std_msgs.msg import Float32MultiArray, Float64MultiArray

    node = rclpy.create_node("hand_written_rate", namespace=namespace, context=context)
    preprocess = load_jit(str(export / "preprocess.pt"))
    policy = _policy_call(export / "policy.onnx")
    newest: dict[str, np.ndarray] = {}
    ramp: dict[str, Any] = {"start": None, "point": None, "step": 0, "last": None}
    sensor = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
    action_out = node.create_publisher(Float32MultiArray, "policy/action", 1)
    targets_out = node.create_publisher(Float64MultiArray, "policy/joint_targets", 1)

    def on_joints(message: Any) -> None:
        where = {name: i for i, name in enumerate(message.name)}
        order = [where[joint] for joint in JOINTS]
        newest["joint_pos"] = np.asarray(message.position, np.float32)[order]
        newest["joint_vel"] = np.asarray(message.velocity, np.float32)[order]

    def on_imu(message: Any) -> None:
        rate, accel, q = message.angular_velocity, message.linear_acceleration, message.orientation
        newest["gyro"] = np.array([rate.x, rate.y, rate.z], np.float32)
        newest["accel"] = np.array([accel.x, accel.y, accel.z], np.float32)
        newest["quat"] = np.array([q.w, q.x, q.y, q.z], np.float32)

    def on_twist(message: Any) -> None:
        newest["command"] = np.array(
            [message.linear.x, message.linear.y, message.angular.z], np.float32
        )

    names = ("joint_pos", "joint_vel", "gyro", "accel", "quat", "command")

    def on_policy_timer() -> None:
        if len(newest) < len(names):
            return
        obs = preprocess([newest[name] for name in names])
        action, targets = policy(obs)
        action_out.publish(Float32MultiArray(data=array.array("f", action.tobytes())))
        point = targets.astype(np.float64)
        ramp.update(start=point if ramp["last"] is None else ramp["last"], point=point, step=0)

    def on_target_timer() -> None:
        if ramp["point"] is None:
            return
        ramp["step"] += 1
        u = min(ramp["step"] / STEPS, 1.0)
        value = (ramp["start"] + (ramp["point"] - ramp["start"]) * u).astype(np.float32)
        ramp["last"] = value.astype(np.float64)
        targets_out.publish(Float64MultiArray(data=array.array("d", ramp["last"].tolist())))

    node.create_subscription(JointState, "preprocess/joint_states", on_joints, sensor)
    node.create_subscription(Imu, "preprocess/imu", on_imu, sensor)
    node.create_subscription(Twist, "preprocess/cmd_vel", on_twist, sensor)
    node.create_timer(1.0 / POLICY_HZ, on_policy_timer)
    node.create_timer(1.0 / SENSOR_HZ, on_target_timer)
    return node


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--export", type=Path, required=True)
    args = parser.parse_args(argv)

    from leapp_ros.node.executor import run_nodes

    def build(context: Any, nodes: list[Any]) -> None:
        nodes.append(make_node(context, args.namespace, args.export))
        print(READY, flush=True)

    return run_nodes("hand_written_rate_node", [sys.argv[0]], build, whole_process=True)


if __name__ == "__main__":
    sys.exit(main())
