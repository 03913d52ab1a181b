"""The raw CDR data path is wire-identical to rclpy's typed messages.

Codec level: for every dtype and robot message the bytes leapp writes are what rclpy's own
deserializer and an independent CDR implementation (``rosbags``, what ``ros2 bag`` files hold)
read as the typed message, in both endiannesses; what rclpy serializes reads back as the typed
path reads it; malformed bytes are MessageErrors and other encodings are read the typed way.
Over real topics (rclpy, Fast DDS): a node on the raw path is heard by typed subscribers, a raw
recorder, ``ros2 topic echo``; bag bytes replayed into it, a big-endian sender and a typed
sender are answered alike; garbage is a counted drop; and the typed fallback works.
"""

from __future__ import annotations

import contextlib
import subprocess
import time

import numpy as np
import pytest
import torch
import yaml
from rclpy.serialization import deserialize_message, serialize_message
from support.ros import ROS2, eager_seed

from leapp_ros.messages import cdr
from leapp_ros.messages.multiarray import SUPPORTED_DTYPES, MessageError, PortCodec
from leapp_ros.messages.raw_multiarray import RawArrayCodec
from leapp_ros.messages.robot_codecs import InputDecoder, OutputEncoder
from leapp_ros.messages.topic_io import TopicReader
from leapp_ros.plan.bindings import Binding
from leapp_ros.testing import Probe, reserve_domain_id
from leapp_ros.testing.probe import qos, ros_env

pytestmark = pytest.mark.ros

SHAPES = [(), (1,), (5,), (2, 3), (0,)]
JOINTS = ("hip", "knee", "ankle")


def typestore():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


def sample(dtype: str, shape: tuple[int, ...], rng):
    if dtype == "bfloat16":
        return torch.randn(shape).to(torch.bfloat16)
    if dtype == "bool":
        return np.asarray(rng.random(shape) > 0.5)
    return np.asarray(rng.standard_normal(shape) * 20).astype(dtype)


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
def test_every_dtype_serializes_as_the_typed_message_and_reads_back(dtype):
    rng, store = np.random.default_rng(0), typestore()
    for shape in SHAPES:
        codec = PortCodec(dtype, shape, ("joint",) if len(shape) == 1 else ())
        raw = RawArrayCodec(codec)
        value = sample(dtype, shape, rng)
        typed = codec.to_message(value)
        payload = raw.to_bytes(value)
        assert deserialize_message(payload, codec.message_class) == typed, (dtype, shape)
        kind = f"std_msgs/msg/{codec.message_class.__name__}"
        bagged = store.deserialize_cdr(payload, kind)  # an independent CDR reader
        assert np.array_equal(np.asarray(bagged.data), np.asarray(typed.data))
        assert [d.size for d in bagged.layout.dim] == [d.size for d in typed.layout.dim]
        expected = codec.array_from_message(typed)
        assert same(raw.from_bytes(payload), expected)
        assert same(raw.from_bytes(serialize_message(typed)), expected)
        bare = codec.message_class(data=typed.data)  # an empty layout, as `ros2 topic pub`
        assert same(raw.from_bytes(serialize_message(bare)), expected)
        big = cdr.write(typed, cdr.layout(codec.message_class), little=False)
        assert deserialize_message(big, codec.message_class) == typed  # rmw reads our BE
        assert same(raw.from_bytes(big), expected), (dtype, shape)


def test_received_arrays_are_writable_copies_unless_views_are_asked_for():
    codec = PortCodec("float32", (4,))
    payload = RawArrayCodec(codec).to_bytes(np.arange(4, dtype=np.float32))
    assert RawArrayCodec(codec).from_bytes(payload).flags.writeable
    assert not RawArrayCodec(codec).from_bytes(payload, copy=False).flags.writeable


def test_malformed_payloads_are_the_typed_paths_message_errors():
    codec = PortCodec("float32", (2, 3), ("row", "col"))
    raw, fields = RawArrayCodec(codec), cdr.layout(codec.message_class)

    def error(message) -> str:
        with pytest.raises(MessageError) as typed:
            codec.array_from_message(message)
        with pytest.raises(MessageError) as wired:
            raw.from_bytes(cdr.write(message, fields))
        assert str(wired.value) == str(typed.value)
        return str(typed.value)

    message = codec.to_message(np.zeros((2, 3), np.float32))
    message.data = message.data[:5]
    assert "got 5 element(s)" in error(message)
    message = codec.to_message(np.zeros((2, 3), np.float32))
    message.layout.data_offset = 2
    assert "data_offset 0" in error(message)
    message = codec.to_message(np.zeros((2, 3), np.float32))
    message.layout.dim[0].size = 3
    message.layout.dim[1].size = 2
    assert "layout dims" in error(message)
    good = raw.to_bytes(np.ones((2, 3), np.float32))
    for end in range(len(good)):
        with pytest.raises(MessageError):
            raw.from_bytes(good[:end])
    rng = np.random.default_rng(1)
    for _ in range(3000):  # random damage: a value or a MessageError, never anything else
        damaged = bytearray(good)
        for at in rng.integers(0, len(good), rng.integers(1, 4)):
            damaged[at] = rng.integers(0, 256)
        with contextlib.suppress(MessageError):
            raw.from_bytes(bytes(damaged))


def test_other_encodings_are_read_the_typed_way():
    codec = PortCodec("float32", (3,))
    typed = codec.to_message(np.array([1.0, 2.0, 3.0], np.float32))
    xcdr2 = b"\x00\x07" + serialize_message(typed)[2:]  # the same bytes are valid XCDR2 here
    with pytest.raises(cdr.UnsupportedEncodingError):
        RawArrayCodec(codec).from_bytes(xcdr2)
    port = type("Port", (), {"topic": "/x", "message_type": "", "binding": None})()
    port.dtype, port.shape, port.labels = "float32", (3,), ()
    reader = TopicReader([port], [0])
    assert np.array_equal(reader.read_raw(xcdr2)[0], [1.0, 2.0, 3.0])


def robot_inputs():
    from geometry_msgs.msg import PoseStamped, Twist, TwistStamped
    from sensor_msgs.msg import Imu, JointState

    state = JointState(name=["ankle", "extra", "hip", "knee"], position=[3.0, 9.0, 1.0, 2.0])
    state.velocity = [0.3, 0.9, 0.1, 0.2]
    state.header.frame_id = "base_link"
    state.header.stamp.sec, state.header.stamp.nanosec = 12, 345
    imu = Imu()
    imu.header.frame_id = "imu"
    imu.angular_velocity.x, imu.angular_velocity.z = 0.5, -1.5
    imu.orientation.w, imu.orientation.y = 0.9, 0.1
    twist = Twist()
    twist.linear.x, twist.angular.z = 1.0, 0.25
    stamped = TwistStamped(twist=twist)
    stamped.header.frame_id = "odom_frame"
    pose = PoseStamped()
    pose.pose.position.y, pose.pose.orientation.w = 2.0, 1.0
    joint = "sensor_msgs/msg/JointState"
    return [
        (joint, state, [
            (Binding(joint, "state/joint/position", ("hip", "knee", "ankle"), "position"), (3,)),
            (Binding(joint, "state/joint/velocity", ("knee", "hip"), "velocity"), (2,)),
        ]),
        ("sensor_msgs/msg/Imu", imu, [
            (Binding("sensor_msgs/msg/Imu", "state/body/angular_velocity",
                     ("angular_velocity.x", "angular_velocity.y", "angular_velocity.z")), (3,)),
            (Binding("sensor_msgs/msg/Imu", "state/body/rotation",
                     ("orientation.w", "orientation.x", "orientation.y", "orientation.z")), (4,)),
        ]),
        ("geometry_msgs/msg/Twist", twist, [
            (Binding("geometry_msgs/msg/Twist", "command/body/velocity",
                     ("linear.x", "linear.y", "angular.z")), (3,)),
        ]),
        ("geometry_msgs/msg/TwistStamped", stamped, [
            (Binding("geometry_msgs/msg/TwistStamped", "command/body/velocity",
                     ("twist.linear.x", "twist.angular.z")), (2,)),
        ]),
        ("geometry_msgs/msg/PoseStamped", pose, [
            (Binding("geometry_msgs/msg/PoseStamped", "state/body/pose",
                     ("pose.position.y", "pose.orientation.w")), (2,)),
        ]),
    ]  # fmt: skip


def test_robot_messages_read_raw_as_they_read_typed():
    store = typestore()
    for message_type, message, bindings in robot_inputs():
        decoder = InputDecoder(message_type, [(b, "float32", shape) for b, shape in bindings])
        fields = cdr.layout(type(message))
        expected = decoder.decode(message)
        for payload in (serialize_message(message), cdr.write(message, fields, little=False)):
            got = decoder.decode(cdr.read(payload, fields))
            assert all(same(a, b) for a, b in zip(got, expected, strict=True)), message_type
        rewritten = cdr.write(cdr.read(serialize_message(message), fields), fields)
        assert deserialize_message(rewritten, type(message)) == message
        assert store.deserialize_cdr(rewritten, message_type) is not None
    _, state, bindings = robot_inputs()[0]
    state.name = ["hip", "ankle"]
    state.position, state.velocity = [1.0, 2.0], [0.0, 0.0]
    ports = [(binding, "float32", shape) for binding, shape in bindings]
    decoder = InputDecoder("sensor_msgs/msg/JointState", ports)
    with pytest.raises(MessageError, match=r"lacks joint\(s\) \['knee'\]"):
        decoder.decode(cdr.read(serialize_message(state), cdr.layout(type(state))))


@pytest.mark.parametrize(
    "message_type, field, shape",
    [
        ("std_msgs/msg/Float64MultiArray", "", (3,)),
        ("std_msgs/msg/Float64MultiArray", "", (2, 3)),
        ("sensor_msgs/msg/JointState", "position", (3,)),
        ("sensor_msgs/msg/JointState", "effort", (3,)),
        ("trajectory_msgs/msg/JointTrajectory", "positions", (4, 3)),
    ],
)
def test_robot_outputs_serialize_as_the_typed_messages(message_type, field, shape):
    from builtin_interfaces.msg import Time

    binding = Binding(message_type, "target/joint/position", JOINTS, field,
                      order=("knee", "ankle", "hip"), period_s=0.02)  # fmt: skip
    labels = ("joint",) if len(shape) == 1 else ("step", "joint")
    encoder = OutputEncoder(binding, "float32", shape, labels)
    value = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    stamp = Time(sec=7, nanosec=123456)
    payload = encoder.encode_raw(value, stamp)
    typed = encoder.encode(value, stamp)
    assert deserialize_message(payload, encoder.message_class) == typed
    assert typestore().deserialize_cdr(payload, message_type) is not None
    assert same(encoder.decode(deserialize_message(payload, encoder.message_class)), value)


# --- over real topics --------------------------------------------------------------------

NAMESPACE = "/torch_pipeline"
OBS = f"{NAMESPACE}/preprocess/obs"
ACTION = f"{NAMESPACE}/policy/action"


def policy_node(seed, probe, *parameters):
    from rclpy.parameter import Parameter

    from leapp_ros.node.pipeline_node import PipelineNode

    spec_path = str(next(seed.path.glob("*.yaml")))
    node = PipelineNode(
        "policy",
        namespace=NAMESPACE,
        context=probe.context,
        parameter_overrides=[
            Parameter("spec_path", Parameter.Type.STRING, spec_path),
            *parameters,
        ],
    )
    probe.executor.add_node(node)
    return node


@pytest.fixture(scope="module")
def live(seed):
    """The seed's policy node on the raw path (at its deployed QoS), spun with a probe in a
    domain of its own, every hop matched both ways."""
    from std_msgs.msg import Float32MultiArray

    with reserve_domain_id() as domain_id, Probe(domain_id) as probe:
        node = policy_node(seed, probe)
        try:
            assert node._raw, "the raw path is the default with Fast DDS"
            typed = probe.publisher(OBS, Float32MultiArray)
            raw = probe.node.create_publisher(Float32MultiArray, OBS, qos())
            actions = probe.subscribe(ACTION, Float32MultiArray)
            recorded: list[bytes] = []  # what a bag recorder gets: the serialized messages
            probe.node.create_subscription(
                Float32MultiArray, ACTION, recorded.append, qos(depth=1000), raw=True
            )
            probe.wait_connected(NAMESPACE, ["policy"])  # the node took both publishers
            probe.spin_until(lambda: node._output_publishers[0].get_subscription_count() >= 2,
                             20, "the action's subscribers")  # fmt: skip
            yield type("Live", (), dict(locals()))
        finally:
            node.destroy_node()


def answer(live, payload_or_message):
    """Publish one obs (bytes go through the raw publisher) and wait for its action."""
    count = len(live.actions)
    publisher = live.raw if isinstance(payload_or_message, bytes) else live.typed
    publisher.publish(payload_or_message)
    live.probe.spin_until(lambda: len(live.actions) > count and len(live.recorded) > count,
                          10, "the action")  # fmt: skip
    return live.actions[-1], live.recorded[-1]


def eager_action(seed, obs):
    with torch.no_grad():
        return seed.module.run_policy(seed.policy, obs)


def test_a_raw_node_is_heard_by_typed_subscribers_and_recorders_alike(seed, live):
    from std_msgs.msg import Float32MultiArray

    store = typestore()
    for _ in range(5):
        obs = eager_seed(seed, torch.randn(6), torch.randn(3))[0]
        message, payload = answer(live, Float32MultiArray(data=obs.tolist()))
        assert torch.allclose(torch.tensor(message.data), eager_action(seed, obs), atol=1e-5)
        assert deserialize_message(payload, Float32MultiArray) == message
        bagged = store.deserialize_cdr(payload, "std_msgs/msg/Float32MultiArray")
        assert np.array_equal(np.asarray(bagged.data), np.asarray(message.data))
        assert [d.label for d in bagged.layout.dim] == [d.label for d in message.layout.dim]


def test_bag_bytes_a_big_endian_sender_and_a_typed_sender_get_the_same_answer(seed, live):
    from std_msgs.msg import Float32MultiArray

    store = typestore()
    obs = eager_seed(seed, torch.randn(6), torch.randn(3))[0]
    typed = Float32MultiArray(data=obs.tolist())
    kind = "std_msgs/msg/Float32MultiArray"
    bag = store.serialize_cdr(store.deserialize_cdr(serialize_message(typed), kind), kind)
    big = cdr.write(typed, cdr.layout(Float32MultiArray), little=False)
    answers = [answer(live, sent)[0].data for sent in (typed, bytes(bag), big)]
    expected = eager_action(seed, obs)
    for data in answers:
        assert np.array_equal(np.asarray(data), np.asarray(answers[0]))
        assert torch.allclose(torch.tensor(data), expected, atol=1e-5)


def test_garbage_on_a_raw_topic_is_a_counted_drop_and_the_node_goes_on(seed, live):
    from std_msgs.msg import Float32MultiArray

    data = live.node._data
    dropped, received = data.dropped, data.received
    garbage = [
        cdr.LITTLE_ENDIAN + b"\xff\xff\xff\x7f" + bytes(12),  # an impossible dim count
        cdr.LITTLE_ENDIAN + bytes(40),  # no elements
        cdr.LITTLE_ENDIAN + b"\x01\x00\x00\x00\xff\xff\x00\x00" + bytes(8),  # a long label
        b"\x00\x00\x00\x00" + bytes(12) + b"\x00\x00\x00\x09" + bytes(8),  # big-endian, short
    ]
    for count, payload in enumerate(garbage, 1):  # one at a time: the node keeps the last one
        live.raw.publish(payload)
        live.probe.spin_until(lambda c=count: data.received >= received + c, 10, "the garbage")
    assert data.dropped == dropped + 4
    obs = eager_seed(seed, torch.randn(6), torch.randn(3))[0]
    message, _ = answer(live, Float32MultiArray(data=obs.tolist()))
    assert torch.allclose(torch.tensor(message.data), eager_action(seed, obs), atol=1e-5)


def test_ros2_topic_echo_shows_what_the_raw_node_published(seed, live):
    from std_msgs.msg import Float32MultiArray

    if ROS2 is None:
        pytest.skip("the ros2 CLI is not installed (scripts/setup.sh with ../shared/ros2-launch)")
    obs = eager_seed(seed, torch.randn(6), torch.randn(3))[0]
    publisher = live.node._output_publishers[0]
    readers = publisher.get_subscription_count()
    # the echo's own subscription reliable: once the node's publisher has matched it, the
    # echo asks for what it missed; so one action is enough
    echo = subprocess.Popen(
        [ROS2, "topic", "echo", ACTION, "std_msgs/msg/Float32MultiArray", "--once",
         "--qos-reliability", "reliable", "--no-daemon", "--timeout", "60"],
        env=ros_env(live.domain_id), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        live.probe.spin_until(
            lambda: publisher.get_subscription_count() > readers or echo.poll() is not None,
            60,
            "ros2 topic echo to subscribe",
        )
        answer(live, Float32MultiArray(data=obs.tolist()))
        out, err = echo.communicate(timeout=60)
    finally:
        echo.kill()
    assert echo.returncode == 0, out + err
    document = yaml.safe_load(out.split("\n---")[0])
    assert torch.allclose(torch.tensor(document["data"]), eager_action(seed, obs), atol=1e-5)
    assert [d["label"] for d in document["layout"]["dim"]] == [
        d.label for d in live.actions[-1].layout.dim
    ]


@pytest.mark.parametrize("fallback", ["parameter", "unknown rmw"])
def test_the_typed_path_answers_where_raw_is_off_or_unavailable(seed, fallback, monkeypatch):
    from rclpy.parameter import Parameter
    from std_msgs.msg import Float32MultiArray

    parameters = []
    if fallback == "parameter":
        parameters.append(Parameter("raw_messages", Parameter.Type.BOOL, False))
    else:
        import rclpy.utilities

        monkeypatch.setattr(rclpy.utilities, "get_rmw_implementation_identifier",
                            lambda: "rmw_made_up_cpp")  # fmt: skip
    with reserve_domain_id() as domain_id, Probe(domain_id) as probe:
        node = policy_node(seed, probe, *parameters)
        try:
            assert node._raw is False
            assert not node._writers[0].raw
            publisher = probe.publisher(OBS, Float32MultiArray)
            actions = probe.subscribe(ACTION, Float32MultiArray)
            probe.wait_connected(NAMESPACE, ["policy"])
            obs = eager_seed(seed, torch.randn(6), torch.randn(3))[0]
            publisher.publish(Float32MultiArray(data=obs.tolist()))
            probe.spin_until(lambda: actions, 20, "an action")
            expected = eager_action(seed, obs)
            assert torch.allclose(torch.tensor(actions[-1].data), expected, atol=1e-5)
        finally:
            node.destroy_node()


def test_output_stamps_are_the_nodes_ros_time_wall_clock_or_simulated(seed, live):
    from builtin_interfaces.msg import Time
    from rclpy.parameter import Parameter
    from rclpy.time import Time as RosTime

    from leapp_ros.messages.topic_io import WallStamp, now_stamp

    def nanoseconds(stamp):
        return stamp.sec * 1_000_000_000 + stamp.nanosec

    clock = live.node.get_clock()
    for raw, kind in ((True, WallStamp), (False, Time)):
        before = time.time_ns()
        stamp = now_stamp(clock, raw)
        after = time.time_ns()
        assert isinstance(stamp, kind)
        assert before <= nanoseconds(stamp) <= after
        assert 0 <= stamp.nanosec < 1_000_000_000
    simulated = policy_node(seed, live.probe, Parameter("use_sim_time", value=True))
    try:
        clock = simulated.get_clock()
        assert clock.ros_time_is_active
        clock.set_ros_time_override(RosTime(seconds=42, nanoseconds=7))
        for raw in (True, False):
            assert nanoseconds(now_stamp(clock, raw)) == 42_000_000_007
    finally:
        live.probe.executor.remove_node(simulated)
        simulated.destroy_node()
