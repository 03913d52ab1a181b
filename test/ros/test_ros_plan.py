"""leapp_ros.plan.pipeline maps a spec onto ROS 2 without importing rclpy."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.specs import LEAPP_SEED_SPEC, LEAPP_SEMANTIC_SPEC

from leapp import spec as spec_module
from leapp_ros.plan.pipeline import (
    PUBLISHER_QOS,
    SUBSCRIPTION_QOS,
    Firing,
    PlanError,
    make_plan,
    message_type,
)


def load_text(tmp_path, text, name="torch_pipeline"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return spec_module.load(path, verify_checksums=False)


def test_seed_plan_has_a_node_per_model_a_topic_per_tensor_and_a_packed_input(tmp_path):
    plan = make_plan(load_text(tmp_path, LEAPP_SEED_SPEC))
    assert plan.namespace == "/torch_pipeline"
    assert [n.name for n in plan.nodes] == ["preprocess", "policy"]
    assert plan.node("preprocess").packed.ports == ("state", "velocity")
    assert plan.packed_topics() == [
        ("/torch_pipeline/preprocess/packed_inputs", "std_msgs/msg/Float32MultiArray")
    ]
    assert plan.topics() == [
        ("/torch_pipeline/policy/action", "std_msgs/msg/Float32MultiArray"),
        ("/torch_pipeline/preprocess/obs", "std_msgs/msg/Float32MultiArray"),
        ("/torch_pipeline/preprocess/state", "std_msgs/msg/Float32MultiArray"),
        ("/torch_pipeline/preprocess/velocity", "std_msgs/msg/Float32MultiArray"),
    ]


def test_data_flow_input_subscribes_to_the_producers_topic(tmp_path):
    policy = make_plan(load_text(tmp_path, LEAPP_SEED_SPEC)).node("policy")
    obs = policy.input("obs")
    assert (obs.kind, obs.topic, obs.source, obs.triggers) == (
        "data_flow",
        "preprocess/obs",
        "preprocess/obs",
        True,
    )
    assert obs.qos == SUBSCRIPTION_QOS and obs.qos.reliability == "best_effort"
    assert policy.output("action").qos == PUBLISHER_QOS


def test_namespace_can_be_overridden_and_is_made_absolute(tmp_path):
    plan = make_plan(load_text(tmp_path, LEAPP_SEED_SPEC), namespace="robot1/brain")
    assert plan.namespace == "/robot1/brain"
    assert plan.resolve("policy/action") == "/robot1/brain/policy/action"


def test_self_feedback_stays_inside_the_node_and_never_triggers(tmp_path):
    plan = make_plan(load_text(tmp_path, LEAPP_SEMANTIC_SPEC, "sem_graph"))
    h = plan.node("policy").input("h")
    assert (h.kind, h.topic, h.triggers) == ("state", None, False)
    assert plan.node("policy").output("h").topic == "policy/h"  # still published, for observers
    assert plan.initial_values == tmp_path / "sem_graph_initial_values.safetensors"


def test_every_output_is_published_even_when_consumed(tmp_path):
    plan = make_plan(load_text(tmp_path, LEAPP_SEMANTIC_SPEC, "sem_graph"))
    assert [o.topic for o in plan.node("policy").outputs] == [
        "policy/action",
        "policy/action_chunk",
        "policy/h",
        "policy/kp",
    ]
    assert plan.node("post").input("action").topic == "policy/action"


def test_layout_labels_come_from_element_name_markers(tmp_path):
    plan = make_plan(load_text(tmp_path, LEAPP_SEMANTIC_SPEC, "sem_graph"))
    assert plan.node("policy").output("action_chunk").labels == ("__temporal_axis__", "dim1")


def test_timer_rate_defaults_to_the_pipeline_frequency(tmp_path):
    spec = load_text(tmp_path, LEAPP_SEMANTIC_SPEC, "sem_graph")
    assert make_plan(spec).node("post").firing == Firing(mode="inputs", rate_hz=50.0)
    plan = make_plan(spec, firing={"post": Firing("timer", 10.0)})
    assert plan.node("post").firing.rate_hz == 10.0
    with pytest.raises(PlanError, match=r"unknown node\(s\) \['nope'\]"):
        make_plan(spec, firing={"nope": Firing()})


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        ("float32", "Float32MultiArray"),
        ("float64", "Float64MultiArray"),
        ("float16", "Float32MultiArray"),
        ("bfloat16", "Float32MultiArray"),
        ("int64", "Int64MultiArray"),
        ("uint8", "UInt8MultiArray"),
        ("bool", "UInt8MultiArray"),
    ],
)
def test_dtype_maps_to_its_std_msgs_multiarray(dtype, expected):
    assert message_type(dtype) == f"std_msgs/msg/{expected}"


def test_complex_dtype_is_rejected_with_the_supported_list():
    with pytest.raises(PlanError, match=r"dtype 'complex64' has no std_msgs MultiArray"):
        message_type("complex64")


@pytest.mark.parametrize(
    ("bad", "suggestion"),
    [("joint-pos", "joint_pos"), ("2nd", "n_2nd"), ("a__b", "a_b"), ("trailing_", "trailing")],
)
def test_invalid_ros_names_are_rejected_with_a_valid_suggestion(tmp_path, bad, suggestion):
    text = LEAPP_SEED_SPEC.replace("name: velocity", f"name: {bad}").replace(
        "preprocess: [state, velocity]", f"preprocess: [state, '{bad}']"
    )
    spec = load_text(tmp_path, text)
    with pytest.raises(PlanError, match=rf"{bad!r} is not a valid ROS 2 name.*{suggestion!r}"):
        make_plan(spec)


def test_invalid_namespace_is_rejected(tmp_path):
    with pytest.raises(PlanError, match=r"namespace token 'my robot'"):
        make_plan(load_text(tmp_path, LEAPP_SEED_SPEC), namespace="/my robot")


def test_planning_does_not_import_rclpy():
    code = (
        "import sys; import leapp_ros.plan.pipeline; "
        "sys.exit(1 if any(m.startswith('rclpy') for m in sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
