"""The seed graph's robot for the stand-in tests: inputs streamed as a robot's sensors send them,
every command taken with its arrival time and source timestamp, the stand-in's records and the
ERRORs on ``/diagnostics``; and a parameters file giving the policy's ``action`` safe values."""

from __future__ import annotations

import array
import json
import time
from pathlib import Path

import torch
import yaml

from leapp_ros.plan.pipeline import STAND_IN_TOPIC
from leapp_ros.testing import Probe
from leapp_ros.testing.probe import qos
from support.ros import eager_seed

__all__ = ["NAMESPACE", "SAFE", "Robot", "is_safe", "safe_values_params"]

NAMESPACE = "/torch_pipeline"
SAFE = [0.1, -0.1, 0.2, -0.2, 0.0, 0.05]
INPUT_PERIOD_S = 0.02  # the robot's sensors: one input pair per 20 ms
WAIT_S = 90.0  # a generous bound on any one event (a restart loads torch on a busy machine)


def safe_values_params(folder: Path) -> Path:
    """A parameters file: the policy's ``action`` has the safe values :data:`SAFE`."""
    path = folder / "robot.yaml"
    document = {"/**": {"ros__parameters": {"ports": {"action": {"safe_values": SAFE}}}}}
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def is_safe(values) -> bool:
    return torch.allclose(torch.tensor(values), torch.tensor(SAFE), atol=1e-6)


class Robot:
    """The probe as a robot: streams one input pair, takes every command with its arrival
    time (monotonic), the stand-in's records and the diagnostics."""

    def __init__(self, probe: Probe, seed):
        from diagnostic_msgs.msg import DiagnosticArray
        from std_msgs.msg import Float32MultiArray, String

        self.probe = probe
        self.state, self.velocity = torch.randn(6), torch.randn(3)
        self.expected = eager_seed(seed, self.state, self.velocity)[1]
        node = probe.node
        self.commands: list[tuple[float, list[float]]] = []
        self.sent_at: list[int] = []  # each command's source timestamp (ns, system clock)
        self.records: list[dict] = []
        self.errors: list = []
        node.create_subscription(
            Float32MultiArray, f"{NAMESPACE}/policy/action",
            self._command, qos(depth=1000),
        )  # fmt: skip
        node.create_subscription(
            String, f"{NAMESPACE}/{STAND_IN_TOPIC}",
            lambda m: self.records.append(json.loads(m.data)),
            qos(depth=100, transient_local=True),
        )  # fmt: skip
        node.create_subscription(DiagnosticArray, "/diagnostics", self._diagnostics, 100)
        self._inputs = [
            (node.create_publisher(Float32MultiArray, f"{NAMESPACE}/preprocess/{port}", 1),
             Float32MultiArray(data=array.array("f", value.tolist())))
            for port, value in (("state", self.state), ("velocity", self.velocity))
        ]  # fmt: skip
        self._sent = 0.0

    def _command(self, message, info) -> None:
        self.commands.append((time.monotonic(), list(message.data)))
        self.sent_at.append(info["source_timestamp"])

    def _diagnostics(self, message) -> None:
        self.errors += [s for s in message.status if s.level == b"\x02"]

    def is_command(self, values) -> bool:
        return torch.allclose(torch.tensor(values), self.expected, rtol=1e-5, atol=1e-5)

    def run_until(self, condition, what: str, also=None):
        """Stream inputs and spin until ``condition()`` holds (``also()`` each slice)."""

        def step():
            now = time.monotonic()
            if now - self._sent >= INPUT_PERIOD_S:
                for publisher, message in self._inputs:
                    publisher.publish(message)
                self._sent = now
            if also is not None:
                also()
            return condition()

        return self.probe.spin_until(step, WAIT_S, what)

    def watching(self, node: str, pid: int) -> bool:
        return bool(self.records) and self.records[-1]["watching"].get(node) == pid

    def commands_since(self, index: int) -> list[list[float]]:
        return [values for _, values in self.commands[index:]]
