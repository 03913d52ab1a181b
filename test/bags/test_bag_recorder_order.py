"""The recorder keeps the order in which a graph's inputs were published, over real DDS.

A recorder that wakes with messages of several topics waiting takes them one subscription
after the other: stamped with their receive times, the second input of one tick could land
after the first input of the next, and a replay would read a tick with a superseded input and
a partner from another instant. Stamped with the time each message was sent, the bag holds
the ticks as they were published."""

from __future__ import annotations

import time

import pytest
import torch
from support.ros import export_seed, waiting_topics

from leapp_ros.bag.bag_file import BagWriter
from leapp_ros.bag.bag_ticks import load_ticks
from leapp_ros.bag.recorder import Recorder
from leapp_ros.messages.multiarray import codec
from leapp_ros.messages.raw_multiarray import RawArrayCodec
from leapp_ros.run.processes import load_plan
from leapp_ros.testing.probe import Probe, reserve_domain_id

pytestmark = pytest.mark.ros


def test_a_recorder_woken_late_keeps_the_order_the_inputs_were_published(tmp_path):
    from std_msgs.msg import Float32MultiArray

    plan = load_plan(export_seed(tmp_path / "export").path)
    node = plan.node("preprocess")
    ports = {
        plan.resolve(node.input(port).topic): node.input(port) for port in ("state", "velocity")
    }
    generator = torch.Generator().manual_seed(3)
    sent = [
        {topic: torch.randn(port.shape, generator=generator) for topic, port in ports.items()}
        for _ in range(2)
    ]
    state, velocity = ports
    with reserve_domain_id() as domain_id, Probe(domain_id) as probe:
        publishers = {topic: probe.publisher(topic, Float32MultiArray) for topic in ports}
        writer = BagWriter(tmp_path / "bag")
        recorder = Recorder({topic: port.message_type for topic, port in ports.items()}, writer,
                            domain_id)  # fmt: skip
        try:

            def spin_until(condition, what: str) -> None:
                deadline = time.monotonic() + 20
                while not condition():
                    assert time.monotonic() < deadline, f"timed out waiting for {what}"
                    recorder.spin_once(0.02)
                    probe.spin_for(0.01)

            spin_until(lambda: len(recorder.subscribed) == 2, "the recorder to subscribe")
            for publisher in publishers.values():
                probe.wait_matched(publisher)

            def publish(tick: int, topic: str) -> None:
                publishers[topic].publish(
                    RawArrayCodec(codec(ports[topic])).to_bytes(sent[tick][topic])
                )

            publish(0, state)
            spin_until(lambda: writer.counts.get(state) == 1, "the first state")
            # the recorder is not spun while tick 0's velocity and all of tick 1 are published:
            # they wait in its readers, both topics at once, until it takes them
            publish(0, velocity)
            publish(1, state)
            publish(1, velocity)
            subscriptions = [recorder._subscriptions[topic] for topic in (state, velocity)]
            probe.spin_until(
                lambda: len(waiting_topics(recorder.context, subscriptions)) == 2,
                20,
                "messages waiting on both topics in the recorder",
            )
            spin_until(lambda: sum(writer.counts.values()) == 4, "every message")
        finally:
            recorder.close()
            writer.close()
    ticks = load_ticks(plan, tmp_path / "bag")
    assert (ticks.superseded, ticks.left_over, len(ticks.ticks)) == (0, (), 2)
    for tick, published in zip(ticks.ticks, sent, strict=True):
        for topic, value in published.items():
            torch.testing.assert_close(tick.inputs[f"preprocess/{ports[topic].port}"], value)
