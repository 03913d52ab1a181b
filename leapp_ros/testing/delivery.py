"""How a test knows its messages reach nodes that run at their deployed QoS, from the nodes'
status records.

A node's subscriptions are best effort with depth 1 ("newest wins", DESIGN.md): a message that
arrives before the subscription has matched its publisher is dropped, and of two messages that
reach a subscription before the node takes the first, only the second is kept. So a test that
must not lose an input, nor have one used twice:

1. waits until every hop is matched *both ways* (:func:`connection_gaps`): each publisher
   counts each subscription of its topic (the probe's publishers ask rclpy, a node reports
   ``subscribers``) and each subscription counts each publisher (the probe's subscriptions
   count their matched events, a node reports ``publishers``);
2. sends one message per topic, then waits for an event that proves the node took it before it
   sends on that topic again: an output the message made the node publish, or the node's
   status counting it (:func:`receipt_gaps`: ``received_on`` of each input topic reaches the
   messages sent there and the runs of the nodes publishing there).

Nothing is ever sent twice, so a node with recurrent state or feedback steps once per input,
as in the eager loop. A message lost nonetheless shows as a timeout naming the counters.

Counts only grow while a graph starts, so a record that is not the newest only asks for more
waiting. Once an endpoint has left (a node stopped or killed) a record can still count it: a
killed node's endpoints stay matched until their lease ends (about 20 s with Fast DDS), and
its peers' last records say so until they send newer ones. A test that restarts a node waits
until the endpoints it had are gone before it counts on matches again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["connection_gaps", "receipt_gaps", "unready_nodes"]

Statuses = Mapping[str, Mapping[str, Any]]


def unready_nodes(statuses: Statuses, nodes: Iterable[str]) -> list[str]:
    """The ``nodes`` whose latest status record is not ``ready``, or says the node is
    ``held`` (active, but waiting for the graph's stand-in to watch its process)."""
    return [
        node
        for node in nodes
        if statuses.get(node, {}).get("state") != "ready" or statuses[node].get("held")
    ]


def connection_gaps(
    statuses: Statuses,
    publishers: Iterable[tuple[str, int]] = (),
    subscriptions: Iterable[tuple[str, int]] = (),
    discovered: Mapping[str, tuple[int, int]] | None = None,
) -> list[str]:
    """Every endpoint not yet matched with every endpoint of the other side of its topic.

    Args:
        statuses: the latest status record per pipeline node (``subscribers``: the matched
            subscriptions of each output topic; ``publishers``: the matched publishers of
            each input topic).
        publishers: the test's own publishers: ``(topic, subscriptions it matched)`` each.
        subscriptions: the test's own subscriptions: ``(topic, publishers it matched)`` each.
        discovered: ``(publishers, subscriptions)`` on each topic as the test's participant
            discovered them (rclpy ``count_publishers`` / ``count_subscribers``), when more
            than the records name: an endpoint of a killed process stays matched until its
            lease ends (about 20 s), and a count that includes it would pass before the
            endpoint that replaced it matched, so an endpoint must match all of them.

    Returns:
        one line per endpoint still short of a match, e.g. ``/ns/policy/obs: node 'policy'
        matched 0 of 1 publishers``.
    """
    publishers, subscriptions = list(publishers), list(subscriptions)
    writers: dict[str, int] = {}
    readers: dict[str, int] = {}
    for topic, _ in publishers:
        writers[topic] = writers.get(topic, 0) + 1
    for topic, _ in subscriptions:
        readers[topic] = readers.get(topic, 0) + 1
    for record in statuses.values():
        for topic in record.get("subscribers", {}):
            writers[topic] = writers.get(topic, 0) + 1
        for topic in record.get("publishers", {}):
            readers[topic] = readers.get(topic, 0) + 1
    for topic, (seen_writers, seen_readers) in (discovered or {}).items():
        writers[topic] = max(writers.get(topic, 0), seen_writers)
        readers[topic] = max(readers.get(topic, 0), seen_readers)
    gaps = []
    for node, record in sorted(statuses.items()):
        for topic, count in record.get("publishers", {}).items():
            if count < writers.get(topic, 0):
                gaps.append(
                    f"{topic}: node {node!r} matched {count} of {writers[topic]} publishers"
                )
        for topic, count in record.get("subscribers", {}).items():
            if count < readers.get(topic, 0):
                gaps.append(
                    f"{topic}: node {node!r} matched {count} of {readers[topic]} subscriptions"
                )
    # a test's endpoint matches the others, not itself: a node's, or another of the test's
    gaps += [f"{topic}: the test's publisher matched {count} of {readers[topic]} subscriptions"
             for topic, count in publishers if count < readers.get(topic, 0)]  # fmt: skip
    gaps += [f"{topic}: the test's subscription matched {count} of {writers[topic]} publishers"
             for topic, count in subscriptions if count < writers.get(topic, 0)]  # fmt: skip
    return gaps


def receipt_gaps(statuses: Statuses, sent: Mapping[str, int]) -> list[str]:
    """The input topics on which a node has not yet taken every message sent to it.

    A node must have taken, on each input topic, the messages the test sent there (``sent``,
    by topic) plus one per run of every node publishing there (``runs`` of each record whose
    ``subscribers`` name the topic). Checked on the latest records together, which makes it
    exact: a node's record that counts every input of the node also counts every run those
    inputs caused (a node fires inside the callback that takes its last input), so the
    producers' runs its consumers must have taken are complete too.

    The records of one fused node come one per pipeline node; those must be of one
    publication (the same ``ticks``), or a record of a node without inputs of its own could
    be older than the rest.

    Returns:
        one line per topic short of messages, e.g. ``/ns/policy/obs: node 'policy' took 2 of
        3 messages``; empty when every message sent so far has been taken.
    """
    feeds = dict(sent)
    for record in statuses.values():
        for topic in record.get("subscribers", {}):
            feeds[topic] = feeds.get(topic, 0) + int(record.get("runs", 0))
    gaps = []
    for node, record in sorted(statuses.items()):
        for topic, taken in record.get("received_on", {}).items():
            if taken < feeds.get(topic, 0):
                gaps.append(f"{topic}: node {node!r} took {taken} of {feeds[topic]} messages")
    ticks: dict[str, set[int]] = {}
    for record in statuses.values():
        if "fused" in record:
            ticks.setdefault(record["fused"], set()).add(record.get("ticks", 0))
    gaps += [f"{fused}: records of ticks {sorted(seen)}" for fused, seen in ticks.items()
             if len(seen) > 1]  # fmt: skip
    return gaps
