"""Whether the graph's stand-in watches this process: :class:`StandInHandshake`.

A node of a graph with a stand-in (:mod:`leapp_ros.run.stand_in`; the node's ``stand_in``
parameter names it) commands after an activation only once the stand-in's record says it
watches this process and stands in for none of the node's pipeline nodes any more: the
stand-in publishes a dead process's safe action until it sees the restarted node active, and
the node's first command must come after its last one, never between two. Without the wait
a safe action could follow the first command of a restarted node (the stand-in learns of the
activation over a topic of its own), and a process that crashed right after its start would
go uncovered. The record is ``<namespace>/_leapp/stand_in`` (JSON, reliable, transient
local): ``name`` (the stand-in's node), ``nodes`` (the pipeline nodes it is responsible
for), ``watching`` (pipeline node -> pid of its last status record) and
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
        self._records: dict[str, dict[str, Any]] = {}  # stand-in node -> its latest record
        profile = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        node.create_subscription(String, STAND_IN_TOPIC, self._take, profile)

    def clear(self) -> bool:
        """Whether a stand-in responsible for the node's pipeline nodes has spoken, and each
        stand-in responsible for one of them watches this process for it and stands in for
        none of them (one stand-in per host of a graph split over hosts; each speaks on the
        same topic for the nodes of its host)."""
        names, pid = self._names(), os.getpid()
        responsible = False
        for record in self._records.values():
            ours = [name for name in names if name in record.get("nodes", ())]
            watching, covering = record.get("watching", {}), record.get("covering", {})
            if any(watching.get(n) != pid or n in covering for n in ours):
                return False
            responsible = responsible or bool(ours)
        return responsible

    def _take(self, message: Any) -> None:
        try:
            record = json.loads(message.data)
        except ValueError:
            return
        if isinstance(record, dict) and isinstance(record.get("watching"), dict):
            self._records[str(record.get("name", ""))] = record
            self._on_record()
