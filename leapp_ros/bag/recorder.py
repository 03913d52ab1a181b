"""Record a running graph's topics into a rosbag2 folder: ``leapp-ros record``.

:class:`Recorder` is an rclpy node on a private context (in the domain and discovery range of
the environment, as ``ros2 bag record``) with one serialized (``raw=True``) subscription per
topic, writing each message as it arrives, stamped with the time its publisher sent it (the
DDS source timestamp; the receive time where the middleware gives none). The send time keeps
the order in which the graph's inputs were published: a recorder that wakes with messages of
several topics waiting takes them one subscription after the other, so their receive times can
put a tick's second input after the next tick's first, which a replay would read as a tick
with a superseded input (rosbag2 keeps the send time too, as each message's publish time).
A topic is subscribed once its first publisher is discovered, with the QoS those publishers
offer (reliable when all of them are, else best effort; keep last 100), and that QoS goes into
the bag's metadata; topics that never had a publisher are in the bag with no messages.
:func:`record` runs it until ``duration_s`` has passed or its ``stop`` event is set (the
command sets it on SIGINT / SIGTERM), then closes the bag, which is complete from then on.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from leapp_ros.bag.bag_file import BagWriter
from leapp_ros.messages.robot_codecs import message_class
from leapp_ros.plan.pipeline import PipelinePlan, QosPlan

__all__ = ["Recorder", "record", "recorded_topics"]

logger = logging.getLogger(__name__)

_DEPTH = 100
_SLICE_S = 0.05
_DISCOVERY_S = 0.25  # how often topics without a publisher are looked at again


def recorded_topics(plan: PipelinePlan, topics: Sequence[str] = ()) -> dict[str, str]:
    """``{topic: type}`` to record: ``topics`` (absolute, or relative to the namespace; each
    must be a data topic of the plan) or, by default, every data topic of the graph: each
    external input and each node output.

    Raises:
        BagError: a topic is none of the graph's.
    """
    from leapp_ros.bag.bag_file import BagError

    planned = dict(plan.topics())
    if not topics:
        return planned
    chosen = {}
    for name in topics:
        topic = name if name.startswith("/") else plan.resolve(name)
        if topic not in planned:
            raise BagError(
                f"topic {name!r} is no data topic of graph {plan.namespace}; its topics are "
                f"{', '.join(planned)}"
            )
        chosen[topic] = planned[topic]
    return chosen


class Recorder:
    """Records ``topics`` (``{absolute topic: type}``) into ``writer`` (see the module
    documentation). Spin it with :meth:`spin_once`; :meth:`close` ends the node (not the bag).
    """

    def __init__(self, topics: dict[str, str], writer: BagWriter, domain_id: int | None = None):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        self.topics = dict(topics)
        self.writer = writer
        self.context = Context()
        rclpy.init(
            context=self.context,
            domain_id=domain_id,
            signal_handler_options=SignalHandlerOptions.NO,
        )
        # one name per process: two recorders of one graph are two nodes
        self.node = rclpy.create_node(f"leapp_recorder_{os.getpid()}", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._subscriptions: dict[str, Any] = {}
        self._looked = 0.0

    @property
    def subscribed(self) -> tuple[str, ...]:
        """The topics subscribed so far (their publishers were discovered)."""
        return tuple(self._subscriptions)

    def spin_once(self, timeout_s: float = _SLICE_S) -> None:
        """Subscribe to newly published topics, then handle what arrived."""
        now = time.monotonic()
        if len(self._subscriptions) < len(self.topics) and now - self._looked > _DISCOVERY_S:
            self._looked = now
            for topic in self.topics:
                if topic not in self._subscriptions:
                    self._subscribe(topic)
        self.executor.spin_once(timeout_sec=timeout_s)

    def _subscribe(self, topic: str) -> None:
        publishers = self.node.get_publishers_info_by_topic(topic)
        if not publishers:
            return
        offered = [_qos_plan(info.qos_profile) for info in publishers]
        reliable = all(profile.reliability == "reliable" for profile in offered)
        kind = self.topics[topic]
        self.writer.add_topic(topic, kind, offered)
        writer = self.writer

        def on_message(data: bytes, info: Any, topic: str = topic) -> None:
            writer.write(topic, info.get("source_timestamp") or time.time_ns(), data)

        self._subscriptions[topic] = self.node.create_subscription(
            message_class(kind), topic, on_message, _qos(reliable), raw=True
        )
        logger.info(
            "recording %s (%s, %s)", topic, kind, "reliable" if reliable else "best effort"
        )

    def close(self) -> None:
        """Destroy the node and its context (the writer stays open)."""
        if self.context.ok():
            self.executor.shutdown()
            self.node.destroy_node()
        self.context.try_shutdown()


def record(
    plan: PipelinePlan,
    out: str | os.PathLike[str],
    *,
    topics: Sequence[str] = (),
    duration_s: float | None = None,
    storage: str = "mcap",
    stop: threading.Event | None = None,
) -> dict[str, int]:
    """Record the topics of ``plan``'s graph (see :func:`recorded_topics`) into the new bag
    folder ``out`` until ``duration_s`` passed or ``stop`` is set (from a signal handler or
    another thread); the number of messages per topic.

    Raises:
        BagError: a topic is none of the graph's, ``out`` exists, an unknown storage.
    """
    chosen = recorded_topics(plan, topics)
    writer = BagWriter(Path(out), storage)
    try:
        stop = stop or threading.Event()
        node = Recorder(chosen, writer)
        try:
            logger.info("recording %d topic(s) of %s into %s", len(chosen), plan.namespace, out)
            deadline = None if duration_s is None else time.monotonic() + duration_s
            while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
                node.spin_once()
        finally:
            node.close()
        for topic, kind in chosen.items():
            writer.add_topic(topic, kind)  # topics never published: listed, no messages
    finally:
        writer.close()
    return {topic: writer.counts.get(topic, 0) for topic in chosen}


def _qos(reliable: bool) -> Any:
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=_DEPTH,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.VOLATILE,
    )


def _qos_plan(profile: Any) -> QosPlan:
    from rclpy.qos import DurabilityPolicy, ReliabilityPolicy

    reliable = profile.reliability == ReliabilityPolicy.RELIABLE
    latched = profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
    return QosPlan(
        "reliable" if reliable else "best_effort",
        "transient_local" if latched else "volatile",
        max(int(profile.depth), 1),
    )
