"""A node fires on one coherent set of its inputs, over real DDS, in every deployment mode.

The seed pipeline's preprocess node needs a state and a velocity of the same instant. When it
drops one of them (NaN, a malformed message), the other one of that instant must be dropped
too: the next good pair is then answered exactly like eager PyTorch on that pair, never with
(new state, the previous pair's velocity). Each dropped set is counted (``incomplete_sets``).

The nodes run at their deployed QoS (best effort, depth 1): every message goes out once through
the harness's publishers, and the next one on a topic only once the node has taken the last
(its status counts it), so the node sees them in the order sent, none replaced.
"""

from __future__ import annotations

import array
import math

import pytest
import torch
from support.ros import eager_seed

from leapp_ros.testing import Deployment, GraphOptions, GraphUnderTest, graph_fixture

pytestmark = pytest.mark.ros

NAMESPACE = "/torch_pipeline"


graph = graph_fixture(
    lambda request: request.getfixturevalue("seed").path, deployments=list(Deployment)
)


def floats(*values: float):
    from std_msgs.msg import Float32MultiArray

    return Float32MultiArray(data=array.array("f", values))


def incomplete_sets(statuses) -> int:
    return sum(status.get("incomplete_sets", 0) for status in statuses.values())


def send_bad_pair(graph, bad_port: str, bad_message, *, bad_first: bool) -> None:
    """One pair of preprocess inputs of which ``bad_port`` carries ``bad_message``, one message
    at a time, each taken before the next; nothing may come out of it."""
    state, velocity = torch.randn(6).tolist(), torch.randn(3).tolist()
    good = {"state": floats(*state), "velocity": floats(*velocity)}
    good[bad_port] = bad_message
    order = [bad_port, *(port for port in good if port != bad_port)]
    before = len(graph.received("policy/action"))
    counted = graph.wait_received()
    for port in order if bad_first else reversed(order):
        graph.publish({f"{NAMESPACE}/preprocess/{port}": good[port]})
        status = graph.wait_received()
    assert incomplete_sets(status) == incomplete_sets(counted) + 1, "the spoilt set counted"
    assert status["preprocess"]["runs"] == counted["preprocess"]["runs"], "a spoilt set ran"
    assert len(graph.received("policy/action")) == before, "a spoilt set was answered"


def assert_next_pair_is_answered_like_eager(graph, seed) -> None:
    for _ in range(3):
        state, velocity = torch.randn(6) * 3, torch.randn(3)
        out = graph.step({"preprocess/state": state, "preprocess/velocity": velocity})
        _, action = eager_seed(seed, state, velocity)
        torch.testing.assert_close(out["policy/action"], action, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad_first", [True, False], ids=["bad_first", "bad_last"])
@pytest.mark.parametrize("bad_port", ["state", "velocity"])
def test_a_nan_message_drops_its_whole_set(graph, seed, bad_port, bad_first):
    assert_next_pair_is_answered_like_eager(graph, seed)
    size = 6 if bad_port == "state" else 3
    send_bad_pair(graph, bad_port, floats(math.nan, *[0.0] * (size - 1)), bad_first=bad_first)
    assert_next_pair_is_answered_like_eager(graph, seed)


def test_a_malformed_message_drops_its_whole_set(graph, seed):
    send_bad_pair(graph, "state", floats(1.0, 2.0), bad_first=True)  # 2 of 6 elements
    assert_next_pair_is_answered_like_eager(graph, seed)
    assert sum(status["dropped"] for status in graph.status().values()) >= 1


def test_sets_spoilt_in_a_row_are_each_dropped(graph, seed):
    for _ in range(5):
        send_bad_pair(graph, "state", floats(*[math.inf] * 6), bad_first=True)
    assert_next_pair_is_answered_like_eager(graph, seed)


# --- robot messages gathered by header stamp (sync: approximate) ------------------------------

ROBOT_NS = "/robot_policy"
SLOP_MS = 5.0
TICK_NS = 20_000_000


@pytest.fixture(scope="module")
def robot(tmp_path_factory):
    from support.robot import export_robot

    return export_robot(tmp_path_factory.mktemp("robot"))


def _stamped_params(path):
    """Stamped inputs (TwistStamped for the command), gathered by stamp in the node that
    reads them: preprocess, or the fused node. No QoS override: two instants are in flight at
    once in the node's gathering, not in its one-message queues (the messages go one at a
    time, each taken before the next)."""
    import yaml

    def gathering():  # a new dict for each section: rcl refuses YAML aliases
        return {
            "sync": "approximate",
            "sync_slop_ms": SLOP_MS,
            "ports": {"command": {"message": "geometry_msgs/msg/TwistStamped"}},
        }

    document = {
        f"{ROBOT_NS}/preprocess": {"ros__parameters": gathering()},
        f"{ROBOT_NS}/leapp_fused": {"ros__parameters": gathering()},
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


@pytest.fixture(scope="module", params=list(Deployment), ids=str)
def stamped(request, robot, tmp_path_factory):
    params = _stamped_params(tmp_path_factory.mktemp("stamped") / "params.yaml")
    options = GraphOptions(request.param, params_file=params)
    with GraphUnderTest(robot.path, options) as graph:
        topics = {"joints": "joint_states", "imu": "imu", "twist": "cmd_vel"}
        yield graph, {name: f"{ROBOT_NS}/preprocess/{topic}" for name, topic in topics.items()}


def robot_messages(robot, inputs, stamp_ns: int, jitter_ns=(0, 0, 0)):
    """``{"joints" | "imu" | "twist": message}`` of one instant; each stamp off by its jitter."""
    from builtin_interfaces.msg import Time
    from geometry_msgs.msg import TwistStamped
    from sensor_msgs.msg import Imu, JointState

    pos, vel, gyro, quat, command = (value.tolist() for value in inputs)

    def time(offset):
        total = stamp_ns + offset
        return Time(sec=total // 1_000_000_000, nanosec=total % 1_000_000_000)

    joints = JointState(name=list(robot.module.JOINTS))
    joints.position, joints.velocity = array.array("d", pos), array.array("d", vel)
    joints.header.stamp = time(jitter_ns[0])
    imu = Imu()
    imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z = gyro
    imu.orientation.w, imu.orientation.x, imu.orientation.y, imu.orientation.z = quat
    imu.header.stamp = time(jitter_ns[1])
    twist = TwistStamped()
    twist.twist.linear.x, twist.twist.linear.y, twist.twist.angular.z = command
    twist.header.stamp = time(jitter_ns[2])
    return {"joints": joints, "imu": imu, "twist": twist}


def fresh_robot_inputs(generator):
    quat = torch.randn(4, generator=generator)
    return (
        torch.randn(6, generator=generator),
        torch.randn(6, generator=generator),
        torch.randn(3, generator=generator),
        quat / quat.norm(),
        torch.randn(3, generator=generator),
    )


def send_in_order(graph, topics, order):
    """Each message once, taken by the node (its status counts it) before the next goes."""
    for name, message in order:
        graph.publish({topics[name]: message})
        graph.wait_received()


def commands_after(graph, before: int, count: int) -> list[torch.Tensor]:
    """The commands since ``before``: every message sent has been taken, so no more can come
    of them than there are now."""
    graph.wait_received()
    received = graph.received("policy/joint_targets")
    assert len(received) == before + count, f"{len(received) - before} commands, not {count}"
    return received[before:]


def assert_commands_are_eager(robot, commands, inputs) -> None:
    from support.robot import eager_targets

    for command, given in zip(commands, inputs, strict=True):
        expected = eager_targets(robot, *given).to(command.dtype)
        torch.testing.assert_close(command, expected, rtol=1e-5, atol=1e-5)


def test_interleaved_instants_with_jittered_stamps_pair_by_stamp(stamped, robot):
    graph, topics = stamped
    generator = torch.Generator().manual_seed(1)
    base = 1_000 * TICK_NS
    inputs = [fresh_robot_inputs(generator) for _ in range(3)]
    jitters = [(0, 0, 0), (2_000_000, -1_500_000, 1_000_000), (-2_000_000, 1_800_000, 0)]
    ticks = [
        robot_messages(robot, given, base + n * TICK_NS, jitter)
        for n, (given, jitter) in enumerate(zip(inputs, jitters, strict=True))
    ]
    before = len(graph.received("policy/joint_targets"))
    # one instant, then two in flight at once: by arrival the second set would mix them
    send_in_order(graph, topics, [(name, ticks[0][name]) for name in ("imu", "twist", "joints")])
    send_in_order(
        graph,
        topics,
        [
            ("joints", ticks[1]["joints"]),
            ("imu", ticks[1]["imu"]),
            ("joints", ticks[2]["joints"]),
            ("imu", ticks[2]["imu"]),
            ("twist", ticks[1]["twist"]),
            ("twist", ticks[2]["twist"]),
        ],
    )
    assert_commands_are_eager(robot, commands_after(graph, before, 3), inputs)


def test_a_nan_joint_state_drops_its_instant_and_the_next_one_is_exact(stamped, robot):
    graph, topics = stamped
    generator = torch.Generator().manual_seed(2)
    base = 5_000 * TICK_NS
    spoilt, good = fresh_robot_inputs(generator), fresh_robot_inputs(generator)
    spoilt[0][2] = math.nan
    first = robot_messages(robot, spoilt, base, (0, 1_000_000, -1_000_000))
    second = robot_messages(robot, good, base + TICK_NS, (1_000_000, 0, 0))
    counted = incomplete_sets(graph.wait_received())
    before = len(graph.received("policy/joint_targets"))
    send_in_order(
        graph,
        topics,
        [
            ("imu", first["imu"]),
            ("joints", first["joints"]),  # NaN: spoils the instant, imu already came
            ("joints", second["joints"]),
            ("twist", first["twist"]),  # comes after: dropped with its instant
            ("imu", second["imu"]),
            ("twist", second["twist"]),
        ],
    )
    assert_commands_are_eager(robot, commands_after(graph, before, 1), [good])
    assert incomplete_sets(graph.status()) == counted + 1, "the spoilt instant counted"
