"""Published outputs handed between nodes: identity-like calls keep the edge, real computations
outside any node are refused when handed to a node (leapp.trace.tensors.handover)."""

from __future__ import annotations

import pytest
import torch

import leapp
from leapp import annotate
from leapp.errors import TraceError
from leapp.trace.tensors.tensor import TracedTensor

torch.manual_seed(5)
LAYER = torch.nn.Linear(3, 2).eval()

IDENTITY_LIKE = {
    "clone": lambda t: t.clone(),
    "detach": lambda t: t.detach(),
    "detach_clone": lambda t: t.detach().clone(),
    "to_same_dtype": lambda t: t.to(torch.float32),
    "to_cpu": lambda t: t.to("cpu"),
    "contiguous": lambda t: t.contiguous(),
    "cpu": lambda t: t.cpu(),
    "view_as": lambda t: t.view_as(torch.zeros(3)),
    "as_tensor": lambda t: torch.as_tensor(t),
    "float_on_float32": lambda t: t.float(),
}
COMPUTATIONS = {
    "scaled": lambda t: t * 2,
    "to_float64": lambda t: t.double().float(),
    "concatenated": lambda t: torch.cat([t[:1], t[1:]]),
    "in_place_on_the_output": lambda t: t.mul_(1.0),
    "copied_into_a_plain_buffer": lambda t: torch.zeros(3).copy_(t),
}


def encode(x):
    x = annotate.input_tensors("encode", {"x": x})
    y = torch.tanh(x) * 3
    annotate.output_tensors("encode", {"y": y}, export_with="jit")
    return y


def act(y):
    y = annotate.input_tensors("act", {"y": y})
    action = LAYER(y)
    annotate.output_tensors("act", {"action": action}, export_with="onnx")
    return action


def eager(x):
    with torch.no_grad():
        return LAYER(torch.tanh(x) * 3)


def trace_two_nodes(tmp_path, between):
    leapp.start("handover", save_path=tmp_path)
    with torch.no_grad():
        act(between(encode(torch.randn(3))))
    leapp.stop()
    return leapp.compile_graph()


@pytest.mark.parametrize("call", list(IDENTITY_LIKE))
def test_identity_like_call_between_nodes_keeps_the_data_flow_edge(tmp_path, call):
    compiled = trace_two_nodes(tmp_path, IDENTITY_LIKE[call])
    assert compiled.spec.pipeline.data_flow == {"encode/y": ("act/y",)}
    assert compiled.spec.pipeline.inputs == {"encode": ("x",)}
    pipeline = leapp.Pipeline.load(compiled.path)
    for _ in range(10):
        x = torch.randn(3) * 2
        got = pipeline.step({"encode/x": x})["act/action"]
        torch.testing.assert_close(got, eager(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("call", list(COMPUTATIONS))
def test_computation_on_an_output_outside_any_node_is_refused_when_handed_to_a_node(
    tmp_path, call
):
    leapp.start("handover", save_path=tmp_path)
    with torch.no_grad():
        y = encode(torch.randn(3))
        handed = COMPUTATIONS[call](y)
        with pytest.raises(TraceError, match=r"input 'y'.*outside any node.*test_trace_handover"):
            act(handed)


def test_detached_output_fed_back_on_the_next_tick_is_a_feedback_edge(tmp_path):
    def tick(obs, previous):
        obs, previous = annotate.input_tensors("policy", {"obs": obs, "previous": previous})
        action = torch.tanh(LAYER(obs) + 0.5 * previous)
        annotate.output_tensors("policy", {"action": action}, export_with="jit")
        return action

    observations = [torch.randn(3) for _ in range(3)]
    leapp.start("loop", save_path=tmp_path)
    previous = torch.zeros(2)
    with torch.no_grad():
        for obs in observations:
            previous = tick(obs, previous).detach()
    leapp.stop()
    spec = leapp.compile_graph().spec
    assert spec.pipeline.feedback_flow == {"policy/action": ("policy/previous",)}
    pipeline = leapp.Pipeline.load(spec.path)
    previous = torch.zeros(2)
    for _ in range(20):
        obs = torch.randn(3)
        with torch.no_grad():
            previous = torch.tanh(LAYER(obs) + 0.5 * previous)
        got = pipeline.step({"policy/obs": obs})["policy/action"]
        torch.testing.assert_close(got, previous, rtol=1e-5, atol=1e-5)


def test_computation_on_an_output_not_handed_to_a_node_is_allowed(tmp_path):
    leapp.start("handover", save_path=tmp_path)
    with torch.no_grad():
        y = encode(torch.randn(3))
        logged = float((y * 2).sum())  # logging, a reward, a simulator step...
        act(y)
    leapp.stop()
    assert logged == pytest.approx(float(y.sum()) * 2)
    assert leapp.compile_graph().spec.pipeline.data_flow == {"encode/y": ("act/y",)}


def test_after_stop_outputs_compute_as_plain_tensors(tmp_path):
    leapp.start("handover", save_path=tmp_path)
    with torch.no_grad():
        y = encode(torch.randn(3))
    leapp.stop()
    result = y * 2
    assert not isinstance(result, TracedTensor) or getattr(result, "_leapp_derived", None) is None
