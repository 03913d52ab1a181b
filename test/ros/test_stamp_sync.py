"""The rules of gathering a node's inputs by header stamp (leapp_ros.node.stamp_sync), without
ROS: one message per topic of one instant, whatever order they arrive in."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from leapp_ros.messages.topic_io import stamp_ns
from leapp_ros.node.stamp_sync import StampSync, gather_by_stamp, stamp_sync
from leapp_ros.plan.pipeline import Firing
from leapp_ros.plan.settings import StartupError

MS = 1_000_000


def test_an_exact_set_forms_when_the_last_message_of_its_stamp_comes():
    sync = StampSync("exact", topics=["joints", "imu"])
    assert sync.add("joints", 10 * MS, "j10") is None
    assert sync.add("imu", 11 * MS, "i11") is None  # another instant
    assert sync.add("imu", 10 * MS, "i10") == {"joints": "j10", "imu": "i10"}


def test_an_approximate_set_takes_each_topics_message_closest_to_the_newest():
    sync = StampSync("approximate", 5 * MS, topics=["joints", "imu", "twist"])
    sync.add("imu", 18 * MS, "i18")
    sync.add("imu", 21 * MS, "i21")
    sync.add("twist", 19 * MS, "t19")
    assert sync.add("joints", 20 * MS, "j20") == {"joints": "j20", "imu": "i21", "twist": "t19"}


def test_stamps_spread_wider_than_the_slop_form_no_set():
    sync = StampSync("approximate", 5 * MS, topics=["joints", "imu"])
    sync.add("imu", 10 * MS, "i10")
    assert sync.add("joints", 16 * MS, "j16") is None


def test_messages_not_newer_than_a_used_set_are_dropped():
    sync = StampSync("exact", topics=["joints", "imu"])
    sync.add("joints", 1 * MS, "j1")
    sync.add("joints", 2 * MS, "j2")
    assert sync.add("imu", 2 * MS, "i2") == {"joints": "j2", "imu": "i2"}
    assert sync.add("imu", 1 * MS, "i1") is None  # j1 went with the set of 2 ms
    assert sync.add("joints", 3 * MS, "j3") is None


def test_interleaved_instants_pair_by_stamp_in_any_arrival_order():
    rng = random.Random(0)
    for _ in range(20):
        sync = StampSync("approximate", 3 * MS, topics=["joints", "imu", "twist"])
        messages = [
            (topic, tick * 20 * MS + rng.randint(-MS, MS), f"{topic}{tick}")
            for tick in range(5)
            for topic in ("joints", "imu", "twist")
        ]
        # the middleware may deliver each topic late, but every topic keeps its own order
        arrival = _interleave(rng, messages)
        sets = [s for topic, stamp, name in arrival if (s := sync.add(topic, stamp, name))]
        assert sets[-1]["joints"] == "joints4", "the newest instant formed no set"
        for found in sets:
            assert len({name[-1] for name in found.values()}) == 1, found


def _interleave(rng, ordered):
    """A random merge of the per-topic sequences in ``ordered`` (each topic keeps its order)."""
    queues = {}
    for item in ordered:
        queues.setdefault(item[0], []).append(item)
    merged = []
    while any(queues.values()):
        topic = rng.choice([t for t, q in queues.items() if q])
        merged.append(queues[topic].pop(0))
    return merged


def test_a_rejected_message_spoils_its_set_before_and_after_its_partners_came():
    sync = StampSync("approximate", 2 * MS, topics=["joints", "imu"])
    sync.add("imu", 10 * MS, "i10")  # came first
    assert sync.reject("joints", 10 * MS) is True
    assert sync.add("joints", 20 * MS, "j20") is None  # i10 is gone with its set
    assert sync.reject("imu", 30 * MS) is True
    assert sync.add("joints", 30 * MS, "j30") is None  # came after: dropped on arrival
    assert sync.add("imu", 20 * MS, "i20") == {"joints": "j20", "imu": "i20"}


def test_two_rejected_messages_of_one_instant_spoil_one_set():
    sync = StampSync("exact", topics=["joints", "imu"])
    assert sync.reject("joints", 5 * MS) is True
    assert sync.reject("imu", 5 * MS) is False


def test_a_message_without_a_stamp_drops_every_partial_set():
    sync = StampSync("exact", topics=["joints", "imu"])
    sync.add("imu", 7 * MS, "i7")
    assert sync.reject("joints", None) is True
    assert sync.add("joints", 7 * MS, "j7") is None


def test_the_stamp_of_a_message_is_its_header_stamp_in_nanoseconds():
    stamp = SimpleNamespace(sec=3, nanosec=250)
    assert stamp_ns(SimpleNamespace(header=SimpleNamespace(stamp=stamp))) == 3_000_000_250
    assert stamp_ns(SimpleNamespace(data=[1.0])) is None


def test_arrival_needs_no_stamp_sync_and_the_others_make_one():
    assert stamp_sync(Firing()) is None
    sync = stamp_sync(Firing(sync="approximate", sync_slop_s=0.004))
    assert (sync.mode, sync.slop_ns) == ("approximate", 4 * MS)
    assert stamp_sync(Firing(sync="exact", sync_slop_s=0.004)).slop_ns == 0


def test_a_triggering_multiarray_cannot_be_gathered_by_stamp():
    from std_msgs.msg import Float32MultiArray

    port = SimpleNamespace(port="state", kind="external")
    reader = SimpleNamespace(
        indices=[0], topic="preprocess/state", message_type="", message_class=Float32MultiArray
    )
    with pytest.raises(StartupError) as caught:
        gather_by_stamp(StampSync("exact"), "preprocess", reader, [port], [0])
    assert str(caught.value).startswith(
        "node 'preprocess': sync 'exact' matches inputs by header stamp, but input(s) "
        "['state'] on preprocess/state come as a MultiArray, which has none"
    )
