"""The rules of a policy switch without ROS: which exports fit
(:mod:`leapp_ros.plan.switch_check`), which states are carried, the ramp from the last
command, the probation that rolls back, and ``leapp-ros switch`` refusing an export that does
not fit before it asks the graph."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from leapp.spec import PipelineSpec, Spec
from leapp.spec.schema import ModelParameters, ModelSpec, TensorSpec
from leapp_ros.node.policy_switch import PolicySwitch
from leapp_ros.node.ramp import PortRamp
from leapp_ros.plan.switch_check import carried_states, switch_differences


def spec(**changes) -> Spec:
    obs = TensorSpec("obs", "float32", (15,))
    action = TensorSpec("action", "float32", (3,), kind="target/joint/position",
                        element_names=(("a", "b", "c"),))  # fmt: skip
    policy = ModelSpec("policy", (obs,), (changes.pop("action", action),),
                       ModelParameters("policy.onnx", None, None, "onnx"))  # fmt: skip
    pipeline = PipelineSpec({}, changes.pop("feedback", {}), {"policy": ("obs",)},
                            {"policy": ("action",)})  # fmt: skip
    return Spec("arm", (policy,), pipeline, {})


def test_an_export_with_the_same_ports_fits():
    assert switch_differences(spec(), spec(), ["policy"]) == []


def test_each_differing_port_field_is_listed():
    other = TensorSpec("action", "float64", (4,), kind="target/joint/position",
                       element_names=(("a", "b", "d"),))  # fmt: skip
    found = switch_differences(spec(), spec(action=other), ["policy"])
    assert found == [
        "policy/action: dtype float32 -> float64",
        "policy/action: shape [3] -> [4]",
        "policy/action: element_names [['a', 'b', 'c']] -> [['a', 'b', 'd']]",
    ]


def test_renamed_ports_missing_nodes_and_other_wiring_are_listed():
    renamed = TensorSpec("joint_targets", "float32", (3,))
    found = switch_differences(spec(), spec(action=renamed), ["policy", "preprocess"])
    assert "policy: outputs ['action'] -> ['joint_targets']" in found
    assert any(line.startswith("node 'preprocess' is not in the new export") for line in found)
    looped = spec(feedback={"policy/action": ("policy/obs",)})
    assert "feedback_flow policy/action -> policy/obs: only in the new export" in (
        switch_differences(spec(), looped, ["policy"])
    )


def test_a_node_only_the_new_export_has_is_a_difference_for_a_whole_graph():
    new = spec()
    grown = Spec("arm", (*new.models, replace(new.models[0], name="extra")), new.pipeline, {})
    assert switch_differences(spec(), grown, ["policy"]) == []  # one node of the graph
    assert switch_differences(spec(), grown, ["policy"], whole=True) == [
        "node 'extra' is only in the new export: the running graph has no node for it"
    ]


def test_carried_states_are_named_by_port_or_node_and_port():
    states = {"policy": ["h", "c"], "post": ["h"]}
    carried, unknown = carried_states(["h", "post/x", "policy/c"], states)
    assert carried == {"policy": {"h", "c"}, "post": {"h"}}
    assert unknown == ["post/x"]


def test_a_switch_ramp_starts_from_the_last_command_not_the_measured_position():
    ramp = PortRamp(4, (2,), measured=lambda: np.array([9.0, 9.0]))
    ramp.begin(from_last=True)
    last, target = np.array([1.0, 1.0]), np.array([3.0, 5.0])
    values = [ramp.blend(target, last)[0] for _ in range(5)]
    np.testing.assert_allclose(values[0], last + 0.25 * (target - last))
    np.testing.assert_allclose(values[3], target)
    np.testing.assert_allclose(values[4], target)
    ramp.begin()  # any other start: the measured position
    np.testing.assert_allclose(ramp.blend(target, last)[0], [9.0, 9.0] + 0.25 * (target - 9.0))


def test_a_switch_right_after_an_activation_keeps_the_activations_start():
    ramp = PortRamp(2, (1,), measured=lambda: np.array([9.0]))
    ramp.begin()  # activate
    ramp.begin(from_last=True)  # the take-over before the same run
    np.testing.assert_allclose(ramp.blend(np.array([1.0]), np.array([0.0]))[0], [5.0])


class FakeNode:
    """What a PolicySwitch needs of its node, recorded."""

    def __init__(self, data):
        self.data, self.blends, self.changes = data, [], 0
        self.settings = {"spec_path": "old"}
        self.logged: list[str] = []
        log = SimpleNamespace(info=self.logged.append, error=self.logged.append,
                              warning=self.logged.append)  # fmt: skip
        self.get_logger = lambda: log

    def _data_paths(self):
        return [self.data]

    def _begin_blends(self, from_last=False):
        self.blends.append(from_last)

    def _report_change(self):
        self.changes += 1


def on_probation(new_call, probation=2):
    """A PolicySwitch (without ROS) that took over a data path whose old model adds 1 and
    whose state input (index 1) holds 7; the data path."""
    inputs = [SimpleNamespace(port="x"), SimpleNamespace(port="h")]
    plan = SimpleNamespace(outputs=[SimpleNamespace(port="out", dtype="float32")], inputs=inputs)
    data = SimpleNamespace(name="policy", plan=plan, guard=None, runs=4, state_links=((0, 1),),
                           values=[np.zeros(1, np.float32), np.full(1, 7.0, np.float32)],
                           call=lambda v: [v[0] + 1])  # fmt: skip
    node = FakeNode(data)
    switch = PolicySwitch.__new__(PolicySwitch)
    switch._node, switch.probation, switch._requests, switch._trial = node, probation, 1, None
    switch._record = {"state": "loading", "request": 1, "export": "new", "previous": "old"}
    switch._spec = "new spec"
    loaded = SimpleNamespace(data=data, call=new_call, states={1: np.zeros(1, np.float32)})
    switch.pending = [loaded]
    switch.take_over(tick=None)
    return switch, node, data


def test_a_new_policy_passing_probation_keeps_running_and_its_export_is_configured_next():
    switch, node, data = on_probation(lambda v: [v[0] + 2])
    assert data.values[1][0] == 0.0, "the state starts from the new initial value"
    assert switch.record()["first_run"] == {"policy": 5}
    for _ in range(2):
        assert data.call(data.values)[0][0] == 2.0
    assert switch.record()["state"] == "switched"
    assert node.settings["spec_path"] == "new"
    assert node.blends == [True]


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (lambda v: [np.full(1, np.nan, np.float32)], "NaN/inf in output(s) ['out']"),
        (lambda v: 1 / 0, "the new model raised ZeroDivisionError"),
    ],
)
def test_a_failing_new_policy_rolls_back_and_the_old_one_answers_the_set(failure, reason):
    switch, node, data = on_probation(failure)
    data.values[0] = np.full(1, 5.0, np.float32)
    assert data.call(data.values)[0][0] == 6.0, "the old model answered the failing set"
    record = switch.record()
    assert record["state"] == "rolled_back" and record["reason"].startswith(reason)
    assert data.values[1][0] == 7.0, "the old model's state came back"
    assert node.blends == [True, True]
    assert node.settings["spec_path"] == "old"


def test_leapp_ros_switch_refuses_an_export_with_other_ports_before_asking_the_graph(
    seed, tmp_path, capsys
):
    from support.sim import export_arm_policy

    from leapp_ros.tools.cli import main

    arm = export_arm_policy(tmp_path)
    assert main(["switch", str(arm.path), str(seed.path)]) == 2
    error = capsys.readouterr().err
    assert "does not fit" in error
    assert "policy/obs: shape [15] -> [9]" in error
