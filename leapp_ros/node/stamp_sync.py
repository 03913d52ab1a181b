"""Sets of a node's triggering inputs matched by header stamp (``sync: exact | approximate``).

With ``sync: arrival`` (the default, and the only rule for messages without a header) a node
fires once every triggering topic brought a new message. Robot messages carry the time they
were measured (``header.stamp``: JointState, Imu, TwistStamped, PoseStamped, Odometry, Image,
PointCloud2), so a node can instead fire on the messages *of one instant*, however the
middleware interleaved them (the MultiArray of a node fed by a camera frame carries the frame's
stamp as its tick, which stands for its stamp here: :func:`framed_nodes`):

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

import time
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from leapp_ros.plan.bindings import IMAGE, POINT_CLOUD2
from leapp_ros.plan.pipeline import Firing, InputPlan
from leapp_ros.plan.settings import StartupError

__all__ = [
    "FRAME_TYPES",
    "StampSync",
    "framed_nodes",
    "from_framed",
    "gather_by_stamp",
    "stamp_sync",
    "synced_callback",
    "take_set",
]

_DEPTH = 8  # messages kept per topic while waiting for their partners
FRAME_TYPES = (IMAGE, POINT_CLOUD2)  # camera frames: their stamp is the tick of a node's runs


def stamp_sync(firing: Firing) -> StampSync | None:
    """The stamp sync a node's firing rule asks for (None for ``sync: arrival``)."""
    if firing.sync == "arrival":
        return None
    return StampSync(firing.sync, round(firing.sync_slop_s * 1e9))


def gather_by_stamp(
    sync: StampSync,
    node: str,
    reader: Any,
    ports: Sequence[InputPlan],
    triggering: Any,
    framed: frozenset[str] = frozenset(),
) -> bool:
    """Add ``reader``'s topic to ``sync`` when it feeds an input of ``ports`` whose index is
    in ``triggering`` (True then). A stamped robot message is gathered by its header stamp, a
    MultiArray from a pipeline node of ``framed`` (:func:`framed_nodes`) by its tick, the
    stamp of the camera frame it was computed from.

    Raises:
        StartupError: that topic carries no header stamp, nor a frame's stamp as its tick:
            such inputs can only be gathered by arrival.
    """
    fed = [ports[i] for i in reader.indices if i in triggering]
    if not fed:
        return False
    names = [port.port for port in fed]
    stamped = hasattr(reader.message_class(), "header")
    if not all(
        (port.kind == "external" and stamped) or from_framed([port], [0], framed) for port in fed
    ):
        raise StartupError(
            f"node {node!r}: sync {sync.mode!r} matches inputs by header stamp, but input(s) "
            f"{names} on {reader.topic} come as {reader.message_type or 'a MultiArray'}, "
            "which has none (or from a pipeline node that no camera frame feeds); stamped "
            "inputs are JointState, Imu, TwistStamped, PoseStamped, Odometry, Image and "
            "PointCloud2, and the outputs of a node fed by an Image or PointCloud2: use "
            "sync: arrival for this node"
        )
    sync.add_topic(id(reader))
    return True


def from_framed(ports: Sequence[InputPlan], indices: Sequence[int], framed: Any) -> bool:
    """Whether the inputs ``indices`` of ``ports`` all come from pipeline nodes of ``framed``
    (their ticks are camera frames' stamps)."""
    return all(
        ports[i].kind == "data_flow" and (ports[i].source or "").split("/", 1)[0] in framed
        for i in indices
    )


def framed_nodes(plan: Any) -> frozenset[str]:
    """The nodes of the pipeline ``plan`` whose runs carry a camera frame's header stamp as
    their tick (:mod:`leapp_ros.node.input_sets`): fed by a frame, or by such a node."""
    framed: set[str] = set()
    grown = True
    while grown:
        grown = False
        for node in plan.nodes:
            if node.name not in framed and any(
                (port.topic is not None and port.message_type in FRAME_TYPES)
                or from_framed([port], [0], framed)
                for port in node.inputs
            ):
                framed.add(node.name)
                grown = True
    return frozenset(framed)


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


def synced_callback(
    data: Any,
    reader: Any,
    decode: Callable[[Any], list[Any] | None],
    slots: list[tuple[int, Hashable]],
    sets: Any,
    sync: StampSync,
    fire: Callable[[float], None],
    skip: Callable[[str], bool] | None,
    stamp_of: Callable[[Any], int | None],
) -> Callable[[Any], None]:
    """What the subscription of a triggering topic gathered by stamp (``stamp_of``) calls
    with each message, for the data path ``data``
    (:meth:`leapp_ros.node.data_path.NodeData.input_callback`): a set fires once one message
    of each triggering topic of one instant came; a rejected message spoils the set of its
    stamp."""
    key = id(reader)

    def on_message(message: Any) -> None:
        if skip is not None and skip(reader.resolved):
            return
        stamp = stamp_of(message)
        decoded = decode(message)
        if decoded is None:
            if sync.reject(key, stamp):
                data.incomplete_sets += 1
            return
        now = time.monotonic()
        entry = (data, slots, decoded, now)
        matched = sync.add(key, stamp if stamp is not None else 0, entry)
        if matched is None:
            return
        take_set(matched, sets, None)
        if sets.framed:
            sets.stamp = stamp  # the set's instant (approximate: its newest message's)
        fire(now)

    return on_message


def take_set(matched: Mapping[Hashable, Any], sets: Any, tick: int | None) -> None:
    """Make the members of a set gathered by stamp or tick (``(data path, slots, values,
    arrival)`` per topic) the current values, arrival times and ticks of their inputs
    (``sets``: the node's :class:`~leapp_ros.node.input_sets.InputSets`)."""
    stamps, ticks = sets.stamps, sets.ticks
    for data, slots, values, arrived in matched.values():
        current = data.values
        for (index, key), value in zip(slots, values, strict=True):
            current[index] = value
            stamps[key] = arrived
            ticks[key] = tick
