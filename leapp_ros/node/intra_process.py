"""Intra-process communication between the pipeline nodes of one process.

rclpy has no intra-process transport: two nodes in one process exchange every message through
the middleware (serialize, loopback, wake the executor, deserialize into new Python objects).
An :class:`IntraProcessBus`, shared by the pipeline nodes of a component container
(``use_intra_process_comms``, on for the nodes ``leapp-ros run --composed`` and the launch
files start), hands each output value straight to the nodes of the same process that read its
topic, as rclcpp's intra-process manager does for C++ nodes:

- a producer calls the local readers of an output before publishing it: the consumer runs at
  once, inside the producer's tick, on the very array (no copy, no message), handed over with
  the tick of its set (``(value, tick)``, :mod:`leapp_ros.messages.tick_label`); the producer
  publishes its pipeline results (outputs no local node reads) first, and the outputs it
  handed over afterwards, so the end of the chain is not delayed by the middle (deferring
  those to a later executor task is slower: a task costs more than the publish);
- every topic is still advertised and subscribed as before (``ros2 topic echo``, bags, other
  processes and hosts see the same graph), and a consumer ignores the middleware's copy of a
  message whose topic a node of its own bus publishes: a topic that a pipeline node of this
  process produces takes no messages from anyone else;
- so a handed-over value goes to the middleware only while someone beyond the local readers
  subscribes to its topic (more matched subscriptions than local readers: an echo, a bag, a
  node of another process or host), as rclcpp's intra-process manager publishes inter-process
  only when inter-process subscriptions exist. Otherwise the copy would cost a serialization
  and an executor wake-up in each local reader, only to be ignored.

One bus per process (or per container); nodes join it when created with it and leave it when
destroyed. Not thread-safe: the nodes of a container share one single-threaded executor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["IntraProcessBus", "handed_tick", "publish_through"]

Reader = Callable[[Any], None]


class IntraProcessBus:
    """Which topics nodes of this process publish, and who in this process reads them."""

    def __init__(self) -> None:
        self._readers: dict[str, list[Reader]] = {}
        self._producers: dict[str, int] = {}

    def subscribe(self, topic: str, reader: Reader) -> Callable[[], None]:
        """Call ``reader((value, tick))`` for every value a node of this process publishes on
        ``topic`` (absolute name), with the tick it carries (None: none); returns the
        function that ends it."""
        readers = self._readers.setdefault(topic, [])
        readers.append(reader)
        return lambda: readers.remove(reader)

    def advertise(self, topic: str) -> Callable[[], None]:
        """Declare that a node of this process publishes ``topic``; returns the function
        that withdraws it."""
        self._producers[topic] = self._producers.get(topic, 0) + 1

        def withdraw() -> None:
            self._producers[topic] -= 1
            if not self._producers[topic]:
                del self._producers[topic]

        return withdraw

    def readers(self, topic: str) -> list[Reader]:
        """The local readers of ``topic`` (empty when none)."""
        return self._readers.get(topic, [])

    def produces(self, topic: str) -> bool:
        """Whether a node of this process publishes ``topic``: its middleware messages are
        copies of what the bus delivered already."""
        return topic in self._producers


def publish_through(
    bus: IntraProcessBus,
    topics: Sequence[str],
    publishers: Sequence[Any],
    writers: Sequence[Any],
    subscribers: Sequence[Callable[[], int]],
    values: Sequence[Any],
    stamp: Any = None,
    tick: int | None = None,
) -> None:
    """Publish one value per output (``topics`` their absolute names), carrying ``tick``: the
    outputs no node of the process reads first, then each handed-over value to its local
    readers, then those outputs too where anyone else subscribes. A value of None is not
    published (an output whose safe action is silent)."""
    handed = []
    for topic, publisher, writer, count, value in zip(
        topics, publishers, writers, subscribers, values, strict=True
    ):
        if value is None:
            continue
        readers = bus.readers(topic)
        if readers:
            handed.append((readers, publisher, writer, count, value))
        else:
            publisher.publish(writer.write(value, stamp, tick))
    for readers, _, _, _, value in handed:
        item = (value, tick)
        for reader in list(readers):
            reader(item)
    for readers, publisher, writer, count, value in handed:
        if count() > len(readers):
            publisher.publish(writer.write(value, stamp, tick))


def handed_tick(item: tuple[Any, int | None]) -> int | None:
    """The tick of a value the bus handed over (``(value, tick)``)."""
    return item[1]
