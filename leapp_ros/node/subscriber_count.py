"""How many subscriptions a publisher is matched with, kept up to date by its matched events.

The nodes skip encoding a message nobody takes (an intermediate output of the fused node, a
value the intra-process bus handed over already), which means asking each tick whether anyone
subscribes. ``Publisher.get_subscription_count()`` asks the ROS graph each time (about 1 us
here); a :class:`SubscriberCount` is told by the middleware when a subscription matches or
leaves (the publisher's ``matched`` event, delivered by the node's executor), so asking is
reading an int.

    count = SubscriberCount()
    publisher = node.create_publisher(..., event_callbacks=count.callbacks())
    if count(): publisher.publish(...)

A matched subscription is one the publisher sends to (its QoS compatible); the count starts at
zero, as a publisher does: every match, those made while it was created included, is an event.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SubscriberCount"]


class SubscriberCount:
    """The number of subscriptions matched with one publisher (see the module documentation);
    calling it returns the number."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def callbacks(self) -> Any:
        """The ``event_callbacks`` to create the publisher with."""
        from rclpy.event_handler import PublisherEventCallbacks

        return PublisherEventCallbacks(matched=self._on_matched)

    def _on_matched(self, info: Any) -> None:
        self.count = info.current_count

    def __call__(self) -> int:
        return self.count
