"""leapp_ros.node.intra_process: a producer's pipeline results go out first, then its values reach
the nodes of the same process (with the tick of their set), then the middleware gets those too
where anyone else listens; readers and producers leave the bus when they end. The last test
composes the seed's nodes on one bus over real rclpy and Fast DDS."""

from __future__ import annotations

import pytest
from support.ros import check_obs_only_while_echoed

from leapp_ros.node.intra_process import IntraProcessBus, publish_through
from leapp_ros.testing import Probe, reserve_domain_id


class _Publisher:
    def __init__(self, topic: str, log: list, subscriptions: int = 2):
        self.topic, self.log, self.subscriptions = topic, log, subscriptions

    def get_subscription_count(self) -> int:
        return self.subscriptions

    def publish(self, message) -> None:
        self.log.append(("publish", self.topic, message))


class _Writer:
    def write(self, value, stamp=None, tick=None):
        return f"message of {value}" + ("" if tick is None else f" at tick {tick}")


def test_results_are_published_before_handed_values_reach_local_readers():
    bus, log = IntraProcessBus(), []
    bus.subscribe("/p/a/obs", lambda value: log.append(("local", "/p/a/obs", value)))
    topics = ["/p/a/obs", "/p/a/result"]
    publishers = [_Publisher(topic, log) for topic in topics]
    counts = [publisher.get_subscription_count for publisher in publishers]
    publish_through(bus, topics, publishers, [_Writer(), _Writer()], counts, ["o", "r"])
    assert log == [
        ("publish", "/p/a/result", "message of r"),
        ("local", "/p/a/obs", ("o", None)),
        ("publish", "/p/a/obs", "message of o"),
    ]


def test_a_handed_over_value_and_its_messages_carry_the_tick_of_its_set():
    bus, log = IntraProcessBus(), []
    bus.subscribe("/p/a/obs", lambda item: log.append(("local", "/p/a/obs", item)))
    publisher = _Publisher("/p/a/obs", log)
    counts = [publisher.get_subscription_count]
    publish_through(bus, ["/p/a/obs"], [publisher], [_Writer()], counts, ["o"], tick=42)
    assert log == [
        ("local", "/p/a/obs", ("o", 42)),
        ("publish", "/p/a/obs", "message of o at tick 42"),
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
    publisher = _Publisher("/p/a/obs", [])
    counts = [publisher.get_subscription_count]
    publish_through(bus, ["/p/a/obs"], [publisher], [_Writer()], counts, [1])
    leave()
    publish_through(bus, ["/p/a/obs"], [publisher], [_Writer()], counts, [2])
    assert got == [(1, None)]
    assert bus.readers("/p/a/obs") == []


def test_a_handed_over_value_skips_the_middleware_when_only_local_readers_subscribe():
    bus, log = IntraProcessBus(), []
    bus.subscribe("/p/a/obs", lambda value: log.append(("local", "/p/a/obs", value)))
    publisher = _Publisher("/p/a/obs", log, subscriptions=1)  # the local reader's own
    counts = [publisher.get_subscription_count]
    publish_through(bus, ["/p/a/obs"], [publisher], [_Writer()], counts, ["o"])
    assert log == [("local", "/p/a/obs", ("o", None))]


@pytest.mark.ros
def test_composed_nodes_publish_an_intermediate_only_while_someone_else_subscribes(seed):
    """Over real DDS: with only the composed consumer subscribed, ``obs`` never goes to the
    middleware, and actions still match eager PyTorch; once another participant (an echo, a
    bag) subscribes, it gets every ``obs``, equal to eager PyTorch's."""
    from rclpy.parameter import Parameter

    from leapp_ros.node.pipeline_node import PipelineNode

    spec_path = str(next(seed.path.glob("*.yaml")))
    with (
        reserve_domain_id() as domain_id,
        Probe(domain_id) as probe,
        Probe(domain_id, "echo") as echo,
    ):
        bus = IntraProcessBus()
        nodes = [
            PipelineNode(
                name,
                namespace="/torch_pipeline",
                context=probe.context,
                parameter_overrides=[Parameter("spec_path", Parameter.Type.STRING, spec_path)],
                bus=bus,
            )
            for name in ("preprocess", "policy")
        ]

        try:
            for node in nodes:
                probe.executor.add_node(node)
            obs_publisher = nodes[0]._output_publishers[0]
            assert obs_publisher.topic_name == "/torch_pipeline/preprocess/obs"
            check_obs_only_while_echoed(seed, probe, echo, obs_publisher, local_readers=1)
        finally:
            for node in nodes:
                node.destroy_node()


def test_a_match_count_follows_endpoints_as_they_match_and_leave():
    """Over real DDS: the counts that a publisher's and a subscription's matched events keep
    are what ``get_subscription_count`` / ``get_publisher_count`` say, once an endpoint of
    another participant matched and once it left."""
    from std_msgs.msg import String

    from leapp_ros.node.match_count import MatchCount

    with reserve_domain_id() as domain_id, Probe(domain_id) as probe, Probe(domain_id, "b") as b:
        subscribers, publishers = MatchCount(), MatchCount()
        publisher = probe.node.create_publisher(
            String, "/count_test", 10, event_callbacks=subscribers.publisher_callbacks()
        )
        subscription = probe.node.create_subscription(
            String, "/other_test", lambda _: None, 10,
            event_callbacks=publishers.subscription_callbacks(),
        )  # fmt: skip
        assert subscribers() == publishers() == 0
        theirs = b.node.create_subscription(String, "/count_test", lambda _: None, 10)
        their_publisher = b.node.create_publisher(String, "/other_test", 10)

        def settled(expected):
            b.executor.spin_once(timeout_sec=0)  # (b's side needs spinning too)
            return (
                subscribers() == expected == publisher.get_subscription_count()
                and publishers() == expected == subscription.get_publisher_count()
            )

        probe.spin_until(lambda: settled(1), 10, "the matches")
        b.node.destroy_subscription(theirs)
        b.node.destroy_publisher(their_publisher)
        probe.spin_until(lambda: settled(0), 10, "the endpoints leaving")
