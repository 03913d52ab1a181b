"""The sections of a parameters file reach the nodes leapp_ros plans for exactly as ROS 2 gives
them to the running nodes (leapp_ros/plan/param_sections.py), and a section that names a node
of a namespaced graph without its namespace stops the start with a message saying what to
write."""

from __future__ import annotations

import pytest
import yaml

from leapp_ros.plan.param_sections import names_node, node_parameters
from leapp_ros.plan.pipeline import PlanError
from leapp_ros.run.processes import load_plan

KEYS = (
    "/**",
    "policy",
    "/policy",
    "robot/policy",
    "/robot/policy",
    "/**/policy",
    "/*/policy",
    "/robot/*",
    "/*",
    "/other/policy",
    "/robot/**",
    "/**/robot/**",
)
NAMES = ("/policy", "/robot/policy", "/arm/robot/policy")


def test_keys_name_nodes_by_absolute_name_with_ros_wildcards():
    assert names_node("/**", "/robot/policy") and names_node("/**/policy", "/policy")
    assert names_node("policy", "/policy") and not names_node("policy", "/robot/policy")
    assert names_node("robot/policy", "/robot/policy")  # no leading slash: absolute
    assert names_node("/*/policy", "/robot/policy") and not names_node("/*", "/robot/policy")
    assert names_node("/robot/**", "/robot/arm/policy") and not names_node("/robot/*", "/policy")


@pytest.mark.ros
@pytest.mark.parametrize("name", NAMES)
def test_every_key_reaches_the_node_rclpy_gives_it_to(name, tmp_path):
    """Each key carries its own value of one parameter; the value rclpy's node of ``name``
    ends up with is the last section (in file order) that node_parameters gives it."""
    import rclpy
    from rclpy.node import Node

    document = {key: {"ros__parameters": {"which": index}} for index, key in enumerate(KEYS)}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    namespace, node_name = name.rsplit("/", 1)
    expected = node_parameters(document, node_name, namespace or "/").get("which", -1)
    context = rclpy.Context()
    rclpy.init(context=context, args=["test", "--ros-args", "--params-file", str(path)])
    try:
        node = Node(node_name, namespace=namespace or "/", context=context)
        found = node.declare_parameter("which", -1).value
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    assert found == expected, (
        f"{name}: rclpy gives section {KEYS[found] if found >= 0 else None!r}, leapp_ros "
        f"reads {KEYS[expected] if expected >= 0 else None!r}"
    )


def test_a_bare_section_naming_a_node_of_a_namespaced_graph_stops_the_start(seed, tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"policy": {"ros__parameters": {"firing": "timer"}}}))
    with pytest.raises(PlanError) as raised:
        load_plan(seed.path, "/robot", params_file=params)
    message = str(raised.value)
    assert "['policy'] reach no node of this graph" in message
    assert "write '/**/policy' (any namespace) or '/robot/policy'" in message
    assert load_plan(seed.path, "/", params_file=params).node("policy").firing.mode == "timer"


def test_a_section_for_the_node_in_any_namespace_reaches_the_plan(seed, tmp_path):
    params = tmp_path / "params.yaml"
    section = {"ros__parameters": {"firing": "timer", "rate_hz": 25.0}}
    params.write_text(yaml.safe_dump({"/**/policy": section, "/other/preprocess": section}))
    plan = load_plan(seed.path, "/robot", params_file=params)
    assert plan.node("policy").firing.mode == "timer"
    assert plan.node("policy").firing.rate_hz == 25.0
    assert plan.node("preprocess").firing.mode == "inputs"  # another namespace's section
