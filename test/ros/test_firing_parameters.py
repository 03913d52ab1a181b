"""A node's firing parameters are checked before it runs: ``triggers`` names inputs that can
fire it (on a timer, with a stamp sync, those gathered by stamp), and a parameter no node knows
is refused (a typo never passes unnoticed).

The rules on plans need no ROS; the nodes' refusals are checked on real processes, which must
exit with code 2 and one error line naming the parameter and what is allowed.
"""

from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace

import pytest
from support.ros import node_args, run_to_exit, startup_error_line
from support.specs import LEAPP_SEED_SPEC, LEAPP_SEMANTIC_SPEC

from leapp import spec as spec_module
from leapp_ros.plan.firing_settings import firing_rule, trigger_ports
from leapp_ros.plan.pipeline import make_plan
from leapp_ros.plan.settings import StartupError

SETTINGS = {"firing": "inputs", "rate_hz": 0.0, "max_input_age": 0.0, "triggers": None}


def plan_of(tmp_path, text, name):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return make_plan(spec_module.load(path, verify_checksums=False))


def ports(node):
    return [(node.name, port) for port in node.inputs]


def test_triggers_name_ports_with_or_without_their_node(tmp_path):
    preprocess = plan_of(tmp_path, LEAPP_SEED_SPEC, "torch_pipeline").node("preprocess")
    assert trigger_ports("n", ["state"], ports(preprocess)) == {0}
    assert trigger_ports("n", ["preprocess/velocity"], ports(preprocess)) == {1}
    assert trigger_ports("n", None, ports(preprocess)) is None


def test_the_chosen_triggers_fire_the_node_and_the_others_are_newest_values(tmp_path):
    preprocess = plan_of(tmp_path, LEAPP_SEED_SPEC, "torch_pipeline").node("preprocess")
    firing = firing_rule(preprocess, {**SETTINGS, "triggers": ("velocity",)})
    assert firing.triggers == ("velocity",)
    assert replace(preprocess, firing=firing).triggering() == {1}
    assert preprocess.triggering() == {0, 1}, "by default every external input triggers"


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["sate"], r"names 'sate', which is no input here; the inputs that can trigger are "
                   r"\['preprocess/state', 'preprocess/velocity'\]"),
        (["policy/state"], "names 'policy/state', which is no input here"),
        ([], "lists no input; leave it unset"),
    ],
)  # fmt: skip
def test_a_trigger_that_names_no_input_is_refused(tmp_path, names, message):
    preprocess = plan_of(tmp_path, LEAPP_SEED_SPEC, "torch_pipeline").node("preprocess")
    with pytest.raises(StartupError, match=message):
        firing_rule(preprocess, {**SETTINGS, "triggers": tuple(names)})


def test_a_trigger_naming_a_state_input_is_refused(tmp_path):
    policy = plan_of(tmp_path, LEAPP_SEMANTIC_SPEC, "sem_graph").node("policy")
    with pytest.raises(StartupError, match=r"'h', a state input, which never triggers"):
        firing_rule(policy, {**SETTINGS, "triggers": ("joint_pos", "h")})


def test_triggers_on_a_timer_are_refused(tmp_path):
    preprocess = plan_of(tmp_path, LEAPP_SEED_SPEC, "torch_pipeline").node("preprocess")
    timer = {**SETTINGS, "firing": "timer", "rate_hz": 50.0, "triggers": ("state",)}
    with pytest.raises(StartupError, match="runs on a timer"):
        firing_rule(preprocess, timer)


def test_a_timer_with_a_stamp_sync_takes_the_newest_whole_set_of_its_triggers(tmp_path):
    from leapp_ros.node.input_sets import InputSets

    preprocess = plan_of(tmp_path, LEAPP_SEED_SPEC, "torch_pipeline").node("preprocess")
    timer = {**SETTINGS, "firing": "timer", "rate_hz": 50.0, "sync": "exact"}
    rule = firing_rule(preprocess, {**timer, "triggers": ("state",)})
    assert (rule.mode, rule.sync, rule.triggers) == ("timer", "exact", ("state",))
    assert rule.describe() == "timer at 50 Hz (triggers: state), sync exact"
    node = replace(preprocess, firing=rule)
    assert node.triggering() == {0}, "gathered by stamp; velocity is a newest value"
    assert replace(preprocess, firing=firing_rule(preprocess, timer)).triggering() == {0, 1}
    data = SimpleNamespace(values=[None, None], name="preprocess", plan=preprocess)
    sets = InputSets.of_node(node, data)
    assert list(sets.checked) == [0, 1], "a tick needs the set and the newest values"
    assert sets.unusable(1.0).index == 0 and sets.unusable(1.0).missing
    data.values[:] = ["state", "velocity"]
    sets.stamps.update({0: 0.9, 1: 0.95})
    assert sets.unusable(1.0) is None


@pytest.mark.ros
@pytest.mark.parametrize(
    ("module", "program", "parameter", "message"),
    [
        ("leapp_ros.node.pipeline_node", "leapp_node", "trigers:=[state]",
         r"unknown parameter\(s\) \['trigers'\]; a leapp node takes \[.*'triggers'"),
        ("leapp_ros.node.pipeline_node", "leapp_node", "triggers:=[sate]",
         "parameter triggers names 'sate', which is no input here"),
        ("leapp_ros.node.fused_node", "leapp_fused", "triggers:=[obs]",
         r"leapp_fused \(its triggers are external inputs.*names 'obs', which is no input"),
    ],
    ids=["unknown parameter", "unknown trigger", "fused: a data-flow trigger"],
)  # fmt: skip
def test_a_node_refuses_a_parameter_it_does_not_know(seed, module, program, parameter, message):
    args = node_args(seed.path, "preprocess", "/torch_pipeline", "-p", parameter)
    line = startup_error_line(run_to_exit(module, args), program)
    assert re.search(message, line), line
