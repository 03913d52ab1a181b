"""Recorded data through the live graph: ``leapp-ros record`` writes a complete rosbag2 folder of
a running graph (ended by SIGINT) whose recorded outputs are eager PyTorch's answers to its
recorded inputs; the bag replays through the graph with no mismatch against eager PyTorch (a bag
of the recorded inputs and the eager outputs, ``against="recorded"``), against
``leapp.Pipeline`` and against its own recorded outputs; a recurrent GRU policy replayed from a
bag follows the eager GRU loop tick by tick, its state carried; ``--against recorded`` catches a
graph running other weights; a bag written with ``rosbags`` as a robot driver writes it
(JointState with the joints shuffled and an extra joint, Imu, Twist on the robot's topics)
verifies through remaps; and truncated or corrupted bags, missing topics, wrong types and bad
remaps exit with 2, naming the file or topic, before any graph starts."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from support.recording import installed_type_hash, start_recorder, wait_for_recorders
from support.recurrent import export_gru, gru_loop
from support.robot import export_robot
from support.ros import eager_seed, export_seed
from support.weights import export_perturbed_seed

from leapp_ros.bag.bag_file import BagWriter, read_bag
from leapp_ros.bag.bag_ticks import BagTick, BagTicks, load_ticks
from leapp_ros.messages.multiarray import codec
from leapp_ros.messages.raw_multiarray import RawArrayCodec
from leapp_ros.run.processes import load_plan
from leapp_ros.testing import Deployment, GraphUnderTest
from leapp_ros.tools.cli import main

pytestmark = pytest.mark.ros

TICKS = 8
# the timed recorder's --duration: long enough for it to start, subscribe and record every tick
# on a loaded machine (at 4 s a slow CI run cut it off inside the seventh tick)
DURATION_S = 12
PARTIAL = ("preprocess/state", "policy/action")  # the timed recorder's --topics
ROBOT_TICKS = 6
JOINTS = ["hip_l", "knee_l", "ankle_l", "hip_r", "knee_r", "ankle_r"]
ROBOT_REMAPS = [
    "--remap",
    "preprocess/joint_states:=/joint_states",
    "--remap",
    "preprocess/imu:=/imu/data",
    "--remap",
    "preprocess/cmd_vel:=/cmd_vel",
]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The seed graph (composed) driven for TICKS ticks while two ``leapp-ros record`` ran:
    one of every topic until SIGINT, one of two topics into SQLite3 for DURATION_S; their exit
    codes and output, the bags; the graph stays up for the replays."""
    folder = tmp_path_factory.mktemp("recorded")
    seed = export_seed(folder)
    bag, partial = folder / "run", folder / "partial"
    with GraphUnderTest(seed.path, Deployment.COMPOSED) as graph:

        def start(*options: str) -> subprocess.Popen:
            return start_recorder(graph, seed.path, *options)

        recorder = start("--out", str(bag))
        timed = start("--out", str(partial), "--storage", "sqlite3", "--duration",
                      str(DURATION_S), "--topics", *PARTIAL)  # fmt: skip
        started = time.monotonic()
        try:
            counts = {topic: 1 for topic, _ in graph.plan.topics()}
            counts.update({graph.plan.resolve(topic): 2 for topic in PARTIAL})
            wait_for_recorders(graph, counts, [recorder, timed])
            generator = torch.Generator().manual_seed(4)
            for _ in range(TICKS):
                graph.step(
                    {
                        "preprocess/state": torch.randn(6, generator=generator),
                        "preprocess/velocity": torch.randn(3, generator=generator),
                    }
                )
            # delivery slack for the recorders' last messages: a recorder acknowledges nothing it
            # took, so no event says it has them; a message missing from the bag fails the
            # tests below loudly (exact counts), it is never passed over
            graph.spin(0.3)
            stepped_s = time.monotonic() - started
            recorder.send_signal(signal.SIGINT)
            output, _ = recorder.communicate(timeout=30)
            timed_output, _ = timed.communicate(timeout=DURATION_S + 30)
        finally:
            for process in (recorder, timed):
                if process.poll() is None:
                    process.kill()
        yield SimpleNamespace(
            seed=seed, bag=bag, graph=graph, code=recorder.returncode, output=output,
            folder=folder, partial=partial, timed_code=timed.returncode, timed_output=timed_output,
            stepped_s=stepped_s,
        )  # fmt: skip


def test_the_recorder_ends_on_sigint_with_a_complete_bag_of_every_topic_and_its_qos(recorded):
    from rosbags.interfaces import QosReliability
    from rosbags.rosbag2 import Reader

    assert recorded.code == 0, recorded.output
    assert f"{4 * TICKS} messages on 4 topics" in recorded.output, recorded.output
    contents = read_bag(recorded.bag)
    assert contents.types == dict(recorded.graph.plan.topics())
    for topic in contents.types:
        assert contents.count(topic) == TICKS, topic
    with Reader(recorded.bag) as reader:
        offered = {c.topic: c.ext.offered_qos_profiles for c in reader.connections}
    for topic, profiles in offered.items():
        assert profiles and all(p.reliability == QosReliability.RELIABLE for p in profiles), topic


def test_a_timed_recording_of_chosen_topics_into_sqlite3_ends_by_itself(recorded):
    assert recorded.timed_code == 0, recorded.timed_output
    assert list(recorded.partial.glob("*.db3")), list(recorded.partial.iterdir())
    contents = read_bag(recorded.partial)
    assert sorted(contents.types) == sorted(recorded.graph.plan.resolve(t) for t in PARTIAL)
    counts = {topic: contents.count(topic) for topic in contents.types}
    assert all(count == TICKS for count in counts.values()), (
        f"{counts} of {TICKS} ticks; the last tick was answered {recorded.stepped_s:.1f} s after "
        f"the timed recorder ({DURATION_S} s) started"
    )


def test_recorded_bags_read_the_same_with_independent_readers_and_carry_the_installed_types(
    recorded,
):
    """Not only rosbags reads what it wrote: MCAP's reference library (the ros2 profile,
    ros2msg schemas, CDR messages, decoded by its own ROS 2 decoder) and SQLite3 itself
    (rosbag2's tables) find every message, equal to rclpy's reading of the same bytes; the
    metadata has what rosbag2 reads (version 8), and each topic's type hash is the installed
    ROS 2 package's."""
    import sqlite3

    import yaml
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Float32MultiArray

    contents = read_bag(recorded.bag)
    expected = [(m.topic, list(deserialize_message(m.data, Float32MultiArray).data))
                for m in contents.messages]  # fmt: skip
    information = yaml.safe_load((recorded.bag / "metadata.yaml").read_text())
    information = information["rosbag2_bagfile_information"]
    assert information["version"] == 8 and information["storage_identifier"] == "mcap"
    assert information["message_count"] == len(expected) == 4 * TICKS
    (path,) = information["relative_file_paths"]
    with open(recorded.bag / path, "rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        assert reader.get_header().profile == "ros2"
        summary = reader.get_summary()
        for channel in summary.channels.values():
            schema = summary.schemas[channel.schema_id]
            assert (channel.message_encoding, schema.encoding) == ("cdr", "ros2msg")
            assert schema.name == contents.types[channel.topic]
        found = [
            (c.topic, list(decoded.data)) for _, c, _, decoded in reader.iter_decoded_messages()
        ]
    assert sorted(found) == sorted(expected)
    for entry in information["topics_with_message_count"]:
        topic = entry["topic_metadata"]
        assert entry["message_count"] == contents.count(topic["name"]) == TICKS
        assert topic["type_description_hash"] == installed_type_hash(topic["type"])

    (database,) = recorded.partial.glob("*.db3")
    with sqlite3.connect(database) as connection:
        topics = dict(connection.execute("SELECT id, name FROM topics"))
        rows = connection.execute("SELECT topic_id, data FROM messages ORDER BY timestamp")
        stored = [
            (topics[i], list(deserialize_message(d, Float32MultiArray).data)) for i, d in rows
        ]
    partial = [(topic, values) for topic, values in expected if topic in set(topics.values())]
    assert sorted(topics.values()) == sorted(recorded.graph.plan.resolve(t) for t in PARTIAL)
    assert sorted(stored) == sorted(partial)


def eager_seed_outputs(seed: SimpleNamespace, tick: BagTick) -> dict[str, torch.Tensor]:
    obs, action = eager_seed(
        seed, tick.inputs["preprocess/state"], tick.inputs["preprocess/velocity"]
    )
    return {"preprocess/obs": obs, "policy/action": action}


def write_eager_bag(
    path: Path,
    plan,
    types: dict[str, str],
    ticks: BagTicks,
    eager: Callable[[BagTick], dict[str, torch.Tensor]],
) -> Path:
    """A bag of each tick's input messages as recorded, then the outputs ``eager(tick)``
    (eager PyTorch's, carrying its own state) on the output topics: what
    ``replay(..., against="recorded")`` compares the graph with."""
    with BagWriter(path) as bag:
        for tick in ticks.ticks:
            for offset, (topic, data) in enumerate(tick.messages.items()):
                bag.add_topic(topic, types[topic])
                bag.write(topic, tick.time_ns + offset, data)
            for offset, (key, value) in enumerate(eager(tick).items()):
                node, port = key.split("/")
                output = plan.node(node).output(port)
                topic = plan.resolve(output.topic)
                bag.add_topic(topic, output.message_type)
                data = RawArrayCodec(codec(output)).to_bytes(value.numpy())
                bag.write(topic, tick.time_ns + 1000 + offset, data)
    return path


def test_the_recorded_outputs_are_eager_pytorch_s_answers_to_the_recorded_inputs(recorded):
    ticks = load_ticks(recorded.graph.plan, recorded.bag, recorded=True)
    assert len(ticks.ticks) == TICKS
    for tick in ticks.ticks:
        for key, value in eager_seed_outputs(recorded.seed, tick).items():
            got = ticks.recorded[key][tick.index]
            where = f"tick {tick.index}, {key}"
            torch.testing.assert_close(got, value, rtol=1e-5, atol=1e-5,
                                       msg=lambda m, w=where: f"{w}: {m}")  # fmt: skip


def test_a_recorded_bag_replays_with_no_mismatch_against_eager_pytorch_pipeline_and_itself(
    recorded,
):
    plan = recorded.graph.plan
    ticks = load_ticks(plan, recorded.bag)
    types = read_bag(recorded.bag).types
    eager = write_eager_bag(recorded.folder / "eager", plan, types, ticks,
                            lambda tick: eager_seed_outputs(recorded.seed, tick))  # fmt: skip
    for bag, against in ((eager, "recorded"), (recorded.bag, "pipeline"),
                         (recorded.bag, "recorded")):  # fmt: skip
        report = recorded.graph.replay(bag, against=against)
        assert report.ok, report.format()
        assert report.replayed == report.ticks == TICKS
        assert {t.key for t in report.topics} == {"preprocess/obs", "policy/action"}
        assert all(t.compared == TICKS for t in report.topics), report.format()


def test_a_realtime_replay_keeps_the_bag_s_pace(recorded, tmp_path):
    contents = read_bag(recorded.bag)
    paced = tmp_path / "paced"
    with BagWriter(paced) as bag:
        for index, message in enumerate(contents.messages):
            bag.add_topic(message.topic, contents.types[message.topic])
            tick = sum(m.topic == message.topic for m in contents.messages[:index])
            bag.write(message.topic, 10**9 + tick * 50_000_000 + index, message.data)
    started = time.monotonic()
    report = recorded.graph.replay(paced, rate="realtime")
    elapsed = time.monotonic() - started
    assert report.ok, report.format()
    # a lower bound only: a loaded machine makes the replay slower, never faster
    assert elapsed >= 0.05 * (TICKS - 1), f"{TICKS} ticks 50 ms apart replayed in {elapsed:.3f} s"


def test_recorded_outputs_align_by_count_or_else_by_time(recorded, tmp_path):
    contents = read_bag(recorded.bag)
    by_topic = {
        topic: [m for m in contents.messages if m.topic == topic] for topic in contents.types
    }
    action, obs = "/torch_pipeline/policy/action", "/torch_pipeline/preprocess/obs"
    sparse = tmp_path / "sparse"
    with BagWriter(sparse) as bag:
        for topic, kind in contents.types.items():
            bag.add_topic(topic, kind)
        for tick in range(3):
            for topic in (
                "/torch_pipeline/preprocess/state",
                "/torch_pipeline/preprocess/velocity",
            ):
                bag.write(topic, 10**9 * (tick + 1), by_topic[topic][tick].data)
            bag.write(obs, 10**9 * (tick + 1) + 5 * 10**8 * (tick == 0), by_topic[obs][tick].data)
            if tick != 1:  # the action of tick 1 was not recorded
                bag.write(action, 10**9 * (tick + 1) + 10**8, by_topic[action][tick].data)
    ticks = load_ticks(recorded.graph.plan, sparse, recorded=True)
    values = ticks.recorded["policy/action"]
    assert values[1] is None and values[0] is not None and values[2] is not None
    full = load_ticks(recorded.graph.plan, recorded.bag, recorded=True).recorded
    torch.testing.assert_close(values[2], full["policy/action"][2])
    torch.testing.assert_close(ticks.recorded["preprocess/obs"][0], full["preprocess/obs"][0])


def test_against_recorded_catches_a_graph_running_other_weights(recorded, capsys):
    """The policy's weight matrix perturbed, its bias kept (support/weights.py)."""
    other = export_perturbed_seed(recorded.folder / "other", recorded.seed).path
    code = main(
        ["verify", str(other), "--bag", str(recorded.bag), "--against", "recorded", "--composed"]
    )
    printed = capsys.readouterr().out
    assert code == 1, printed
    rows = {line.split()[0]: line for line in printed.splitlines() if line.startswith("  /")}
    assert rows["/torch_pipeline/policy/action"].endswith("FAIL"), printed
    assert rows["/torch_pipeline/preprocess/obs"].endswith("pass"), printed
    assert "verify FAILED: 1 of 2 topics failed" in printed
    plot = recorded.folder / "run_verify.png"
    assert f"plot: {plot}" in printed and plot.stat().st_size > 1000


def test_a_bag_replays_through_a_recurrent_policy_like_the_eager_gru_loop(tmp_path):
    """A GRU policy with explicit state (support/recurrent.py) replayed from a bag of 6 random
    observations: every action and state equals the eager GRU loop's from h = 0, tick by
    tick (the bag holds the eager outputs, ``against="recorded"``), and leapp.Pipeline's; each
    replay on a graph of its own, whose state starts from h = 0."""
    export = export_gru(tmp_path / "export", "onnx").path.parent
    plan = load_plan(export)
    port = plan.node("policy").input("obs")
    observations = [torch.randn(4) for _ in range(6)]
    inputs = tmp_path / "inputs"
    with BagWriter(inputs) as writer:
        writer.add_topic("/gru/policy/obs", port.message_type)
        for tick, obs in enumerate(observations):
            data = RawArrayCodec(codec(port)).to_bytes(obs.numpy())
            writer.write("/gru/policy/obs", 10**9 + tick * 10**6, data)
    ticks = load_ticks(plan, inputs)
    eager = {tick.index: result for tick, result in
             zip(ticks.ticks, gru_loop(observations, "onnx"), strict=True)}  # fmt: skip
    outputs = [o.port for o in plan.node("policy").outputs]  # action, and the state's topic

    def eager_outputs(tick: BagTick) -> dict[str, torch.Tensor]:
        action, h = eager[tick.index]
        return {f"policy/{port}": value for port, value in zip(outputs, (action, h), strict=True)}

    assert outputs == ["action", "h_out"]  # LEAPP's ONNX name of the state output
    bag = write_eager_bag(tmp_path / "eager", plan, read_bag(inputs).types, ticks, eager_outputs)
    for against in ("recorded", "pipeline"):
        with GraphUnderTest(export, Deployment.COMPOSED) as graph:  # its state from h = 0 again
            report = graph.replay(bag, against=against)
            assert report.ok and report.replayed == 6, report.format()
            assert {t.key: t.compared for t in report.topics} == {
                "policy/action": 6, "policy/h_out": 6
            }, report.format()  # fmt: skip
            deviations = [d for t in report.topics for _, d in t.deviations]
            assert max(deviations) <= 1e-5, report.format()


# --- a bag as a robot driver writes it ------------------------------------------------------


def robot_messages(typestore, tick: int, values: dict[str, np.ndarray], order: list[str]):
    """The JointState (joints in ``order``, plus a joint the policy lacks), Imu and Twist of
    one tick, as rosbags message objects."""
    types = typestore.types
    stamp = types["builtin_interfaces/msg/Time"](sec=tick, nanosec=0)
    header = types["std_msgs/msg/Header"](stamp=stamp, frame_id="base")
    vector, quaternion = types["geometry_msgs/msg/Vector3"], types["geometry_msgs/msg/Quaternion"]
    index = {name: i for i, name in enumerate(JOINTS)}
    position = [values["q"][index[n]] if n in index else 0.5 for n in order]
    velocity = [values["qd"][index[n]] if n in index else -0.5 for n in order]
    joint_state = types["sensor_msgs/msg/JointState"](
        header=header,
        name=order,
        position=np.array(position),
        velocity=np.array(velocity),
        effort=np.zeros(0),
    )
    w, x, y, z = values["quat"]
    zeros = np.zeros(9)
    imu = types["sensor_msgs/msg/Imu"](
        header=header,
        orientation=quaternion(x=x, y=y, z=z, w=w),
        orientation_covariance=zeros,
        angular_velocity=vector(*values["gyro"]),
        angular_velocity_covariance=zeros,
        linear_acceleration=vector(0.0, 0.0, 9.81),
        linear_acceleration_covariance=zeros,
    )
    vx, vy, wz = values["cmd"]
    twist = types["geometry_msgs/msg/Twist"](linear=vector(vx, vy, 0.0), angular=vector(0, 0, wz))
    return {"/joint_states": joint_state, "/imu/data": imu, "/cmd_vel": twist}


def write_robot_bag(
    path: Path,
    ticks: list[dict],
    *,
    drop: str | None = None,
    types: dict[str, str] | None = None,
    garbage: bool = False,
    storage: str = "mcap",
) -> Path:
    """A bag of ``ticks`` on the robot's topics, written with rosbags' own serializer; one
    extra Imu message before the first tick completes (superseded). ``drop``: a topic left
    out; ``types``: a topic written as another type; ``garbage``: one JointState is noise."""
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    shuffle = random.Random(2)
    with BagWriter(path, storage) as bag:
        for tick, values in enumerate(ticks):
            order = [*JOINTS, "head_yaw"]
            shuffle.shuffle(order)
            messages = robot_messages(store, tick, values, order)
            for offset, (topic, message) in enumerate(messages.items()):
                if topic == drop:
                    continue
                kind = (types or {}).get(topic, message.__msgtype__)
                data = store.serialize_cdr(message, message.__msgtype__)
                if kind != message.__msgtype__:  # the same fields in another message type
                    data = store.serialize_cdr(
                        store.types[kind](header=messages["/joint_states"].header, twist=message),
                        kind,
                    )
                if garbage and topic == "/joint_states" and tick == 2:
                    data = bytes(data[:4]) + b"\xff" * 7
                bag.add_topic(topic, kind)
                stamp = 10**9 * (tick + 1) + offset * 1000
                if tick == 0 and topic == "/imu/data":
                    bag.write(topic, stamp - 500, data)  # superseded by the next one
                bag.write(topic, stamp, bytes(data))
    return path


@pytest.fixture(scope="module")
def robot(tmp_path_factory):
    folder = tmp_path_factory.mktemp("robot")
    generator = np.random.default_rng(7)
    ticks = []
    for _ in range(ROBOT_TICKS):
        quat = generator.normal(size=4)
        ticks.append(
            {
                "q": generator.normal(size=6),
                "qd": generator.normal(size=6),
                "gyro": generator.normal(size=3),
                "quat": quat / np.linalg.norm(quat),
                "cmd": generator.normal(size=3),
            }
        )
    exported = export_robot(folder)
    return SimpleNamespace(
        export=exported,
        path=exported.path,
        folder=folder,
        ticks=ticks,
        bag=write_robot_bag(folder / "robot_bag", ticks),
    )


def test_a_robot_bag_with_shuffled_joints_is_read_by_joint_name(robot):
    plan = load_plan(robot.path)
    remaps = ROBOT_REMAPS[1::2]
    ticks = load_ticks(plan, robot.bag, remaps)
    assert len(ticks.ticks) == ROBOT_TICKS and ticks.superseded == 1
    for tick, values in zip(ticks.ticks, robot.ticks, strict=True):
        inputs = tick.inputs
        for port, name in (("joint_pos", "q"), ("joint_vel", "qd"), ("base_quat", "quat")):
            expected = torch.tensor(values[name], dtype=torch.float32)
            torch.testing.assert_close(inputs[f"preprocess/{port}"], expected)


def test_a_sqlite3_bag_reads_as_its_mcap_twin(robot):
    plan = load_plan(robot.path)
    sqlite = write_robot_bag(robot.folder / "sqlite", robot.ticks, storage="sqlite3")
    assert list(sqlite.glob("*.db3"))
    twins = [load_ticks(plan, bag, ROBOT_REMAPS[1::2]) for bag in (robot.bag, sqlite)]
    assert [t.time_ns for t in twins[0].ticks] == [t.time_ns for t in twins[1].ticks]
    for first, second in zip(twins[0].ticks, twins[1].ticks, strict=True):
        assert first.messages == second.messages


def test_a_robot_bag_verifies_against_leapp_pipeline_through_remaps(robot, capsys):
    plot = robot.folder / "robot.png"
    code = main(
        [
            "verify",
            str(robot.path),
            "--bag",
            str(robot.bag),
            *ROBOT_REMAPS,
            "--fused",
            "--plot",
            str(plot),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f"{ROBOT_TICKS} of {ROBOT_TICKS} ticks" in printed, printed
    assert "1 input message(s) superseded" in printed, printed
    assert "verify passed" in printed and plot.stat().st_size > 1000


# --- bags that do not fit: exit 2 before anything starts ------------------------------------


def verify_fails_early(robot, capsys, monkeypatch, bag: Path, *extra: str) -> str:
    """``verify --bag`` exits 2 with its error on stderr, and no graph was started."""
    started = []
    monkeypatch.setattr(GraphUnderTest, "start", lambda self: started.append(self) or self)
    code = main(["verify", str(robot.path), "--bag", str(bag), *extra])
    error = capsys.readouterr().err
    assert code == 2, error
    assert not started, "a graph was started"
    return error


def test_a_truncated_bag_exits_2_naming_its_file(robot, capsys, monkeypatch):
    bag = robot.folder / "truncated"
    shutil.copytree(robot.bag, bag)
    storage = next(bag.glob("*.mcap"))
    storage.write_bytes(storage.read_bytes()[: storage.stat().st_size // 2])
    error = verify_fails_early(robot, capsys, monkeypatch, bag, *ROBOT_REMAPS)
    assert f"bag {bag} cannot be read, it is truncated or corrupted" in error, error


def test_a_corrupted_message_exits_2_naming_its_topic(robot, capsys, monkeypatch):
    bag = write_robot_bag(robot.folder / "garbage", robot.ticks, garbage=True)
    error = verify_fails_early(robot, capsys, monkeypatch, bag, *ROBOT_REMAPS)
    assert "the message on /joint_states at" in error and "cannot be read" in error, error


def test_a_bag_missing_an_input_topic_exits_2_naming_the_topic(robot, capsys, monkeypatch):
    bag = write_robot_bag(robot.folder / "no_twist", robot.ticks, drop="/cmd_vel")
    error = verify_fails_early(robot, capsys, monkeypatch, bag, *ROBOT_REMAPS)
    assert f"bag {bag} has no topic /cmd_vel (input /robot_policy/preprocess/cmd_vel" in error


def test_a_topic_of_another_type_exits_2_naming_both_types(robot, capsys, monkeypatch):
    types = {"/cmd_vel": "geometry_msgs/msg/TwistStamped"}
    bag = write_robot_bag(robot.folder / "stamped", robot.ticks, types=types)
    error = verify_fails_early(robot, capsys, monkeypatch, bag, *ROBOT_REMAPS)
    assert "topic /cmd_vel (input /robot_policy/preprocess/cmd_vel) holds " in error, error
    assert "TwistStamped messages, the graph takes geometry_msgs/msg/Twist" in error, error


def test_a_remap_of_no_graph_topic_exits_2(robot, capsys, monkeypatch):
    remap = ("--remap", "nowhere:=/joint_states")
    error = verify_fails_early(robot, capsys, monkeypatch, robot.bag, *remap)
    assert "/robot_policy/nowhere is no topic of graph /robot_policy" in error, error
