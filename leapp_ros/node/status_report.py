"""What a pipeline node says about itself: its status records on ``_leapp/status`` and its
health on ``/diagnostics`` (:mod:`leapp_ros.node.diagnostics`).

A record is JSON (``std_msgs/String``) on ``_leapp/status`` (reliable, transient local, depth
1), one per pipeline node, built by :func:`status_record`::

    {"node": "preprocess", "state": "ready", "pid": 4242, "lifecycle": "active", "estop": false,
     "safe_action": false, "held": false, "firing": "inputs", "rate_hz": 50.0, "runs": 12,
     "received": 24, "dropped": 0, "stale": 0, "errors": 0,
     "nonfinite_inputs": 0, "nonfinite_outputs": 0, "incomplete_sets": 0, "timeouts": 0,
     "safe_actions": 0, "clamped": 0, "step_limited": 0, "cpu_latency_us": null,
     "cpu_affinity": null, "subscribers": {"/torch_pipeline/preprocess/obs": 1},
     "publishers": {"/torch_pipeline/preprocess/state": 1,
                    "/torch_pipeline/preprocess/velocity": 1},
     "received_on": {"/torch_pipeline/preprocess/state": 12,
                     "/torch_pipeline/preprocess/velocity": 12}}

(``firing`` and ``rate_hz``: the node's firing rule and its rate, the timer's with
``firing: timer``; ``pid``: the node's process, by which ``leapp-ros run`` knows its
processes ready;
``cpu_latency_us``: the CPU latency request held, ``cpu_affinity``: the CPUs pinned to, null
for none; ``subscribers``: the subscriptions each output's publisher matched; ``publishers``:
the publishers each input's subscription matched; with both a tester knows when every hop is
connected both ways, as a best-effort subscription drops what a publisher sent before it
matched; ``received_on``: the messages taken from each input topic, which ``received`` sums,
so a tester knows when an input it sent has been handled; a node on a robot adds its ramp-in,
guards and last policy switch: :mod:`leapp_ros.node.managed_node`,
:mod:`leapp_ros.node.policy_switch`.)

:class:`StatusReport` publishes the records once configured (``"state": "ready"``), then every
:data:`STATUS_PERIOD_S` and within :data:`STATUS_SOON_S` of any change in them (a counter, a
matched endpoint, the e-stop, the safe action), at most once per :data:`STATUS_SOON_S`: a
supervisor or a test sees an input counted, a publisher matched or the e-stop engaged at once,
not up to a second later; ``"state": "stopping"`` once on shutdown. ``/diagnostics`` goes out
every :data:`STATUS_PERIOD_S` and whenever a level changes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.duration import Duration
from std_msgs.msg import String

from leapp_ros.node.data_path import NodeData
from leapp_ros.node.diagnostics import DIAGNOSTICS_TOPIC, HealthReport
from leapp_ros.node.match_count import MatchCount
from leapp_ros.plan.pipeline import METADATA_QOS, STATUS_TOPIC
from leapp_ros.plan.settings import qos_profile

__all__ = ["STATUS_PERIOD_S", "STATUS_SOON_S", "StatusReport", "status_record"]

STATUS_PERIOD_S = 1.0
STATUS_SOON_S = 0.1  # a changed status record goes out within this, at most once per this

Records = Callable[[], list[dict[str, Any]]]


def status_record(
    data: NodeData,
    publishers: Sequence[Any],
    inputs: Sequence[tuple[str, MatchCount]],
    state: str,
    operation: dict[str, Any],
    cpu: dict[str, Any],
) -> dict[str, Any]:
    """The record of the pipeline node ``data``: its ``operation`` (lifecycle, e-stop, safe
    action), counters, ``cpu`` placement, and the endpoints its ``publishers`` (outputs) and
    ``inputs`` (``(topic, matched publishers)``) matched."""
    return {
        "node": data.name,
        "state": state,
        "pid": os.getpid(),  # which process: the runner's readiness (leapp_ros.run.status_watch)
        **operation,
        **data.counts(),
        **cpu,
        "subscribers": {
            publisher.topic_name: publisher.get_subscription_count() for publisher in publishers
        },
        "publishers": {topic: count() for topic, count in inputs},
        "received_on": data.received_on(),
    }


class StatusReport:
    """The ``_leapp/status`` and ``/diagnostics`` publishers of ``node`` and their timers.

    Args:
        node: the rclpy node publishing.
        records: the status records of a state (``"ready"``, ``"stopping"``).
        health: the records :class:`HealthReport` rates (the status records with the node's
            lifecycle, configure error and last input set).
        live: whether the node is configured (inactive or active): only then the status
            records go out on their own.
    """

    def __init__(
        self,
        node: Any,
        *,
        records: Callable[[str], list[dict[str, Any]]],
        health: Records,
        live: Callable[[], bool],
    ):
        self._node = node
        self._records = records
        self._health_records = health
        self._live = live
        self._status = node.create_publisher(String, STATUS_TOPIC, qos_profile(METADATA_QOS))
        self._diagnostics = node.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, 10)
        self._health = HealthReport(node.get_namespace())
        self._sent: list[str] = []  # the records last published (JSON)
        self.timers = [
            node.create_timer(STATUS_PERIOD_S, self._on_period),
            node.create_timer(STATUS_SOON_S, self._on_soon),
        ]

    def publish(self, state: str, *, only_changed: bool = False) -> None:
        """Publish the records of ``state`` (``only_changed``: if they differ from the last)."""
        texts = [json.dumps(record) for record in self._records(state)]
        if only_changed and texts == self._sent:
            return
        for text in texts:
            self._status.publish(String(data=text))
        self._sent = texts

    def report_change(self) -> None:
        """Publish diagnostics now if a level changed since the last report."""
        if self._health.changed(self._health_records()):
            self._publish_diagnostics(periodic=False)

    def wait_acknowledged(self, seconds: float) -> None:
        """Give reliable subscribers (a supervisor) ``seconds`` to acknowledge the last
        records."""
        self._status.wait_for_all_acked(Duration(seconds=seconds))

    def _publish_diagnostics(self, *, periodic: bool = True) -> None:
        records = self._health_records()
        now = self._node.get_clock().now()
        statuses = self._health.statuses(records, time.monotonic(), periodic=periodic)
        self._diagnostics.publish(self._health.array(statuses, now.to_msg()))

    def _on_period(self) -> None:  # no parameters: rclpy would pass a TimerInfo
        if self._live():
            self.publish("ready")
        self._publish_diagnostics()

    def _on_soon(self) -> None:
        if self._live():
            self.publish("ready", only_changed=True)
