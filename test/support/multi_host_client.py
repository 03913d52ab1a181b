"""The seed pipeline's client for test_multi_host.py, run as a script on one "host" (inside a
network namespace, with that host's ROS environment).

It feeds ``/torch_pipeline/preprocess/state`` and ``/velocity`` and reads
``/torch_pipeline/policy/action`` from a plain rclpy node (the test-side ``Probe`` pins
discovery to this machine's loopback, which another host cannot reach). It reads one JSON
command a line on stdin and writes one JSON answer a line on stdout:

- ``{"state": [...], "velocity": [...], "expect": [...], "timeout_s": 10}``: publish the inputs
  (again every 0.1 s, since the nodes subscribe best effort) until an action within 1e-5 of
  ``expect`` arrives; answers ``{"action": [...], "seconds": s}``, or ``{"action": null,
  "last": [...]}`` after ``timeout_s``.
- ``{"state": [...], "velocity": [...], "listen_s": 2}``: publish the inputs for ``listen_s``
  seconds; answers ``{"actions": [[...], ...]}``, every action received meanwhile.

It writes ``{"ready": true}`` once its node exists, and ends at the end of its input.
"""

from __future__ import annotations

import array
import json
import sys
import time

import numpy as np
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import Float32MultiArray

NAMESPACE = "/torch_pipeline"
REPUBLISH_S = 0.1


class Client:
    """Publishers of the seed's inputs and an inbox of its actions, on a private context."""

    def __init__(self) -> None:
        self.context = Context()
        rclpy.init(context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node("multi_host_client", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.inputs = {
            port: self.node.create_publisher(
                Float32MultiArray, f"{NAMESPACE}/preprocess/{port}", reliable
            )
            for port in ("state", "velocity")
        }
        self.actions: list[list[float]] = []
        self.node.create_subscription(
            Float32MultiArray, f"{NAMESPACE}/policy/action", self._on_action, reliable
        )

    def _on_action(self, message: Float32MultiArray) -> None:
        self.actions.append(np.frombuffer(message.data, np.float32).tolist())

    def publish(self, command: dict) -> None:
        for port, publisher in self.inputs.items():
            message = Float32MultiArray()
            message.data = array.array("f", np.asarray(command[port], np.float32).tobytes())
            publisher.publish(message)

    def spin_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=min(0.02, max(deadline - time.monotonic(), 0)))

    def drain(self) -> None:
        """Forget actions that answered earlier commands."""
        self.spin_for(0.05)
        self.actions.clear()

    def step(self, command: dict) -> dict:
        self.drain()
        expect = np.asarray(command["expect"], np.float32)
        start = time.monotonic()
        while time.monotonic() - start < command["timeout_s"]:
            self.publish(command)
            self.spin_for(REPUBLISH_S)
            for action in self.actions:
                if len(action) == expect.size and np.allclose(action, expect, atol=1e-5):
                    return {"action": action, "seconds": time.monotonic() - start}
        return {"action": None, "last": self.actions[-3:]}

    def listen(self, command: dict) -> dict:
        self.drain()
        start = time.monotonic()
        while time.monotonic() - start < command["listen_s"]:
            self.publish(command)
            self.spin_for(REPUBLISH_S)
        return {"actions": self.actions}


def main() -> int:
    client = Client()
    print(json.dumps({"ready": True}), flush=True)
    try:
        for line in sys.stdin:
            command = json.loads(line)
            answer = client.listen(command) if "listen_s" in command else client.step(command)
            print(json.dumps(answer), flush=True)
    finally:
        client.node.destroy_node()
        rclpy.shutdown(context=client.context)
    return 0


if __name__ == "__main__":
    sys.exit(main())
