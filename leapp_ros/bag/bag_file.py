"""rosbag2 folders read and written with ``rosbags`` (pure Python; rosbag2 itself has no wheel).

:func:`read_bag` reads every message of a bag (MCAP or SQLite3 storage), checked as a whole
before anything uses it: a missing folder, unreadable metadata, a truncated or corrupted
storage file is a :class:`BagError` naming the file. :class:`BagWriter` writes one (MCAP by
default, SQLite3 on request) with each topic's message definition (from the standard types of
ROS 2 Kilted, which the other distributions share) and the QoS its publishers offered, in
rosbag2's format version 8, which ``ros2 bag info`` / ``play`` read from Jazzy on. Messages
stay serialized (CDR bytes) on both sides.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leapp.errors import DependencyError, LeappError
from leapp_ros.plan.pipeline import QosPlan

__all__ = [
    "STORAGES",
    "BagContents",
    "BagError",
    "BagMessage",
    "BagWriter",
    "read_bag",
    "require_rosbags",
]

logger = logging.getLogger(__name__)

STORAGES = ("mcap", "sqlite3")
_VERSION = 8  # rosbag2's metadata version: Jazzy writes 8, Kilted 9 and reads both
_INSTALL = (
    "pip install rosbags==0.11.9 (a dependency of leapp_ros: pip install -r requirements.txt)"
)


class BagError(LeappError):
    """A bag cannot be read or written, or does not fit the graph (topics, types)."""


@dataclass(frozen=True)
class BagMessage:
    """One recorded message: its topic, time (ns: when it was sent or received, as the recorder
    stamped it) and CDR bytes."""

    topic: str
    time_ns: int
    data: bytes


@dataclass(frozen=True)
class BagContents:
    """A whole bag: ``types`` by topic, every message in time order, the file(s) read."""

    path: Path
    types: dict[str, str]
    messages: tuple[BagMessage, ...]

    def count(self, topic: str) -> int:
        return sum(message.topic == topic for message in self.messages)

    @property
    def start_ns(self) -> int:
        return self.messages[0].time_ns if self.messages else 0


def require_rosbags() -> Any:
    """The ``rosbags.rosbag2`` module; DependencyError saying what to install if missing."""
    try:
        import rosbags.rosbag2 as rosbag2
    except ImportError as e:
        raise DependencyError(f"reading and writing bags needs rosbags ({e}); {_INSTALL}") from e
    return rosbag2


def read_bag(path: str | os.PathLike[str], topics: Iterable[str] | None = None) -> BagContents:
    """Every message of the bag at ``path`` (a rosbag2 folder, or its ``.mcap`` / ``.db3``
    file) on ``topics`` (default: all), in time order.

    Raises:
        BagError: no such bag, unreadable metadata, a truncated or corrupted storage file.
    """
    rosbag2 = require_rosbags()
    path = Path(path)
    wanted = None if topics is None else set(topics)
    what = f"bag {path}"
    if not path.exists():
        raise BagError(f"{what} does not exist; give a rosbag2 folder (ros2 bag record -o)")
    try:
        with rosbag2.Reader(path) as reader:
            types = {c.topic: c.msgtype for c in reader.connections}
            connections = [c for c in reader.connections if wanted is None or c.topic in wanted]
            messages = tuple(
                BagMessage(connection.topic, timestamp, bytes(data))
                for connection, timestamp, data in reader.messages(connections=connections)
            )
    except FileNotFoundError as e:
        raise BagError(f"{what}: {e}; a rosbag2 folder holds metadata.yaml") from e
    except Exception as e:  # rosbags raises ReaderError, struct / zstd / sqlite errors alike
        raise BagError(
            f"{what} cannot be read, it is truncated or corrupted ({type(e).__name__}: {e}); "
            "record it again (a recording cut off before it ended has no index)"
        ) from e
    ordered = tuple(sorted(messages, key=lambda message: message.time_ns))
    return BagContents(path, types, ordered)


class BagWriter:
    """A new rosbag2 folder ``path`` (which must not exist), written as messages come.

    Use :meth:`add_topic` before the first message of a topic, :meth:`write` for each message
    and :meth:`close` at the end (the bag is complete only after it; the context manager calls
    it).

    Raises:
        BagError: ``path`` exists, or ``storage`` is none of :data:`STORAGES`.
    """

    def __init__(self, path: str | os.PathLike[str], storage: str = "mcap"):
        rosbag2 = require_rosbags()
        from rosbags.typesys import Stores, get_typestore

        if storage not in STORAGES:
            raise BagError(f"storage {storage!r}: choose one of {', '.join(STORAGES)}")
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f"{self.path} exists already; give a new folder for the bag")
        plugin = rosbag2.StoragePlugin[storage.upper()]
        self._typestore = get_typestore(Stores.ROS2_KILTED)
        self._writer = rosbag2.Writer(self.path, version=_VERSION, storage_plugin=plugin)
        self._writer.open()
        self._connections: dict[str, Any] = {}
        self.counts: dict[str, int] = {}

    def add_topic(self, topic: str, message_type: str, qos: Sequence[QosPlan] = ()) -> None:
        """Declare ``topic`` of ``message_type`` (``pkg/msg/Name``) with the QoS profiles its
        publishers offered (once per topic; a second call changes nothing)."""
        if topic in self._connections:
            return
        try:
            connection = self._writer.add_connection(
                topic,
                message_type,
                typestore=self._typestore,
                offered_qos_profiles=[_rosbags_qos(profile) for profile in qos],
            )
        except Exception as e:  # an unknown type: rosbags' typestore has no definition
            raise BagError(f"{self.path}: topic {topic} of type {message_type}: {e}") from e
        self._connections[topic] = connection
        self.counts[topic] = 0

    def write(self, topic: str, time_ns: int, data: bytes) -> None:
        """One serialized message of a declared ``topic``, stamped ``time_ns``."""
        self._writer.write(self._connections[topic], time_ns, data)
        self.counts[topic] += 1

    def close(self) -> None:
        """Write the index and ``metadata.yaml``: the bag is complete (safe to repeat)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            logger.info("wrote %s: %d messages", self.path, sum(self.counts.values()))

    def __enter__(self) -> BagWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _rosbags_qos(profile: QosPlan) -> Any:
    from rosbags.interfaces import (
        Qos,
        QosDurability,
        QosHistory,
        QosLiveliness,
        QosReliability,
        QosTime,
    )

    never = QosTime(0, 0)
    return Qos(
        history=QosHistory.KEEP_LAST,
        depth=profile.depth,
        reliability=QosReliability[profile.reliability.upper()],
        durability=QosDurability[profile.durability.upper()],
        deadline=never,
        lifespan=never,
        liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=never,
        avoid_ros_namespace_conventions=False,
    )
