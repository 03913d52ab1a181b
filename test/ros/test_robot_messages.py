"""Standard robot messages chosen by port semantics: the rules, checked without DDS.

Which message a port gets (leapp_ros.plan.bindings through make_plan), how messages decode into
port values (joint names picked and reordered, bad messages refused) and how outputs encode in
a controller's order, the ports.<port>.* overrides, and what inspect shows. The live graph is
tested in test_robot_topics.py.
"""

from __future__ import annotations

import array

import numpy as np
import pytest
import torch
from support.robot import export_robot

from leapp.spec import TensorSpec
from leapp_ros.messages.multiarray import MessageError
from leapp_ros.messages.robot_codecs import InputDecoder, OutputEncoder
from leapp_ros.messages.topic_io import float_ports, nonfinite
from leapp_ros.plan.bindings import (
    FLOAT64_ARRAY,
    JOINT_STATE,
    JOINT_TRAJECTORY,
    BindingError,
    PortOverride,
    bind_port,
)
from leapp_ros.plan.pipeline import PlanError
from leapp_ros.plan.settings import StartupError, port_overrides
from leapp_ros.testing.topics import InputSender

JOINTS = ("hip", "knee", "ankle")


@pytest.fixture(scope="module")
def robot_export(tmp_path_factory):
    return export_robot(tmp_path_factory.mktemp("robot")).path


def _joint_state(names, position=None, velocity=None):
    from sensor_msgs.msg import JointState

    message = JointState(name=list(names))
    if position is not None:
        message.position = array.array("d", position)
    if velocity is not None:
        message.velocity = array.array("d", velocity)
    return message


def _joint_decoder():
    position = bind_port("input", "state/joint/position", (3,), (list(JOINTS),))[0]
    velocity = bind_port("input", "state/joint/velocity", (1, 3), (list(JOINTS),))[0]
    return InputDecoder(JOINT_STATE, [(position, "float32", (3,)), (velocity, "float32", (1, 3))])


# ------------------------------------------------------------------------- the choice


def test_joint_state_inputs_share_one_topic_per_node():
    position, _ = bind_port("input", "state/joint/position", (3,), (list(JOINTS),))
    velocity, _ = bind_port("input", "state/joint/velocity", (3,), (list(JOINTS),))
    assert position.message_type == velocity.message_type == JOINT_STATE
    assert position.stem == velocity.stem == "joint_states"
    assert (position.field, velocity.field) == ("position", "velocity")


def test_a_joint_kind_without_names_keeps_its_multiarray_and_says_why():
    binding, note = bind_port("input", "state/joint/position", (3,), None)
    assert binding is None
    assert "joint names" in note and "ports.<port>.names" in note


def test_names_from_the_override_bind_a_port_without_semantics():
    override = PortOverride(kind="state/joint/effort", names=JOINTS)
    binding, _ = bind_port("input", None, (3,), None, override)
    assert (binding.message_type, binding.field, binding.elements) == (
        JOINT_STATE,
        "effort",
        JOINTS,
    )


def test_an_override_that_does_not_fit_is_an_error_naming_the_port():
    override = PortOverride(kind="state/body/angular_velocity")
    with pytest.raises(BindingError, match=r"node 'n' input 'w'.*3 elements.*\[4\]"):
        bind_port("input", None, (4,), None, override, where="node 'n' input 'w'")
    with pytest.raises(BindingError, match="can be sensor_msgs/msg/JointState"):
        bind_port("input", None, (3,), None, PortOverride(message="std_msgs/String"))


def test_multiarray_override_keeps_the_std_msgs_array():
    override = PortOverride(message="multiarray")
    assert bind_port("input", "state/joint/position", (3,), (list(JOINTS),), override)[0] is None


def test_joint_targets_go_out_as_float64_in_the_controller_order():
    override = PortOverride(order=("ankle", "hip", "knee"))
    binding, _ = bind_port("output", "target/joint/position", (3,), (list(JOINTS),), override)
    assert binding.message_type == FLOAT64_ARRAY
    assert binding.order == ("ankle", "hip", "knee")


def test_an_order_that_is_not_the_ports_joints_is_an_error():
    override = PortOverride(order=("hip", "knee", "elbow"))
    with pytest.raises(BindingError, match="missing \\['ankle'\\], unknown \\['elbow'\\]"):
        bind_port("output", "target/joint/position", (3,), (list(JOINTS),), override)


def test_quaternion_order_follows_the_port_names_else_isaac_lab_wxyz():
    names = (["x", "y", "z", "w"],)
    assert bind_port("input", "state/body/rotation", (4,), names)[0].elements[0] == "orientation.x"
    assert bind_port("input", "state/body/rotation", (4,), None)[0].elements[0] == "orientation.w"


def test_an_output_another_node_consumes_keeps_its_multiarray(robot_export):
    from leapp import spec as spec_module
    from leapp_ros.plan.pipeline import make_plan

    plan = make_plan(spec_module.load(robot_export))
    assert plan.node("policy").input("obs").message_type == "std_msgs/msg/Float32MultiArray"
    with pytest.raises(PlanError, match="consumed by another node"):
        make_plan(
            spec_module.load(robot_export),
            ports={"preprocess": {"obs": PortOverride(kind="kp", names=tuple("abc"))}},
        )


def test_plan_and_inspect_show_the_robot_messages(robot_export):
    from leapp_ros.run.processes import load_plan
    from leapp_ros.tools.inspection import describe_plan

    plan = load_plan(robot_export)
    pre = plan.node("preprocess")
    assert {p.port: (p.topic, p.message_type) for p in pre.inputs} == {
        "joint_pos": ("preprocess/joint_states", JOINT_STATE),
        "joint_vel": ("preprocess/joint_states", JOINT_STATE),
        "base_ang_vel": ("preprocess/imu", "sensor_msgs/msg/Imu"),
        "base_quat": ("preprocess/imu", "sensor_msgs/msg/Imu"),
        "command": ("preprocess/cmd_vel", "geometry_msgs/msg/Twist"),
    }
    text = describe_plan(plan)
    assert "robot messages" in text
    assert "/robot_policy/preprocess/joint_states [sensor_msgs/msg/JointState]" in text
    assert "/robot_policy/policy/joint_targets [std_msgs/msg/Float64MultiArray]" in text


def test_params_file_overrides_reach_the_plan(robot_export, tmp_path):
    from leapp_ros.run.processes import load_plan

    params = tmp_path / "params.yaml"
    params.write_text(
        "/robot_policy/policy:\n  ros__parameters:\n    ports:\n      joint_targets:\n"
        "        message: trajectory_msgs/JointTrajectory\n",
        encoding="utf-8",
    )
    port = load_plan(robot_export, params_file=params).node("policy").output("joint_targets")
    assert port.message_type == JOINT_TRAJECTORY


def test_port_overrides_read_wildcard_and_node_sections():
    document = {
        "/**": {"ros__parameters": {"ports": {"q": {"kind": "state/joint/position"}}}},
        "policy": {"ros__parameters": {"ports.q.names": ["a", "b"]}},
    }
    assert port_overrides(document, ["policy", "other"]) == {
        "policy": {"q": PortOverride(kind="state/joint/position", names=("a", "b"))},
        "other": {"q": PortOverride(kind="state/joint/position")},
    }
    with pytest.raises(StartupError, match=r"ports\.q\.names must be a list of names"):
        port_overrides({"/**": {"ros__parameters": {"ports.q.names": "a"}}}, ["policy"])


# ------------------------------------------------------------------------- decoding


def test_joint_state_is_reordered_by_name_and_extra_names_are_ignored():
    decoder = _joint_decoder()
    ordered = _joint_state(["hip", "knee", "ankle"], [1, 2, 3], [4, 5, 6])
    shuffled = _joint_state(["arm", "ankle", "hip", "knee"], [9, 3, 1, 2], [9, 6, 4, 5])
    for message in (ordered, shuffled, ordered):  # the cached order follows the names
        position, velocity = decoder.decode(message)
        np.testing.assert_array_equal(position, np.float32([1, 2, 3]))
        np.testing.assert_array_equal(velocity, np.float32([[4, 5, 6]]))
        assert position.dtype == np.float32 and velocity.shape == (1, 3)


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (_joint_state(["hip", "knee"], [1, 2], [3, 4]), "lacks joint\\(s\\) \\['ankle'\\]"),
        (_joint_state(["hip", "knee", "ankle"], [1, 2], [3, 4, 5]), "3 names but 2 position"),
        (_joint_state(["hip", "knee", "ankle"], [1, 2, 3]), "3 names but 0 velocity"),
        (_joint_state(["hip", "hip", "knee", "ankle"], [1] * 4, [1] * 4), "repeats joint"),
    ],
    ids=["missing_name", "short_field", "missing_field", "repeated_name"],
)
def test_bad_joint_states_are_message_errors(message, error):
    with pytest.raises(MessageError, match=error):
        _joint_decoder().decode(message)


def test_imu_and_twist_fields_are_read_in_port_order():
    from geometry_msgs.msg import Twist, Vector3
    from sensor_msgs.msg import Imu

    gyro = bind_port("input", "state/body/angular_velocity", (3,), None)[0]
    quat = bind_port("input", "state/body/rotation", (4,), None)[0]
    imu = InputDecoder("sensor_msgs/msg/Imu", [(gyro, "float32", (3,)), (quat, "float64", (4,))])
    message = Imu(angular_velocity=Vector3(x=1.0, y=2.0, z=3.0))
    message.orientation.x, message.orientation.w = 0.5, 0.25
    w, q = imu.decode(message)
    np.testing.assert_array_equal(w, [1, 2, 3])
    np.testing.assert_array_equal(q, [0.25, 0.5, 0, 0])
    command = bind_port("input", "command/body/velocity", (1, 3), None)[0]
    twist = InputDecoder("geometry_msgs/msg/Twist", [(command, "float32", (1, 3))])
    moving = Twist(linear=Vector3(x=1.0, y=2.0, z=9.0), angular=Vector3(z=3.0))
    np.testing.assert_array_equal(twist.decode(moving)[0], [[1, 2, 3]])


def test_encoded_inputs_decode_to_the_same_values():
    decoder = _joint_decoder()
    message = decoder.encode([np.float32([1, 2, 3]), np.float32([[4, 5, 6]])])
    assert list(message.name) == list(JOINTS)
    position, velocity = decoder.decode(message)
    np.testing.assert_array_equal(position, [1, 2, 3])
    np.testing.assert_array_equal(velocity, [[4, 5, 6]])


# ------------------------------------------------------------------------- encoding


def test_float64_targets_are_sent_in_controller_order_and_read_back():
    override = PortOverride(order=("ankle", "hip", "knee"))
    binding, _ = bind_port("output", "target/joint/position", (3,), (list(JOINTS),), override)
    encoder = OutputEncoder(binding, "float32", (3,))
    message = encoder.encode(np.float32([1, 2, 3]))
    assert list(message.data) == [3.0, 1.0, 2.0]
    assert [dim.size for dim in message.layout.dim] == [3]
    np.testing.assert_array_equal(encoder.decode(message), np.float32([1, 2, 3]))


def test_a_chunk_is_a_joint_trajectory_with_one_point_per_step():
    override = PortOverride(message="trajectory_msgs/msg/JointTrajectory", order=("knee", "hip"))
    names = ("__temporal_axis__", ["hip", "knee"])
    binding, _ = bind_port(
        "output", "target/joint/position", (3, 2), names, override, temporal_period_ms=20
    )
    encoder = OutputEncoder(binding, "float32", (3, 2))
    chunk = np.float32([[1, 2], [3, 4], [5, 6]])
    message = encoder.encode(chunk)
    assert list(message.joint_names) == ["knee", "hip"]
    assert [list(p.positions) for p in message.points] == [[2, 1], [4, 3], [6, 5]]
    assert [p.time_from_start.nanosec for p in message.points] == [
        20_000_000,
        40_000_000,
        60_000_000,
    ]
    np.testing.assert_array_equal(encoder.decode(message), chunk)


def test_joint_state_output_names_its_joints():
    override = PortOverride(message="sensor_msgs/JointState")
    binding, _ = bind_port("output", "target/joint/velocity", (1, 3), (list(JOINTS),), override)
    message = OutputEncoder(binding, "float32", (1, 3)).encode(np.float32([[1, 2, 3]]))
    assert list(message.name) == list(JOINTS) and list(message.velocity) == [1, 2, 3]


# ------------------------------------------------------------------------- guard, harness


def test_nonfinite_finds_nan_and_inf_in_float_ports_only():
    ports = [TensorSpec("a", "float32", (2,)), TensorSpec("b", "int64", (2,))]
    positions = float_ports(ports)
    assert positions == (0,)
    assert nonfinite([np.float32([1, np.nan]), np.int64([1, 2])], positions) == [0]
    assert nonfinite([torch.tensor([1.0, float("inf")])], positions) == [0]
    assert nonfinite([np.float32([1, 2])], positions) == []
    # tensors NumPy cannot view are checked by torch
    for tensor in (
        torch.tensor([float("nan"), 1.0], dtype=torch.bfloat16),
        torch.tensor([1.0, float("-inf")], requires_grad=True),
    ):
        assert nonfinite([tensor], positions) == [0]
        assert nonfinite([torch.ones_like(tensor)], positions) == []


@pytest.mark.parametrize(
    "value, bad",
    [
        (np.float32([3e38, 3e38, -1.0]), False),  # finite, but the sum overflows
        (np.float16([60000, 60000]), False),
        (np.float64([[1.0, 2.0], [3.0, np.nan]]), True),  # every axis, not the first only
        (np.float32([np.inf, -np.inf]), True),
        (np.zeros((0, 3), np.float32), False),
        (np.where(np.arange(10_000) == 9_999, np.nan, 1.0).astype(np.float32), True),  # large
        (np.full(10_000, 3e38, np.float32), False),
        (np.where(np.arange(10_000) == 3, -np.inf, 1.0).astype(np.float32), True),  # its min
        (np.where(np.arange(10_000) == 7, np.inf, -1.0).astype(np.float32), True),  # its max
        (torch.tensor([[1.0, 2.0], [float("nan"), 0.0]]), True),
        (np.float64([1e308, 1e308]), False),  # Python's float sum overflows too
        (np.float32([[1.0, np.nan, 2.0], [3.0, 4.0, 5.0]]).T, True),  # not contiguous
        (np.where(np.arange(200) == 150, np.inf, 1.0).astype(np.float32), True),  # NumPy's sum
        (np.float16([np.nan]).reshape(1, 1, 1), True),
    ],
)
def test_nonfinite_is_exact_where_a_sum_would_overflow_or_hide_a_value(value, bad):
    assert nonfinite([value], (0,)) == ([0] if bad else [])


def test_harness_sends_ports_of_one_message_together(robot_export):
    from leapp_ros.run.processes import load_plan

    node = load_plan(robot_export).node("preprocess")
    sender = InputSender("preprocess", [node.input("joint_pos"), node.input("joint_vel")])
    with pytest.raises(MessageError, match="give preprocess/joint_vel too"):
        sender.to_message({"preprocess/joint_pos": torch.zeros(6)})
    message = sender.to_message(
        {"preprocess/joint_pos": torch.arange(6.0), "preprocess/joint_vel": torch.ones(6)}
    )
    assert list(message.position) == list(range(6)) and len(message.name) == 6


def test_an_onnx_node_loads_and_decodes_without_importing_torch(robot_export):
    import subprocess
    import sys

    script = f"""
import sys
import leapp_ros.node.pipeline_node
from leapp.spec import load
from leapp_ros.node.model import load_node_model
from leapp_ros.plan.pipeline import make_plan
from leapp_ros.messages.topic_io import OutputWriter, topic_readers
spec = load({str(robot_export)!r}, verify_checksums=True)
plan = make_plan(spec)
model = load_node_model(spec, "policy")
node = plan.node("policy")
readers, writers = topic_readers(node.inputs), [OutputWriter(p) for p in node.outputs]
(obs,) = readers[0].read(readers[0]._codec.to_message(__import__("numpy").zeros(21, "float32")))
writers[0].write(model.call([obs])[0])
assert "torch" not in sys.modules, "torch was imported"
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


def test_port_parameters_are_read_and_unknown_ports_are_named(robot_export):
    from types import SimpleNamespace

    from leapp import spec as spec_module
    from leapp_ros.plan.settings import declare_port_overrides

    given = {"ports.joint_targets.order": list(reversed(JOINTS)), "ports.typo.kind": "kp"}
    declared, warnings = set(), []

    def declare_parameter(name, default, descriptor):
        declared.add(name)
        return SimpleNamespace(value=given.get(name, default))

    node = SimpleNamespace(
        declare_parameter=declare_parameter,
        has_parameter=declared.__contains__,
        get_logger=lambda: SimpleNamespace(warning=warnings.append),
        _parameter_overrides=given,
    )
    model = spec_module.load(robot_export).model("policy")
    assert declare_port_overrides(node, model) == {
        "joint_targets": PortOverride(order=tuple(reversed(JOINTS)))
    }
    assert len(warnings) == 1
    assert "['ports.typo.kind'] name no port" in warnings[0]
    assert "['obs', 'joint_targets']" in warnings[0]
