"""Whether the graph's stand-in watches this process: :class:`StandInHandshake`.

A node of a graph with a stand-in (:mod:`leapp_ros.run.stand_in`; the node's ``stand_in``
parameter names it) commands after an activation only once the stand-in's record says it
watches this process and stands in for none of the node's pipeline nodes any more: the
stand-in publishes a dead process's safe action until it sees the restarted node active, and
the node's first command must come after its last one, never between two. Without the wait
a safe action could follow the first command of a restarted node (the stand-in learns of the
activation over a topic of its own), and a process that crashed right after its start would
go uncovered. The record is ``<namespace>/_leapp/stand_in`` (JSON, reliable, transient
local): ``nodes`` (the pipeline nodes it is responsible for: a node it is not responsible
for does not wait), ``watching`` (pipeline node -> pid of its last status record) and
``covering`` (pipeline node -> the dead process it stands in for).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from leapp_ros.plan.pipeline import STAND_IN_TOPIC

__all__ = ["StandInHandshake"]


class StandInHandshake:
    """The stand-in's latest record as ``node`` sees it; ``on_record()`` after each.

    Args:
        node: the rclpy node subscribing (in the graph's namespace).
        names: the node's pipeline nodes (a function: a fused node knows them once
            configured).
        on_record: called after every record taken.
    """

    def __init__(
        self, node: Any, names: Callable[[], Sequence[str]], on_record: Callable[[], None]
    ):
        self._names = names
        self._on_record = on_record
        self._record: dict[str, Any] = {}
        profile = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        node.create_subscription(String, STAND_IN_TOPIC, self._take, profile)

    def clear(self) -> bool:
        """Whether the stand-in watches this process for each of the node's pipeline nodes it
        is responsible for and stands in for none of them (False before its first record)."""
        if not self._record:
            return False
        watching = self._record.get("watching", {})
        covering = self._record.get("covering", {})
        ours = [name for name in self._names() if name in self._record.get("nodes", ())]
        pid = os.getpid()
        return all(watching.get(n) == pid and n not in covering for n in ours)

    def _take(self, message: Any) -> None:
        try:
            record = json.loads(message.data)
        except ValueError:
            return
        if isinstance(record, dict) and isinstance(record.get("watching"), dict):
            self._record = record
            self._on_record()
