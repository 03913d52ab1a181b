"""How many endpoints a publisher or a subscription is matched with, kept up to date by its
matched events.

The nodes skip encoding a message nobody takes (an intermediate output of the fused node, a
value the intra-process bus handed over already), which means asking each tick whether anyone
subscribes. ``Publisher.get_subscription_count()`` asks the ROS graph each time; a
:class:`MatchCount` is told by the middleware when an endpoint matches or leaves (the
``matched`` event, delivered by the node's executor), so asking is reading an int. The status
record reports, for each input subscription, the publishers it matched this way (a subscription
drops what a publisher sent before the subscription matched it, so a tester waits for it).

    count = MatchCount()
    publisher = node.create_publisher(..., event_callbacks=count.publisher_callbacks())
    if count(): publisher.publish(...)

A matched endpoint is one that exchanges messages with this one (its QoS compatible); the
count starts at zero, as the endpoint does: every match, those made while it was created
included, is an event.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MatchCount"]


class MatchCount:
    """The number of endpoints matched with one publisher or subscription (see the module
    documentation); calling it returns the number."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def publisher_callbacks(self) -> Any:
        """The ``event_callbacks`` to create a publisher with: counts its subscriptions."""
        from rclpy.event_handler import PublisherEventCallbacks

        return PublisherEventCallbacks(matched=self._on_matched)

    def subscription_callbacks(self) -> Any:
        """The ``event_callbacks`` to create a subscription with: counts its publishers."""
        from rclpy.event_handler import SubscriptionEventCallbacks

        return SubscriptionEventCallbacks(matched=self._on_matched)

    def _on_matched(self, info: Any) -> None:
        self.count = info.current_count

    def __call__(self) -> int:
        return self.count
