"""The output topics of one pipeline node: per output port a publisher, its message writer and
a count of the subscriptions it matched; a node on an intra-process bus hands each value to
the local readers first (:func:`leapp_ros.node.intra_process.publish_through`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rclpy.qos_overriding_options import QoSOverridingOptions

from leapp_ros.messages.topic_io import OutputWriter
from leapp_ros.node.intra_process import IntraProcessBus, publish_through
from leapp_ros.node.match_count import MatchCount
from leapp_ros.plan.settings import qos_profile

__all__ = ["OutputTopics"]


class OutputTopics:
    """Advertise one topic per writer's port on ``node`` (and on ``bus``, when given).

    ``publishers`` are in port order, ``topics`` their full names (after remapping),
    ``stamped`` whether a message wants a stamp, ``exits`` the functions that withdraw the
    topics from the bus.
    """

    def __init__(
        self,
        node: Any,
        writers: Sequence[OutputWriter],
        *,
        overrides: QoSOverridingOptions,
        bus: IntraProcessBus | None = None,
    ):
        self.writers = list(writers)
        self.subscriber_counts = [MatchCount() for _ in self.writers]
        self.publishers = [
            node.create_publisher(
                writer.message_class,
                writer.port.topic,
                qos_profile(writer.port.qos),
                qos_overriding_options=overrides,
                event_callbacks=count.publisher_callbacks(),
            )
            for writer, count in zip(self.writers, self.subscriber_counts, strict=True)
        ]
        self.topics = [publisher.topic_name for publisher in self.publishers]
        self.stamped = any(writer.stamped for writer in self.writers)
        self._bus = bus
        self.exits: list[Callable[[], None]] = (
            [bus.advertise(topic) for topic in self.topics] if bus is not None else []
        )

    def publish(self, values: Sequence[Any], stamp: Any = None, tick: int | None = None) -> None:
        """Publish one value per output port, each MultiArray carrying ``tick`` (the instant
        of the set they were computed from; None: none); a value of None is not published
        (an output whose safe action is silent)."""
        if self._bus is not None:
            publish_through(
                self._bus,
                self.topics,
                self.publishers,
                self.writers,
                self.subscriber_counts,
                values,
                stamp,
                tick,
            )
            return
        for publisher, writer, value in zip(self.publishers, self.writers, values, strict=True):
            if value is not None:
                publisher.publish(writer.write(value, stamp, tick))

    def publish_one(self, index: int, value: Any, stamp: Any = None) -> None:
        """Publish ``value`` on output ``index`` alone (a target between results)."""
        values: list[Any] = [None] * len(self.writers)
        values[index] = value
        self.publish(values, stamp)
