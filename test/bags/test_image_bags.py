"""Depth frames, Odometry and PointCloud2 in bags: recorded, read by independent readers, and
verified through the live graph.

The depth policy (test/support/sensors.py: an ONNX depth encoder, a TorchScript policy taking
its latent, an Odometry and a cloud of height samples) runs composed while the recorder of
``leapp-ros record`` (spun here: each tick's messages are in the bag before the next tick is
sent; test_bag_replay.py runs the command itself) records every topic for FRAMES ticks of
16UC1 and 32FC1 depth frames (rows padded or not, either byte order). The bag holds every
message, each equal, field for field, to what was sent when MCAP's reference reader (with its
own ROS 2 decoder) and rosbags' deserializer read it; its recorded outputs are eager PyTorch's
answers to its recorded inputs; ``verify --bag`` replays it with no mismatch against
leapp.Pipeline and against its own outputs. A bag written with rosbags as camera and odometry
drivers write it (their topic names, through ``--remap``) verifies too, and one whose camera
changed resolution exits 2 naming the topic and both sizes.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from support.recording import installed_type_hash, wait_for_recorders
from support.sensors import (
    DEPTH_FRAME,
    POINTS,
    cloud,
    depth_policy,
    export_depth_policy,
    image,
    odometry,
)

from leapp_ros.bag.bag_file import BagWriter, read_bag
from leapp_ros.bag.bag_ticks import load_ticks
from leapp_ros.bag.recorder import Recorder, recorded_topics
from leapp_ros.run.processes import load_plan
from leapp_ros.testing import Deployment, GraphUnderTest
from leapp_ros.tools.cli import main

pytestmark = pytest.mark.ros

FRAMES = 300
IMAGE = "sensor_msgs/msg/Image"
NS = "/depth_policy"
INPUTS = (f"{NS}/encoder/depth", f"{NS}/policy/odom", f"{NS}/policy/heights")
DRIVER = {"/camera/depth/image_rect_raw": 0, "/odom": 1, "/height_samples": 2}
REMAPS = [
    "--remap", "encoder/depth:=/camera/depth/image_rect_raw",
    "--remap", "policy/odom:=/odom",
    "--remap", "policy/heights:=/height_samples",
]  # fmt: skip


def sensor_tick(rng, tick: int, *, frame=DEPTH_FRAME):
    """One tick's messages (depth, odometry, heights: in INPUTS order) and the tensors they
    carry: 16UC1 millimetres on even ticks, 32FC1 metres on odd ones, padding and byte order
    changing."""
    pad, big = 2 * (tick % 3), tick % 4 == 1
    if tick % 2 == 0:
        millimetres = rng.integers(300, 8000, frame).astype(np.uint16)
        depth = image(millimetres, "16UC1", pad=pad, big=big)
        metres = millimetres.astype(np.float32) * np.float32(0.001)
    else:
        metres = (rng.random(frame) * 6).astype(np.float32)
        depth = image(metres, "32FC1", pad=pad, big=big)
    linear = rng.standard_normal(3)
    heights = rng.standard_normal(POINTS).astype(np.float32)
    messages = (
        depth,
        odometry(linear, rng.standard_normal(3), (1.0, 0.0, 0.0, 0.0)),
        cloud(heights, organized=False, big=big, row_pad=pad),
    )
    tensors = (
        torch.from_numpy(metres).reshape(1, 1, *frame),
        torch.tensor(linear, dtype=torch.float32),
        torch.from_numpy(heights),
    )
    return messages, tensors


def eager_outputs(export, tensors):
    with torch.no_grad():
        latent, action = depth_policy(*tensors, export.weights)
    return {"encoder/latent": latent, "policy/action": action}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """FRAMES ticks through the composed graph while a recorder (``leapp-ros record``'s, spun
    here) recorded every topic; after each tick the recorder has written every message of it
    before the next is sent (a recorder acknowledges nothing to the graph: its counts are the
    event)."""
    folder = tmp_path_factory.mktemp("depth_bag")
    export = export_depth_policy(folder)
    bag = folder / "run"
    rng = np.random.default_rng(11)
    sent = []
    with GraphUnderTest(export.path, Deployment.COMPOSED) as graph:
        topics = recorded_topics(graph.plan)
        writer = BagWriter(bag)
        recorder = Recorder(topics, writer, domain_id=graph.domain_id)
        try:
            deadline = time.monotonic() + 30
            while len(recorder.subscribed) < len(topics):
                assert time.monotonic() < deadline, f"recorded only {recorder.subscribed}"
                recorder.spin_once(0.01)
                graph.spin(0.01)
            wait_for_recorders(graph, dict.fromkeys(topics, 1), [])
            for tick in range(FRAMES):
                messages, _ = sensor_tick(rng, tick)
                graph.send(dict(zip(INPUTS, messages, strict=True)), outputs=["policy/action"])
                sent.append(messages)
                deadline = time.monotonic() + 30
                while any(writer.counts.get(topic, 0) <= tick for topic in topics):
                    assert time.monotonic() < deadline, f"tick {tick}: recorded {writer.counts}"
                    recorder.spin_once(0.01)
        finally:
            recorder.close()
            writer.close()
    yield SimpleNamespace(export=export, bag=bag, sent=sent)


def test_every_recorded_frame_reads_back_field_for_field_with_mcap_and_rosbags(recorded):
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory
    from rosbags.typesys import Stores, get_typestore

    contents = read_bag(recorded.bag)
    assert all(contents.count(topic) == FRAMES for topic in contents.types), contents.types
    store = get_typestore(Stores.ROS2_KILTED)
    by_rosbags = {topic: [] for topic in INPUTS}
    for message in contents.messages:
        if message.topic in by_rosbags:
            kind = contents.types[message.topic]
            by_rosbags[message.topic].append(store.deserialize_cdr(message.data, kind))
    (path,) = recorded.bag.glob("*.mcap")
    by_mcap = {topic: [] for topic in INPUTS}
    with open(path, "rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        for _, channel, _, decoded in reader.iter_decoded_messages(topics=list(INPUTS)):
            by_mcap[channel.topic].append(decoded)
        for channel in reader.get_summary().channels.values():
            schema = reader.get_summary().schemas[channel.schema_id]
            assert schema.name == contents.types[channel.topic]
    for index, topic in enumerate(INPUTS):
        for sent, rosbags_message, mcap_message in zip(
            (messages[index] for messages in recorded.sent),
            by_rosbags[topic],
            by_mcap[topic],
            strict=True,
        ):
            assert_same_fields(sent, rosbags_message)
            assert_same_fields(sent, mcap_message)
    import yaml

    metadata = yaml.safe_load((recorded.bag / "metadata.yaml").read_text())
    for entry in metadata["rosbag2_bagfile_information"]["topics_with_message_count"]:
        topic = entry["topic_metadata"]
        assert topic["type_description_hash"] == installed_type_hash(topic["type"])


def assert_same_fields(sent, read) -> None:
    """The fields that carry data, of an Image, PointCloud2 or Odometry, read as sent."""
    if hasattr(sent, "encoding"):
        names = ("height", "width", "encoding", "is_bigendian", "step")
        assert [getattr(read, n) for n in names] == [getattr(sent, n) for n in names]
        assert bytes(read.data) == bytes(sent.data)
    elif hasattr(sent, "point_step"):
        names = ("height", "width", "is_bigendian", "point_step", "row_step", "is_dense")
        assert [getattr(read, n) for n in names] == [getattr(sent, n) for n in names]
        assert [(f.name, f.offset, f.datatype) for f in read.fields] == [
            (f.name, f.offset, f.datatype) for f in sent.fields
        ]
        assert bytes(read.data) == bytes(sent.data)
    else:
        twist = (read.twist.twist.linear.x, read.twist.twist.linear.y, read.twist.twist.angular.z)
        sent_twist = sent.twist.twist
        assert twist == (sent_twist.linear.x, sent_twist.linear.y, sent_twist.angular.z)
        assert read.child_frame_id == sent.child_frame_id


def test_recorded_outputs_are_eager_pytorchs_answers_to_the_recorded_frames(recorded):
    plan = load_plan(recorded.export.path)
    ticks = load_ticks(plan, recorded.bag, recorded=True)
    assert len(ticks.ticks) == FRAMES and ticks.superseded == 0
    for tick in ticks.ticks:
        tensors = (tick.inputs["encoder/depth"], tick.inputs["policy/lin_vel"])
        expected = eager_outputs(recorded.export, (*tensors, tick.inputs["policy/heights"]))
        for key, value in expected.items():
            torch.testing.assert_close(
                ticks.recorded[key][tick.index], value, rtol=1e-5, atol=1e-5
            )


@pytest.mark.parametrize(
    "extra", [["--fused"], ["--against", "recorded"]], ids=["pipeline_fused", "recorded"]
)
def test_verify_replays_the_recorded_depth_bag_without_a_mismatch(recorded, extra, capsys):
    code = main(["verify", str(recorded.export.path), "--bag", str(recorded.bag), *extra])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    assert f"{FRAMES} of {FRAMES} ticks" in printed.out, printed.out


def write_driver_bag(path, ticks: int, *, frame_at=None):
    """A bag of ``ticks`` as camera and odometry drivers write it (their topics, rosbags' own
    serializer); with ``frame_at`` (tick, frame) one depth frame of another size."""
    from rclpy.serialization import serialize_message
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    rng = np.random.default_rng(3)
    with Writer(path, version=8) as writer:
        connections = {}
        for topic, index in DRIVER.items():
            kind = (
                "sensor_msgs/msg/Image",
                "nav_msgs/msg/Odometry",
                "sensor_msgs/msg/PointCloud2",
            )
            connections[topic] = writer.add_connection(topic, kind[index], typestore=store)
        for tick in range(ticks):
            size = frame_at[1] if frame_at and frame_at[0] == tick else DEPTH_FRAME
            messages, _ = sensor_tick(rng, tick, frame=size)
            for offset, (topic, index) in enumerate(DRIVER.items()):
                stamp = 10**9 + tick * 33_000_000 + offset * 1000
                writer.write(connections[topic], stamp, serialize_message(messages[index]))
    return path


def test_a_driver_bag_on_its_own_topics_verifies_through_remaps(tmp_path, recorded, capsys):
    bag = write_driver_bag(tmp_path / "driver", 40)
    code = main(["verify", str(recorded.export.path), "--bag", str(bag), *REMAPS])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    assert "40 of 40 ticks" in printed.out, printed.out


def test_a_frame_of_another_size_in_a_bag_exits_2_naming_topic_and_sizes(
    tmp_path, recorded, capsys
):
    rows, columns = DEPTH_FRAME
    bag = write_driver_bag(tmp_path / "resized", 6, frame_at=(4, (rows * 2, columns * 2)))
    code = main(["verify", str(recorded.export.path), "--bag", str(bag), *REMAPS])
    error = capsys.readouterr().err
    assert code == 2, error
    assert "/camera/depth/image_rect_raw" in error, error
    assert f"Image of {columns * 2}x{rows * 2} (width x height)" in error, error
    assert f"port of {columns}x{rows}" in error, error
