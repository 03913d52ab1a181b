"""The seed pipeline's client for test_multi_host.py, run as a script on one "host" (inside a
network namespace, with that host's ROS environment).

It feeds ``/torch_pipeline/preprocess/state`` and ``/velocity`` and reads
``/torch_pipeline/policy/action`` and the nodes' ``_leapp/status`` from a plain rclpy node (the
test-side ``Probe`` pins discovery to this machine's loopback, which another host cannot
reach). The nodes keep their deployed QoS (best-effort subscriptions): the client sends each
pair once, after every hop is matched both ways (the nodes' status records and its own
endpoints, :func:`leapp_ros.testing.delivery.connection_gaps`). It reads one JSON command a
line on stdin and writes one JSON answer a line on stdout:

- ``{"state": [...], "velocity": [...], "expect": [...], "timeout_s": 10}``: wait for the
  connection, publish the inputs and wait for an action within 1e-5 of ``expect``; answers
  ``{"action": [...], "seconds": s, "actions": [[...], ...]}`` (every action received since
  the previous command), or ``{"action": null, "last": [...], "why": "..."}`` after
  ``timeout_s``. The pair goes again only when a status record of ``policy`` arrives with
  no answer yet: after a node of the other host stopped, its peers' latest records may still
  count its subscription (a record that says so may be the last one the client got), so
  "matched" can be true of an endpoint that is gone and a single pair be lost. The seed keeps
  no state, so a pair sent twice is answered twice alike; a pipeline with state could not be
  driven like this.
- ``{"state": [...], "velocity": [...], "publish_only": true}``: publish the inputs once and
  answer ``{"published": true}`` at once (with the link down nothing is connected: the
  host's own traffic uses its address on the link too).
- ``{"forget": "policy"}``: a node about to be killed: its status record is dropped, and the
  next commands wait until every endpoint of it that the client discovered is gone (a killed
  node's endpoints stay matched until their lease ends); answers ``{"forgotten": n}``.

It writes ``{"ready": true}`` once its node exists, and ends at the end of its input.
"""

from __future__ import annotations

import array
import json
import sys
import time
from collections import Counter

import numpy as np
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import Float32MultiArray, String

from leapp_ros.node.match_count import MatchCount
from leapp_ros.testing.delivery import connection_gaps, unready_nodes

NAMESPACE = "/torch_pipeline"
NODES = ("preprocess", "policy")
ACTION = f"{NAMESPACE}/policy/action"


class Client:
    """Publishers of the seed's inputs, an inbox of its actions and the nodes' statuses, on a
    private context."""

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
        self.matched = MatchCount()
        self.node.create_subscription(
            Float32MultiArray,
            ACTION,
            self._on_action,
            QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE),
            event_callbacks=self.matched.subscription_callbacks(),
        )
        self.statuses: dict[str, dict] = {}
        self.records: Counter[str] = Counter()  # status records received, per node
        latched = QoSProfile(
            depth=100,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        self.node.create_subscription(
            String, f"{NAMESPACE}/_leapp/status", self._on_status, latched
        )
        self.forgotten: set[bytes] = set()  # endpoints of a killed node, until they are gone

    def _on_action(self, message: Float32MultiArray) -> None:
        self.actions.append(np.frombuffer(message.data, np.float32).tolist())

    def _on_status(self, message: String) -> None:
        record = json.loads(message.data)
        self.statuses[record["node"]] = record
        self.records[record["node"]] += 1

    def _endpoints(self, node_name: str) -> set[bytes]:
        topics = {t for r in self.statuses.values() for key in ("publishers", "subscribers")
                  for t in r.get(key, {})}  # fmt: skip
        return {
            bytes(endpoint.endpoint_gid)
            for topic in topics
            for endpoint in [*self.node.get_publishers_info_by_topic(topic),
                             *self.node.get_subscriptions_info_by_topic(topic)]
            if endpoint.node_name == node_name
        }  # fmt: skip

    def gaps(self, nodes) -> list[str]:
        """What is missing before the inputs may go to ``nodes``."""
        if self.forgotten & self._endpoints("policy") or self.forgotten & self._endpoints(
            "preprocess"
        ):
            return ["the killed node's endpoints to be gone"]
        waiting = unready_nodes(self.statuses, nodes)
        if waiting:
            return [f"nodes {waiting} to be ready"]
        records = {name: self.statuses[name] for name in nodes}
        node = self.node
        topics = {t for r in records.values() for key in ("publishers", "subscribers")
                  for t in r.get(key, {})}  # fmt: skip
        subscriptions = [(ACTION, self.matched())] if "policy" in nodes else []
        return connection_gaps(
            records,
            [(p.topic_name, p.get_subscription_count()) for p in self.inputs.values()],
            subscriptions,
            {t: (node.count_publishers(t), node.count_subscribers(t)) for t in topics},
        )

    def spin_until(self, condition, timeout_s: float):
        """``condition()`` once true, else None after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not (result := condition()):
            if time.monotonic() > deadline:
                return None
            self.executor.spin_once(timeout_sec=0.02)
        return result

    def publish(self, command: dict) -> None:
        for port, publisher in self.inputs.items():
            message = Float32MultiArray()
            message.data = array.array("f", np.asarray(command[port], np.float32).tobytes())
            publisher.publish(message)

    def step(self, command: dict) -> dict:
        start = time.monotonic()
        if not self.spin_until(lambda: not self.gaps(NODES), command["timeout_s"]):
            return {"action": None, "last": self.actions[-3:], "why": self.gaps(NODES)}
        before = len(self.actions)
        expect = np.asarray(command["expect"], np.float32)

        def answered():
            return [a for a in self.actions[before:]
                    if len(a) == expect.size and np.allclose(a, expect, atol=1e-5)]  # fmt: skip

        self.publish(command)
        records = self.records["policy"]

        def answered_or_sent_again():
            nonlocal records
            if found := answered():
                return found
            if self.records["policy"] > records:  # policy reported, no answer: again
                records = self.records["policy"]
                self.publish(command)
            return None

        left = command["timeout_s"] - (time.monotonic() - start)
        found = self.spin_until(answered_or_sent_again, max(left, 0.0))
        actions, self.actions = self.actions, []
        if not found:
            obs = f"{NAMESPACE}/preprocess/obs"
            seen = [(e.node_name, bytes(e.endpoint_gid).hex()[-8:])
                     for e in self.node.get_subscriptions_info_by_topic(obs)]  # fmt: skip
            why = f"no answer; statuses {self.statuses}; obs subscriptions: {seen}"
            return {"action": None, "last": actions[-3:], "why": why}
        return {"action": found[0], "seconds": time.monotonic() - start, "actions": actions}

    def forget(self, command: dict) -> dict:
        # which endpoint is whose comes with the nodes' discovery info (ros_discovery_info),
        # which can come later than the endpoints themselves (seen on Jazzy after the link went
        # down and up): wait until the node's endpoints are named, 20 s at most
        deadline = time.monotonic() + 20.0
        while not self._endpoints(command["forget"]) and time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.05)
        self.forgotten = self._endpoints(command["forget"])
        self.statuses.pop(command["forget"], None)
        return {"forgotten": len(self.forgotten)}


def main() -> int:
    client = Client()
    print(json.dumps({"ready": True}), flush=True)
    try:
        for line in sys.stdin:
            command = json.loads(line)
            if "forget" in command:
                answer = client.forget(command)
            elif "publish_only" in command:
                client.publish(command)
                answer = {"published": True}
            else:
                answer = client.step(command)
            print(json.dumps(answer), flush=True)
    finally:
        client.node.destroy_node()
        rclpy.shutdown(context=client.context)
    return 0


if __name__ == "__main__":
    sys.exit(main())
