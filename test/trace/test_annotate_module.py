"""annotate.module: a module's buffers are tracked for one node run; a buffer the forward pass
reassigns or writes in place is a state fed back to itself, the others are constants, and the
module gets plain buffers back when the node closes."""

from __future__ import annotations

import copy

import pytest
import torch

import leapp
from leapp import annotate
from leapp.errors import SessionError, TraceError


class GRUPolicy(torch.nn.Module):
    """A recurrent policy keeping its hidden state in a buffer, as exported policies do."""

    def __init__(self, in_place: bool = False):
        super().__init__()
        self.in_place = in_place
        self.gru = torch.nn.GRUCell(4, 8)
        self.head = torch.nn.Linear(8, 2)
        self.register_buffer("h", torch.zeros(1, 8))
        self.register_buffer("obs_mean", torch.randn(4))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        h = self.gru((obs - self.obs_mean).unsqueeze(0), self.h)
        if self.in_place:
            self.h.copy_(h)
        else:
            self.h = h
        return torch.tanh(self.head(h)).squeeze(0)


def policy_tick(model, obs, buffer_names=None):
    obs = annotate.input_tensors("policy", {"obs": obs})
    annotate.module("policy", model, buffer_names=buffer_names)
    action = model(obs)
    annotate.output_tensors("policy", {"action": action}, export_with="jit")
    return action


def export_policy(tmp_path, model, ticks=3, buffer_names=None):
    leapp.start("gru_module", save_path=tmp_path)
    with torch.no_grad():
        for _ in range(ticks):
            policy_tick(model, torch.randn(4), buffer_names)
    leapp.stop()
    return leapp.compile_graph()


def assert_matches_eager(compiled, eager, steps=20):
    pipeline = leapp.Pipeline.load(compiled.path)
    for _ in range(steps):
        obs = torch.randn(4)
        with torch.no_grad():
            expected = eager(obs)
        got = pipeline.step({"policy/obs": obs})
        torch.testing.assert_close(got["policy/action"], expected, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got["policy/h"], eager.h, rtol=1e-5, atol=1e-5)


def test_a_reassigned_buffer_is_a_state_fed_back_to_itself(tmp_path):
    torch.manual_seed(0)
    spec = export_policy(tmp_path, GRUPolicy().eval()).spec
    assert [p.name for p in spec.model("policy").inputs] == ["obs", "h"]
    assert [p.name for p in spec.model("policy").outputs] == ["action", "h"]
    assert spec.pipeline.feedback_flow == {"policy/h": ("policy/h",)}
    assert spec.pipeline.inputs == {"policy": ("obs",)}


def test_gru_module_export_matches_eager_over_several_steps(tmp_path):
    torch.manual_seed(1)
    model = GRUPolicy().eval()
    eager = copy.deepcopy(model)  # the state starts from zeros, as the traced run did
    assert_matches_eager(export_policy(tmp_path, model), eager)


def test_a_buffer_written_in_place_is_a_state_too(tmp_path):
    torch.manual_seed(2)
    model = GRUPolicy(in_place=True).eval()
    eager = copy.deepcopy(model)
    compiled = export_policy(tmp_path, model)
    assert compiled.spec.pipeline.feedback_flow == {"policy/h": ("policy/h",)}
    assert_matches_eager(compiled, eager)


def test_buffers_the_run_does_not_change_are_constants(tmp_path):
    torch.manual_seed(3)
    model = GRUPolicy().eval()
    eager = copy.deepcopy(model)
    compiled = export_policy(tmp_path, model)
    assert "obs_mean" not in [p.name for p in compiled.spec.model("policy").inputs]
    assert "obs_mean" not in [p.name for p in compiled.spec.model("policy").outputs]
    assert_matches_eager(compiled, eager, steps=5)


def test_the_model_gets_plain_buffers_with_current_values_back(tmp_path):
    torch.manual_seed(4)
    model = GRUPolicy().eval()
    eager = copy.deepcopy(model)
    mean = model.obs_mean
    observations = [torch.randn(4) for _ in range(3)]
    leapp.start("p", save_path=tmp_path)
    with torch.no_grad():
        for obs in observations:
            policy_tick(model, obs)
            eager(obs)
            assert type(model.h) is torch.Tensor and model.obs_mean is mean
            torch.testing.assert_close(model.h, eager.h)
    leapp.stop()
    assert dict(model.named_buffers()).keys() == {"h", "obs_mean"}
    assert "h" in model.state_dict()


def test_buffers_are_handed_back_when_the_node_never_closes(tmp_path):
    model = GRUPolicy().eval()
    h = model.h
    leapp.start("p", save_path=tmp_path)
    annotate.input_tensors("policy", {"obs": torch.randn(4)})
    annotate.module("policy", model)
    assert isinstance(model.h, leapp.TracedTensor)
    with pytest.raises(SessionError, match=r"never closed"):
        leapp.stop()
    assert model.h is h and type(model.h) is torch.Tensor


def test_buffer_names_pick_buffers_by_dotted_name(tmp_path):
    torch.manual_seed(5)

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.core = GRUPolicy()

        def forward(self, obs):
            return self.core(obs)

    model = Wrapper().eval()
    eager = copy.deepcopy(model)
    compiled = export_policy(tmp_path, model, buffer_names=["core.h"])
    assert compiled.spec.pipeline.feedback_flow == {"policy/core_h": ("policy/core_h",)}
    pipeline = leapp.Pipeline.load(compiled.path)
    for _ in range(10):
        obs = torch.randn(4)
        with torch.no_grad():
            expected = eager(obs)
        got = pipeline.step({"policy/obs": obs})["policy/action"]
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_an_unknown_buffer_name_is_refused_with_the_models_buffers(tmp_path):
    leapp.start("p", save_path=tmp_path)
    annotate.input_tensors("policy", {"obs": torch.randn(4)})
    with pytest.raises(TraceError, match=r"\['hidden'\] are not buffers.*\['h', 'obs_mean'\]"):
        annotate.module("policy", GRUPolicy(), buffer_names=["hidden"])


def test_module_needs_the_node_open(tmp_path):
    leapp.start("p", save_path=tmp_path)
    with pytest.raises(SessionError, match=r"annotate\.module\('policy'.*input_tensors"):
        annotate.module("policy", GRUPolicy())


def test_module_outside_a_session_changes_nothing():
    model = GRUPolicy()
    h = model.h
    assert annotate.module("policy", model) is None
    assert model.h is h
