"""LEAPP's dry run: ``leapp.start(..., dry_run=True)`` traces nothing and exports nothing. Every
annotation hands back the caller's own objects, the annotated code runs as in production, and
``compile_graph`` still writes the spec (nodes, ports, edges, states; every model_path and
backend null) and the picture; ``compile_graph(dry_run=True)`` after a real recording does the
same without writing artifacts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import leapp
from leapp import annotate
from leapp.trace.tensors.tensor import TracedTensor


def _two_nodes(save_path, **start):
    leapp.start("dry", save_path=save_path, dry_run=True, **start)
    state, velocity = torch.randn(6), torch.randn(3)
    got = annotate.input_tensors("pre", {"state": state, "velocity": velocity})
    assert got[0] is state and got[1] is velocity  # the caller's own objects
    obs = torch.cat(got)
    assert annotate.output_tensors("pre", {"obs": obs}, export_with="jit") is obs
    x = annotate.input_tensors("policy", {"obs": obs.detach()})  # a view: still the edge
    h = annotate.state_tensors("policy", {"h": torch.zeros(9)})
    assert annotate.update_state("policy", {"h": h + x}) is not None
    annotate.output_tensors("policy", {"action": torch.tanh(x + h)}, export_with="onnx")
    leapp.stop()
    return obs


def test_a_dry_run_writes_the_spec_with_edges_and_states_but_no_artifact(tmp_path):
    obs = _two_nodes(tmp_path)
    assert obs.leapp_tag == "pre/obs"  # published outputs are tagged, as LEAPP tags them
    compiled = leapp.compile_graph(visualize=True)
    spec = compiled.spec
    assert [m.name for m in spec.models] == ["pre", "policy"]
    for model in spec.models:
        assert model.parameters.model_path is None and model.parameters.backend is None
    assert [(p.name, p.shape) for p in spec.model("policy").inputs] == [("obs", (9,)), ("h", (9,))]
    assert spec.pipeline.data_flow == {"pre/obs": ("policy/obs",)}
    assert spec.pipeline.feedback_flow == {"policy/h": ("policy/h",)}
    assert spec.pipeline.inputs == {"pre": ("state", "velocity")}
    folder = compiled.path.parent
    assert {p.suffix for p in folder.iterdir()} == {".yaml", ".safetensors", ".png", ".svg"}
    assert compiled.report is None and not compiled.graphs
    with pytest.raises(leapp.PipelineError, match="no artifact"):
        leapp.Pipeline.load(folder)


def test_a_decorated_function_runs_on_plain_values_in_a_dry_run(tmp_path):
    seen = []

    @annotate.method(export_with="jit")
    def policy(x, gain: float = 2.0):
        seen.append(type(x))
        return x * gain + 1.0

    leapp.start("dry", save_path=tmp_path, dry_run=True)
    x = torch.arange(3.0)
    y = policy(x)
    leapp.stop()
    assert seen == [torch.Tensor] and type(y) is torch.Tensor
    torch.testing.assert_close(y, x * 2.0 + 1.0)
    spec = leapp.compile_graph().spec
    assert [p.name for p in spec.model("policy").outputs] == ["output1"]


def test_a_copy_between_nodes_is_an_external_input_in_a_dry_run(tmp_path):
    leapp.start("dry", save_path=tmp_path, dry_run=True)
    a = annotate.input_tensors("a", {"x": torch.ones(2)})
    out = annotate.output_tensors("a", {"y": a + 1})
    annotate.input_tensors("b", {"y": out.clone()})  # no memory in common: not an edge
    annotate.output_tensors("b", {"z": out * 2})
    leapp.stop()
    pipeline = leapp.compile_graph().spec.pipeline
    assert pipeline.data_flow == {} and pipeline.inputs == {"a": ("x",), "b": ("y",)}


def test_a_numpy_output_handed_over_as_a_tensor_is_an_edge_in_a_dry_run(tmp_path):
    leapp.start("dry", save_path=tmp_path, dry_run=True)
    q = annotate.input_tensors("a", {"q": np.zeros(4, dtype=np.float32)})
    obs = annotate.output_tensors("a", {"obs": q + 1.0})
    annotate.input_tensors("b", {"obs": torch.from_numpy(obs)})
    annotate.output_tensors("b", {"act": torch.from_numpy(obs) * 2})
    leapp.stop()
    assert leapp.compile_graph().spec.pipeline.data_flow == {"a/obs": ("b/obs",)}


def test_module_buffers_the_forward_reassigns_or_writes_are_states_in_a_dry_run(tmp_path):
    class Memory(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("h", torch.zeros(3))
            self.register_buffer("count", torch.zeros(1))
            self.register_buffer("scale", torch.ones(3))

        def forward(self, x):
            self.h = self.h * 0.5 + x * self.scale
            self.count.add_(1.0)
            return self.h * self.count

    model = Memory()
    buffers = dict(model.named_buffers())
    leapp.start("dry", save_path=tmp_path, dry_run=True)
    x = annotate.input_tensors("policy", {"x": torch.ones(3)})
    annotate.module("policy", model)
    annotate.output_tensors("policy", {"y": model(x)})
    leapp.stop()
    assert model.scale is buffers["scale"] and type(model.h) is torch.Tensor
    spec = leapp.compile_graph().spec
    assert spec.pipeline.feedback_flow == {
        "policy/h": ("policy/h",),
        "policy/count": ("policy/count",),
    }
    assert spec.pipeline.inputs == {"policy": ("x",)}
    initial = load_file(str(spec.directory / spec.pipeline.initial_values))
    assert torch.equal(initial["policy/count"], torch.zeros(1))  # its value before forward
    assert torch.equal(initial["policy/h"], torch.zeros(3))


def test_compile_graph_dry_run_keeps_the_recorded_graph_and_writes_no_artifact(tmp_path):
    leapp.start("late", save_path=tmp_path)
    x = annotate.input_tensors("node", {"x": torch.randn(3)})
    assert isinstance(x, TracedTensor)
    annotate.output_tensors("node", {"y": x * 2.0}, export_with="jit")
    leapp.stop()
    compiled = leapp.compile_graph(dry_run=True)
    assert compiled.spec.model("node").parameters.backend is None
    assert not (compiled.path.parent / "node.pt").exists()
    assert "mul" in compiled.graphs["node"].code


def test_nested_states_are_refused_in_a_dry_run_as_in_a_recording(tmp_path):
    leapp.start("dry", save_path=tmp_path, dry_run=True)
    nested = {"a": torch.ones(2), "b": [torch.zeros(1)]}
    got = annotate.input_tensors("node", {"x": nested})
    assert got["a"] is nested["a"] and got["b"][0] is nested["b"][0]
    with pytest.raises(TypeError, match="does not support nested state structures"):
        annotate.state_tensors("node", {"s": nested})
