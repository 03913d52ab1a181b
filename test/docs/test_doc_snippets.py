"""The files the documentation's pages include (``docs/snippets/``) work: each Python file
runs to its end in a folder of its own that holds the seed export as
``exports/torch_pipeline`` (those files check what their blocks computed against eager
PyTorch or ``leapp.Pipeline``), a ``test_*.py`` file passes under pytest there, and each YAML
file is loaded by the code that reads it on a robot: a parameters file by the nodes' own
parameter checks and the plan (``support.params_check``), a simulator map by
``leapp_ros.sim.sim_map`` with its names found in the quadruped's MJCF."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from support.doc_pages import ROOT, SNIPPETS
from support.params_check import check_params_file
from support.rates import export_chain
from support.ros import export_example
from support.sighted import export_sighted_policy, write_sighted_model
from support.sim import export_arm_policy

import leapp
from leapp import LeappError, TemporalAxis, TensorSemantics, annotate
from leapp_ros.testing import reserve_domain_id, ros_env

FOLDER = ROOT / SNIPPETS
RUN_TIMEOUT_S = 600.0
GRAPH_SNIPPETS = {"test_a_graph.py"}  # start a ROS graph


def snippet_files() -> list:
    params = []
    for path in sorted(FOLDER.glob("*.py")):
        marks = [pytest.mark.ros] if path.name in GRAPH_SNIPPETS else []
        params.append(pytest.param(path.name, marks=marks, id=path.name))
    return params


@pytest.fixture(scope="module")
def robot_export(tmp_path_factory):
    """examples/robot_policy.py exported: the export the pages' parameters files are for."""
    save = tmp_path_factory.mktemp("robot")
    return export_example(save, "robot_policy", lambda m: m.example_inputs(), no_grad=True).path


@pytest.fixture(scope="module")
def arm_export(tmp_path_factory):
    """The MuJoCo arm's two-node pipeline (/arm_policy/preprocess, /arm_policy/policy)."""
    return export_arm_policy(tmp_path_factory.mktemp("arm")).path


@pytest.fixture(scope="module")
def chunk_export(tmp_path_factory):
    """/robot_policy/policy with an action chunk ``chunk`` (20 rows 20 ms apart, 2 joints)."""
    leapp.start("robot_policy", save_path=tmp_path_factory.mktemp("chunk"))
    obs = annotate.input_tensors("policy", {"obs": torch.zeros(3)})
    chunk = (obs[:2] * torch.ones(20, 1)).tanh()
    names = [TemporalAxis(20), ["hip", "knee"]]
    annotate.output_tensors(
        "policy",
        [TensorSemantics(name="chunk", ref=chunk, kind="target/joint/position_chunk",
                         element_names=names)],
        export_with="jit",
    )  # fmt: skip
    leapp.stop()
    return leapp.compile_graph().path.parent


@pytest.fixture(scope="module")
def rover_export(tmp_path_factory):
    """examples/perception/rover_policy.py exported with freshly initialised weights."""
    from perception import rover_policy

    folder = tmp_path_factory.mktemp("rover")
    torch.manual_seed(0)
    weights = {"encoder": rover_policy.Encoder().state_dict(),
               "policy": rover_policy.Policy().state_dict()}  # fmt: skip
    torch.save(weights, folder / "rover.pt")
    return rover_policy.export(folder / "rover.pt", folder / "exports")


@pytest.mark.parametrize("name", snippet_files())
def test_every_snippet_file_runs(name, seed, tmp_path):
    if name == "warp_node.py":
        pytest.importorskip("warp", reason="warp-lang is not installed (pip install warp-lang)")
    shutil.copytree(seed.path, tmp_path / "exports" / "torch_pipeline")
    shutil.copy(FOLDER / name, tmp_path / name)
    if name.startswith("test_"):
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                "no:launch_pytest", name]  # fmt: skip
    else:
        argv = [sys.executable, name]
    with reserve_domain_id() as domain_id:
        done = subprocess.run(argv, cwd=tmp_path, env=ros_env(domain_id), capture_output=True,
                              text=True, timeout=RUN_TIMEOUT_S)  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{SNIPPETS}/{name}: exit code {done.returncode}\n{output}"
    if name.startswith("test_"):
        assert "1 passed" in output, output


def test_robot_order_yaml_sends_the_targets_in_the_controllers_order(robot_export):
    plan = check_params_file(FOLDER / "robot_order.yaml", robot_export).plan
    binding = plan.node("policy").output("joint_targets").binding
    assert binding.order == ("hip_l", "hip_r", "knee_l", "knee_r", "ankle_l", "ankle_r"), binding


def test_robot_safety_yaml_passes_the_nodes_parameter_checks(robot_export):
    check_params_file(FOLDER / "robot_safety.yaml", robot_export)


@pytest.mark.parametrize(
    ("written", "wrong", "named"),
    [
        ("input_timeout_ms", "input_timeout", "input_timeout"),
        ("max_step", "max_steps", "ports.joint_targets.max_steps"),
        ("joint_targets:", "joint_target:", "ports.joint_target."),
        ("[0.8, 0.2, 0.6, 0.8, 0.2, 0.6]", "[0.8, 0.2]", "ports.joint_targets.max"),
    ],
)
def test_a_wrong_key_or_value_in_a_parameters_file_fails_the_check(
    robot_export, tmp_path, written, wrong, named
):
    text = (FOLDER / "robot_safety.yaml").read_text(encoding="utf-8")
    assert written in text
    (tmp_path / "wrong.yaml").write_text(text.replace(written, wrong), encoding="utf-8")
    with pytest.raises((AssertionError, LeappError)) as raised:
        check_params_file(tmp_path / "wrong.yaml", robot_export)
    assert named in str(raised.value), raised.value


def test_ramp_in_yaml_blends_the_arms_targets_in_from_its_joint_positions(arm_export):
    checked = check_params_file(FOLDER / "ramp_in.yaml", arm_export)
    assert checked.plan.node("policy").firing.rate_hz == 50.0


def test_out_of_domain_yaml_passes_the_arms_preprocess_checks(arm_export):
    from support.params_check import _StartingNode

    from leapp import spec as spec_module
    from leapp_ros.plan.domain import declare_input_bounds

    check_params_file(FOLDER / "out_of_domain.yaml", arm_export)
    document = yaml.safe_load((FOLDER / "out_of_domain.yaml").read_text(encoding="utf-8"))
    given = document["/arm_policy/preprocess"]["ros__parameters"]
    flat = {f"ports.{port}.{key}": value
            for port, keys in given["ports"].items() for key, value in keys.items()}  # fmt: skip
    (model,) = [m for m in spec_module.load(arm_export).models if m.name == "preprocess"]
    bounds = declare_input_bounds(_StartingNode(flat, "out_of_domain.yaml"), model)
    assert sorted(bounds) == ["gyro", "joint_vel"]
    assert bounds["joint_vel"].action == "safe" and bounds["gyro"].action == "drop"


def test_sim_map_yaml_loads_and_names_what_the_quadruped_has():
    from leapp_ros.sim.sim_map import load_map

    mujoco = pytest.importorskip("mujoco", reason="the map check needs MuJoCo: 'leapp_ros[sim]'")
    loaded = load_map(FOLDER / "sim_map.yaml")
    model = mujoco.MjModel.from_xml_path(str(ROOT / "examples" / "quadruped" / "quadruped.xml"))
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, loaded.base) >= 0, loaded.base
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, loaded.imu_site) >= 0
    for joint in loaded.initial:
        assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint) >= 0, joint


def test_node_rates_yaml_runs_the_policy_and_the_output_node_on_timers(tmp_path):
    export = export_chain(tmp_path, name="robot").parent
    plan = check_params_file(FOLDER / "node_rates.yaml", export).plan
    rules = {node.name: (node.firing.mode, node.firing.rate_hz) for node in plan.nodes}
    assert rules == {
        "encoder": ("inputs", 10.0),  # every frame (the spec's frequency: 10)
        "policy": ("timer", 50.0),
        "post": ("timer", 500.0),
    }


def test_action_chunk_yaml_plays_the_chunks_rows_at_500_hz(chunk_export):
    (rate,) = check_params_file(FOLDER / "action_chunk.yaml", chunk_export).rates["policy"]
    assert (rate.port, rate.rate_hz, rate.interpolate) == ("chunk", 500, "linear"), rate
    assert rate.chunk, rate
    assert rate.steps == 10  # 500 Hz x 20 ms: ten targets from one row to the next


def test_target_rate_yaml_ramps_the_targets_at_500_hz(robot_export):
    checked = check_params_file(FOLDER / "target_rate.yaml", robot_export)
    node = checked.plan.node("policy")
    assert (node.firing.mode, node.firing.rate_hz) == ("inputs", 50.0), node.firing
    (rate,) = checked.rates["policy"]
    assert (rate.port, rate.rate_hz, rate.interpolate) == ("joint_targets", 500, "linear")
    assert rate.steps == 10  # 500 Hz over a 50 Hz period: ten targets per result


def test_rover_watchdog_yaml_passes_both_rover_nodes_parameter_checks(rover_export):
    plan = check_params_file(FOLDER / "rover_watchdog.yaml", rover_export).plan
    assert {node.name for node in plan.nodes} == {"encoder", "policy"}


def test_sim_sensors_yaml_fits_a_robot_that_sees_and_its_graph(tmp_path):
    pytest.importorskip("mujoco", reason="the map check needs MuJoCo: 'leapp_ros[sim]'")
    from leapp_ros.run.processes import load_plan
    from leapp_ros.sim.mujoco_robot import SimulatedRobot
    from leapp_ros.sim.sim_map import load_map

    loaded = load_map(FOLDER / "sim_sensors.yaml")
    plan = load_plan(export_sighted_policy(tmp_path))
    robot = SimulatedRobot(write_sighted_model(tmp_path), loaded, plan)  # checks every name
    assert robot.model.camera("belly").id >= 0 and robot.model.camera("overhead").id >= 0


def test_rate_loop_yaml_is_what_the_rate_loop_runs_with():
    from rate_arm import loop_parameters  # bench/: the loop test/sim/test_rate_loop.py runs

    shown = yaml.safe_load((FOLDER / "rate_loop.yaml").read_text(encoding="utf-8"))
    assert shown == loop_parameters()


def test_the_snippet_folder_holds_only_files_these_tests_check():
    checked = {
        "rate_loop.yaml",
        "ramp_in.yaml",
        "out_of_domain.yaml",
        "action_chunk.yaml",
        "node_rates.yaml",
        "robot_order.yaml",
        "robot_safety.yaml",
        "rover_watchdog.yaml",
        "sim_map.yaml",
        "sim_sensors.yaml",
        "target_rate.yaml",
    }
    for path in Path(FOLDER).iterdir():
        assert path.suffix == ".py" or path.name in checked, f"{path}: no test checks it"
