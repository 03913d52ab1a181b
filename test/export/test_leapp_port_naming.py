"""LEAPP's rule for a port name used for both an input and an output of one ONNX node: the pair
is ``<name>_in`` / ``<name>_out`` in the spec (ports, flows, initial-value keys, and so the ROS
topics) and in the ONNX model; TorchScript and pt2 nodes keep the name. Exports of ours from
before the rule (the spec says ``h``, the model ``h_in`` / ``h_out``) still load and run."""

from __future__ import annotations

import onnx
import pytest
import torch
import yaml
from safetensors.torch import load_file, save_file

import leapp
from leapp import InputKindEnum, OutputKindEnum, TensorSemantics, annotate
from leapp_ros.plan.pipeline import make_plan

TICKS = 20


def _stateful(tmp_path, backend):
    leapp.start("named", save_path=tmp_path)
    h = torch.zeros(3)
    for _ in range(2):
        obs = annotate.input_tensors("policy", {"obs": torch.randn(3)})
        h_in = annotate.state_tensors("policy", {"h": h})
        h = annotate.update_state("policy", {"h": torch.tanh(obs + 0.5 * h_in)})
        annotate.output_tensors("policy", {"action": h * 2.0}, export_with=backend)
        h = h.tensor
    leapp.stop()
    return leapp.compile_graph()


def _eager(observations):
    h, actions = torch.zeros(3), []
    for obs in observations:
        h = torch.tanh(obs + 0.5 * h)
        actions.append(h * 2.0)
    return actions


@pytest.mark.parametrize("backend", ["onnx", "onnx-torchscript"])
def test_an_onnx_nodes_shared_port_name_is_in_and_out_in_spec_and_model(tmp_path, backend):
    leapp.start("overlap", save_path=tmp_path)
    traced = annotate.input_tensors(
        "node", TensorSemantics("joint_pos", torch.randn(3), kind=InputKindEnum.JOINT_POSITION)
    )
    annotate.output_tensors(
        "node",
        TensorSemantics("joint_pos", traced + 1.0, kind=OutputKindEnum.JOINT_POSITION),
        export_with=backend,
    )
    leapp.stop()
    spec = leapp.compile_graph().spec
    model = spec.model("node")
    assert [(p.name, p.kind) for p in model.inputs] == [("joint_pos_in", "state/joint/position")]
    assert [(p.name, p.kind) for p in model.outputs] == [
        ("joint_pos_out", "target/joint/position")
    ]
    assert spec.pipeline.inputs == {"node": ("joint_pos_in",)}
    assert spec.pipeline.outputs == {"node": ("joint_pos_out",)}
    proto = onnx.load(str(spec.directory / "node.onnx"))
    assert [v.name for v in proto.graph.input] == ["joint_pos_in"]
    assert [v.name for v in proto.graph.output] == ["joint_pos_out"]
    (node,) = make_plan(spec).nodes  # the ROS topics follow: in and out are two topics
    assert [port.topic for port in node.inputs] == ["node/joint_pos_in"]
    assert [port.topic for port in node.outputs] == ["node/joint_pos_out"]


def test_an_onnx_state_is_a_feedback_edge_from_out_to_in_with_its_initial_value_under_in(tmp_path):
    spec = _stateful(tmp_path, "onnx").spec
    assert spec.pipeline.feedback_flow == {"policy/h_out": ("policy/h_in",)}
    initial = load_file(str(spec.directory / spec.pipeline.initial_values))
    assert list(initial) == ["policy/h_in"] and torch.equal(initial["policy/h_in"], torch.zeros(3))
    pipeline = leapp.Pipeline.load(spec.directory)
    observations = [torch.randn(3) for _ in range(TICKS)]
    for obs, action in zip(observations, _eager(observations), strict=True):
        torch.testing.assert_close(pipeline.step({"policy/obs": obs})["policy/action"], action)


def test_a_module_buffer_of_an_onnx_node_has_its_initial_value_under_in(tmp_path):
    class Gru(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = torch.nn.GRU(4, 8)
            self.register_buffer("h_state", torch.zeros(1, 1, 8))

        def forward(self, obs):
            out, self.h_state = self.gru(obs.unsqueeze(0), self.h_state)
            return out.squeeze(0)

    model = Gru().eval()
    leapp.start("gru", save_path=tmp_path)
    obs = annotate.input_tensors("policy", {"obs": torch.randn(1, 4)})
    annotate.module("policy", model)
    annotate.output_tensors("policy", {"action": model(obs)}, export_with="onnx-torchscript")
    leapp.stop()
    spec = leapp.compile_graph().spec
    initial = load_file(str(spec.directory / spec.pipeline.initial_values))
    assert list(initial) == ["policy/h_state_in"]


@pytest.mark.parametrize("backend", ["jit", "pt2"])
def test_torchscript_and_pt2_nodes_keep_a_shared_port_name(tmp_path, backend):
    spec = _stateful(tmp_path, backend).spec
    assert spec.pipeline.feedback_flow == {"policy/h": ("policy/h",)}
    assert [p.name for p in spec.model("policy").outputs] == ["action", "h"]


def test_an_export_from_before_the_rule_still_loads_and_runs(tmp_path):
    """The spec of an ONNX state written as ours used to be: ``h`` on both sides."""
    directory = _stateful(tmp_path, "onnx").spec.directory
    path = directory / "named.yaml"
    data = yaml.safe_load(path.read_text())
    for side in ("inputs", "outputs"):
        for port in data["models"]["policy"][side]:
            port["name"] = port["name"].removesuffix("_in").removesuffix("_out")
    data["pipeline"]["feedback_flow"] = {"policy/h": ["policy/h"]}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    initial = directory / data["pipeline"]["initial_values"]
    save_file({"policy/h": load_file(str(initial))["policy/h_in"]}, str(initial))
    examples = directory / data["pipeline"]["examples"]
    examples.unlink()  # its keys follow the new names; an old export had its own
    del data["pipeline"]["examples"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    pipeline = leapp.Pipeline.load(directory)
    observations = [torch.randn(3) for _ in range(TICKS)]
    for obs, action in zip(observations, _eager(observations), strict=True):
        torch.testing.assert_close(pipeline.step({"policy/obs": obs})["policy/action"], action)
