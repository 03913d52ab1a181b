"""The e-stop topic of a pipeline node (parameter ``estop_topic``, ``std_msgs/Bool``: true
engages the e-stop, false releases it).

The topic is subscribed twice: latched (reliable, transient local, depth 1), so a state
published before the node started still reaches it, and volatile, or a plain
``ros2 topic pub`` would never match. A latched publisher reaches both subscriptions; the copy
arriving within :data:`ESTOP_ECHO_S` of the same value on the other one is that same message
and is ignored, so each change is reported once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from std_msgs.msg import Bool

from leapp_ros.plan.pipeline import METADATA_QOS
from leapp_ros.plan.settings import qos_profile

__all__ = ["ESTOP_ECHO_S", "EstopSubscription"]

ESTOP_ECHO_S = 0.25  # an e-stop message seen on both subscriptions arrives this close together


class EstopSubscription:
    """Subscribe ``node`` to ``topic``; call ``on_estop(engaged, "topic <topic>")`` once per
    message (its echo on the other subscription left out)."""

    def __init__(self, node: Any, topic: str, on_estop: Callable[[bool, str], None]):
        self._topic = topic
        self._on_estop = on_estop
        self._seen: dict[bool, tuple[float, str]] = {}  # value: (when, subscription)
        latched = METADATA_QOS  # reliable, transient local, depth 1
        for qos in (latched, replace(latched, durability="volatile")):
            node.create_subscription(
                Bool, topic, partial(self._on_message, source=qos.durability), qos_profile(qos)
            )

    def _on_message(self, message: Any, source: str) -> None:
        # (No MessageInfo: rclpy's EventsExecutor fails on callbacks that take it.)
        engaged, now = bool(message.data), time.monotonic()
        seen = self._seen.get(engaged)
        if seen is not None and seen[1] != source and now - seen[0] < ESTOP_ECHO_S:
            return
        self._seen[engaged] = (now, source)
        self._on_estop(engaged, f"topic {self._topic}")
