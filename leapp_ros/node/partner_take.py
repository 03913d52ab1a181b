"""One wake per input set: the rest of a set taken straight from its subscriptions.

A node that fires on a set of triggering inputs (``firing: inputs``, ``sync: arrival``) is
woken by the executor once per message: the first message of a set arrives, its callback
stores the value and returns, the executor goes back to its queue, takes the next message and
calls that topic's callback, and so on until the set is complete. By the time the first
callback runs, the other messages of the set have usually arrived too (a sender publishes
them back to back, and a wake-up takes longer than that), and each extra trip through the
executor costs its bookkeeping and a cold Python frame.

:class:`PartnerTake` lets the first callback finish the set itself: once a topic's first
message of the set left it incomplete, it takes the message waiting on each subscription the
set still needs
(``take_message`` on the subscription's handle, as the executor would) and hands it to that
subscription's own callback, which decodes, checks, counts and fires exactly as when the
executor calls it. A subscription with nothing waiting is left alone; its message is handled
by the executor when it comes. The executor's own event for a message taken here then finds
the subscription empty and calls nothing (rclpy's executors skip a take that returns none).

A newer message of a topic whose message of the set came already (joint states at 500 Hz
while the set waits for a camera's latent) takes nothing: the other subscriptions were tried
when the topic's first message came, and what arrived on them since is the executor's to hand
over, in order (a take per joint state would cost more than the wake it saves).

What changes is only *when* a waiting message is handled: right after its partner instead of
after the executor's next trip. Each topic's messages are still handled in order, each by the
callback of its subscription, and the take stops once the set fired (or was dropped, when a
message of it was rejected), so no message of the next set is taken early.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Hashable
from typing import Any

__all__ = ["PartnerTake", "partner_take"]

logger = logging.getLogger(__name__)


class PartnerTake:
    """The triggering subscriptions of one node and the set they gather (see the module
    documentation).

    Args:
        pending: the node's set of trigger keys the set being gathered still waits for
            (the same object its input callbacks update).
    """

    __slots__ = ("_busy", "_entries", "_pending")

    def __init__(self, pending: set[Any]):
        self._pending = pending
        self._entries: list[tuple[frozenset[Hashable], Any, Any, bool, Callable[[Any], None]]]
        self._entries = []
        self._busy = False

    def add(
        self, subscription: Any, keys: Collection[Hashable], callback: Callable[[Any], None]
    ) -> None:
        """Take for ``subscription`` (an rclpy subscription whose callback is ``callback``),
        which feeds the trigger keys ``keys``; a subscription feeding no trigger is ignored."""
        keys = frozenset(keys)
        if keys:
            entry = (keys, subscription.handle, subscription.msg_type, subscription.raw, callback)
            self._entries.append(entry)

    def __call__(self, origin: frozenset[Hashable]) -> None:
        """Complete the set that a message of the subscription feeding ``origin`` (its
        trigger keys) just left incomplete, with the messages already waiting."""
        if self._busy or len(self._entries) < 2:
            return  # a callback called from here: the outer loop goes on
        self._busy = True
        pending = self._pending
        try:
            for keys, handle, message_type, raw, callback in self._entries:
                if not origin.isdisjoint(pending):
                    return  # the set fired or was dropped: the next one is the executor's
                if not keys <= pending:
                    continue  # the origin itself, or a topic whose message came already
                try:
                    taken = handle.take_message(message_type, raw)
                except Exception as e:  # destroyed meanwhile: the executor's take decides
                    logger.debug("no take from a partner subscription: %s", e)
                    continue
                if taken is not None:
                    callback(taken[0])
        finally:
            self._busy = False


def partner_take(firing: Any, sets: Any, sync: Any) -> PartnerTake | None:
    """What completes a set from the waiting messages of its other subscriptions, for a node
    that fires on input sets gathered by arrival (``firing.mode`` inputs, no ``sync``; the
    node's input ``sets``); None otherwise."""
    if firing.mode != "inputs" or sync is not None:
        return None
    return PartnerTake(sets.pending)
