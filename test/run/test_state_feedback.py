"""Recurrent state and feedback: traced, exported, and stepped by leapp.Pipeline exactly like
the eager loop, with reset() restoring the initial state."""

from __future__ import annotations

import pytest
import torch
from support.recurrent import export_gru, feedback_loop, gru_loop

import leapp
from leapp import annotate


@pytest.mark.parametrize("backend", ["jit", "onnx"])
def test_gru_state_is_a_self_feedback_edge_with_an_initial_value(tmp_path, backend):
    compiled = export_gru(tmp_path, backend)
    spec = compiled.spec
    h_in, h_out = ("h_in", "h_out") if backend == "onnx" else ("h", "h")  # LEAPP's ONNX names
    assert [p.name for p in spec.model("policy").inputs] == ["obs", h_in]
    assert [p.name for p in spec.model("policy").outputs] == ["action", h_out]
    assert spec.pipeline.feedback_flow == {f"policy/{h_out}": (f"policy/{h_in}",)}
    assert spec.pipeline.inputs == {"policy": ("obs",)}
    assert spec.pipeline.outputs == {"policy": ("action",)}
    assert spec.pipeline.initial_values == "gru_initial_values.safetensors"
    assert (compiled.path.parent / "gru_initial_values.safetensors").is_file()


@pytest.mark.parametrize("backend", ["jit", "onnx"])
def test_gru_pipeline_matches_the_eager_loop_for_50_steps_and_resets(tmp_path, backend):
    pipeline = leapp.Pipeline.load(export_gru(tmp_path, backend).path)
    h_out = "policy/h_out" if backend == "onnx" else "policy/h"  # LEAPP's ONNX state name
    observations = [torch.randn(4) for _ in range(50)]
    expected = gru_loop(observations, backend)
    for _ in range(2):  # the second round after reset() must repeat the first exactly
        for obs, (action, h) in zip(observations, expected, strict=True):
            out = pipeline.step({"policy/obs": obs})
            torch.testing.assert_close(out["policy/action"], action, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(out[h_out], h, rtol=1e-5, atol=1e-5)
        pipeline.reset()


def test_onnx_state_ports_are_named_in_and_out(tmp_path):
    import onnxruntime

    compiled = export_gru(tmp_path, "onnx")
    session = onnxruntime.InferenceSession(str(compiled.path.parent / "policy.onnx"))
    assert [i.name for i in session.get_inputs()] == ["obs", "h_in"]
    assert [o.name for o in session.get_outputs()] == ["action", "h_out"]


def test_previous_action_fed_back_is_recorded_as_feedback(tmp_path):
    leapp.start("loop", save_path=tmp_path)
    feedback_loop([torch.randn(5) for _ in range(3)], torch.zeros(2))
    leapp.stop()
    spec = leapp.compile_graph().spec
    assert spec.pipeline.data_flow == {"preprocess/obs": ("act/obs",)}
    assert spec.pipeline.feedback_flow == {"act/action": ("preprocess/previous_action",)}
    assert spec.pipeline.inputs == {"preprocess": ("state",)}
    assert spec.pipeline.outputs == {}


def test_feedback_pipeline_matches_the_eager_loop_for_50_steps(tmp_path):
    first = torch.full((2,), 0.25)
    leapp.start("loop", save_path=tmp_path)
    feedback_loop([torch.randn(5) for _ in range(2)], first)
    leapp.stop()
    pipeline = leapp.Pipeline.load(leapp.compile_graph().path)
    states = [torch.randn(5) for _ in range(50)]
    expected = feedback_loop(states, first)
    for state, action in zip(states, expected, strict=True):
        out = pipeline.step({"preprocess/state": state})
        torch.testing.assert_close(out["act/action"], action, rtol=1e-5, atol=1e-5)


def test_update_of_an_undeclared_state_is_rejected(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.ones(2)})
    with pytest.raises(leapp.GraphError, match=r"names 'h', which is not a state of the node"):
        annotate.update_state("n", {"h": x})


def test_input_fed_from_different_places_on_different_runs_is_rejected(tmp_path):
    leapp.start("p", save_path=tmp_path)
    a = annotate.input_tensors("a", {"x": torch.ones(2)})
    y = annotate.output_tensors("a", {"y": a * 2})
    for value in (y, torch.ones(2)):
        b = annotate.input_tensors("b", {"y": value})
        annotate.output_tensors("b", {"z": b + 1})
    leapp.stop()
    with pytest.raises(leapp.GraphError, match=r"b/y is fed from different places"):
        leapp.compile_graph()


def test_rerun_with_a_different_shape_is_rejected(tmp_path):
    leapp.start("p", save_path=tmp_path)
    for size in (2, 3):
        x = annotate.input_tensors("n", {"x": torch.ones(size)})
        if size == 2:
            annotate.output_tensors("n", {"y": x * 2})
    with pytest.raises(leapp.GraphError, match=r"node 'n' ran again .* different ports"):
        annotate.output_tensors("n", {"y": x * 2})


def test_annotations_for_state_pass_values_through_outside_a_session():
    h = torch.zeros(3)
    assert annotate.state_tensors("n", {"h": h}) is h
    assert annotate.update_state("n", {"h": h}) is h
