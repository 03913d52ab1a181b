"""leapp_ros.intra_process: a producer's pipeline results go out first, then its values reach
the nodes of the same process, then the middleware gets those too; readers and producers
leave the bus when they end."""

from __future__ import annotations

from leapp_ros.intra_process import IntraProcessBus, publish_through


class _Publisher:
    def __init__(self, topic: str, log: list):
        self.topic, self.log = topic, log

    def publish(self, message) -> None:
        self.log.append(("publish", self.topic, message))


class _Writer:
    def write(self, value, stamp=None):
        return f"message of {value}"


def test_results_are_published_before_handed_values_reach_local_readers():
    bus, log = IntraProcessBus(), []
    bus.subscribe("/p/a/obs", lambda value: log.append(("local", "/p/a/obs", value)))
    topics = ["/p/a/obs", "/p/a/result"]
    publishers = [_Publisher(topic, log) for topic in topics]
    publish_through(bus, topics, publishers, [_Writer(), _Writer()], ["o", "r"])
    assert log == [
        ("publish", "/p/a/result", "message of r"),
        ("local", "/p/a/obs", "o"),
        ("publish", "/p/a/obs", "message of o"),
    ]


def test_a_topic_is_produced_here_while_a_producer_advertises_it():
    bus = IntraProcessBus()
    first, second = bus.advertise("/p/a/obs"), bus.advertise("/p/a/obs")
    first()
    assert bus.produces("/p/a/obs")
    second()
    assert not bus.produces("/p/a/obs")


def test_a_reader_that_left_gets_nothing_more():
    bus, got = IntraProcessBus(), []
    leave = bus.subscribe("/p/a/obs", got.append)
    publish_through(bus, ["/p/a/obs"], [_Publisher("/p/a/obs", [])], [_Writer()], [1])
    leave()
    publish_through(bus, ["/p/a/obs"], [_Publisher("/p/a/obs", [])], [_Writer()], [2])
    assert got == [1]
    assert bus.readers("/p/a/obs") == []
