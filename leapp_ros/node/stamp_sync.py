"""Sets of a node's triggering inputs matched by header stamp (``sync: exact | approximate``).

With ``sync: arrival`` (the default, and the only rule for messages without a header) a node
fires once every triggering topic brought a new message. Robot messages carry the time they
were measured (``header.stamp``: JointState, Imu, TwistStamped, PoseStamped), so a node can
instead fire on the messages *of one instant*, however the middleware interleaved them:

- ``exact``: one message per triggering topic, all with the same stamp;
- ``approximate``: one message per topic, the stamps within ``sync_slop_ms`` of each other
  (the newest message and, of each other topic, the one closest to it in time), as
  message_filters' ApproximateTime pairs sensors that are not triggered together.

On a timer (``firing: timer``) the same sets are gathered: a whole set becomes the inputs'
values, and each tick runs on the newest one.

A :class:`StampSync` keeps the last few messages of each topic. When a set forms, it is taken
whole, and every queued message not newer than its member of the set is dropped: an older
message can no longer be part of a newer set. A message the node rejects (malformed, NaN)
spoils the set of its stamp: the messages of that instant already queued are dropped, those
still to come are dropped on arrival, and the set counts once as incomplete.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from typing import Any

from leapp_ros.plan.pipeline import Firing, InputPlan
from leapp_ros.plan.settings import StartupError

__all__ = ["StampSync", "gather_by_stamp", "stamp_sync"]

_DEPTH = 8  # messages kept per topic while waiting for their partners


def stamp_sync(firing: Firing) -> StampSync | None:
    """The stamp sync a node's firing rule asks for (None for ``sync: arrival``)."""
    if firing.sync == "arrival":
        return None
    return StampSync(firing.sync, round(firing.sync_slop_s * 1e9))


def gather_by_stamp(
    sync: StampSync, node: str, reader: Any, ports: Sequence[InputPlan], triggering: Any
) -> bool:
    """Add ``reader``'s topic to ``sync`` when it feeds an input of ``ports`` whose index is
    in ``triggering`` (True then).

    Raises:
        StartupError: that topic carries no header stamp, or it comes from another pipeline
            node: such inputs can only be gathered by arrival.
    """
    fed = [ports[i] for i in reader.indices if i in triggering]
    if not fed:
        return False
    names = [port.port for port in fed]
    if any(port.kind != "external" for port in fed) or not hasattr(
        reader.message_class(), "header"
    ):
        raise StartupError(
            f"node {node!r}: sync {sync.mode!r} matches inputs by header stamp, but input(s) "
            f"{names} on {reader.topic} come as {reader.message_type or 'a MultiArray'}, "
            "which has none (or from another pipeline node); stamped inputs are JointState, "
            "Imu, TwistStamped and PoseStamped: use sync: arrival for this node"
        )
    sync.add_topic(id(reader))
    return True


class StampSync:
    """Gathers one message per topic of ``topics`` by stamp (see the module documentation).

    Args:
        mode: ``"exact"`` or ``"approximate"``.
        slop_ns: the largest spread of stamps within one approximate set.
        topics: a key per triggering topic (or :meth:`add_topic` each).
        depth: the messages kept per topic while waiting for their partners.
    """

    def __init__(
        self, mode: str, slop_ns: int = 0, topics: Sequence[Hashable] = (), depth: int = _DEPTH
    ):
        if mode not in ("exact", "approximate"):
            raise ValueError(f"a stamp sync is 'exact' or 'approximate', not {mode!r}")
        self.mode = mode
        self.slop_ns = slop_ns if mode == "approximate" else 0
        self._depth = depth
        self._queues: dict[Hashable, deque[tuple[int, Any]]] = {}
        self._spoilt: dict[Hashable, deque[int]] = {}
        for topic in topics:
            self.add_topic(topic)

    def add_topic(self, topic: Hashable) -> None:
        """Gather messages of ``topic`` too: no set forms without one of it."""
        self._queues[topic] = deque(maxlen=self._depth)
        self._spoilt[topic] = deque(maxlen=self._depth)

    def clear(self) -> None:
        """Forget every queued message (a set formed otherwise: none of them may join a
        later one); spoilt instants stay spoilt."""
        for queue in self._queues.values():
            queue.clear()

    def add(self, topic: Hashable, stamp: int, entry: Any) -> dict[Hashable, Any] | None:
        """Queue ``entry`` (a decoded message of ``topic`` stamped ``stamp``); the set it
        completes, ``{topic: entry}``, taken out of the queues, or None."""
        if self._in_spoilt_set(topic, stamp):
            return None
        self._queues[topic].append((stamp, entry))
        chosen = {topic: (stamp, entry)}
        for other, queue in self._queues.items():
            if other == topic:
                continue
            best = self._partner(queue, stamp)
            if best is None:
                return None
            chosen[other] = best
        stamps = [stamp for stamp, _ in chosen.values()]
        if max(stamps) - min(stamps) > self.slop_ns:
            return None
        for other, (used, _) in chosen.items():
            queue = self._queues[other]
            while queue and queue[0][0] <= used:
                queue.popleft()
        oldest = min(stamps) - self.slop_ns
        for spoilt in self._spoilt.values():
            while spoilt and spoilt[0] < oldest:
                spoilt.popleft()
        return {other: entry for other, (_, entry) in chosen.items()}

    def reject(self, topic: Hashable, stamp: int | None) -> bool:
        """``topic``'s message of ``stamp`` was rejected: its set is spoilt. Without a stamp
        (a message too broken to read one) every partial set is dropped. Whether this spoilt
        a set no other rejected message had spoilt already."""
        if stamp is None:
            for queue in self._queues.values():
                queue.clear()
            return True
        new = not self._in_spoilt_set(topic, stamp)
        self._spoilt[topic].append(stamp)
        for other, queue in self._queues.items():
            if other != topic:
                kept = [item for item in queue if abs(item[0] - stamp) > self.slop_ns]
                queue.clear()
                queue.extend(kept)
        return new

    def _partner(self, queue: deque[tuple[int, Any]], stamp: int) -> tuple[int, Any] | None:
        if not queue:
            return None
        if self.mode == "exact":
            return next((item for item in queue if item[0] == stamp), None)
        return min(queue, key=lambda item: abs(item[0] - stamp))

    def _in_spoilt_set(self, topic: Hashable, stamp: int) -> bool:
        return any(
            abs(spoilt - stamp) <= self.slop_ns
            for other, stamps in self._spoilt.items()
            if other != topic
            for spoilt in stamps
        )
