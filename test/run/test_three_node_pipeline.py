"""A three-node graph with fan-out and mixed backends: every artifact and the whole pipeline
(through leapp.Pipeline) match eager PyTorch on fresh random inputs."""

from __future__ import annotations

import pytest
import torch

import leapp
from leapp import annotate
from leapp.run.model import load_model

torch.manual_seed(1)
ENCODER = torch.nn.Sequential(torch.nn.Linear(7, 16), torch.nn.ReLU(), torch.nn.LayerNorm(16))
HEAD = torch.nn.Linear(16, 4)
SCALE = torch.linspace(0.5, 1.5, 16)


def encode(state, command):
    state, command = annotate.input_tensors("encode", {"state": state, "command": command})
    features = ENCODER(torch.cat([state, command], dim=-1))
    annotate.output_tensors("encode", {"features": features}, export_with="jit")
    return features


def act(features):
    features = annotate.input_tensors("act", {"features": features})
    action = torch.tanh(HEAD(features))
    annotate.output_tensors("act", {"action": action}, export_with="onnx")
    return action


def monitor(features):
    features = annotate.input_tensors("monitor", {"features": features})
    energy = (features * SCALE).pow(2).sum(-1, keepdim=True)
    peak = features.abs().amax(-1)
    annotate.output_tensors("monitor", {"energy": energy, "peak": peak}, export_with="pt2")
    return energy, peak


def run(state, command):
    features = encode(state, command)
    return features, act(features), *monitor(features)


def fresh():
    return torch.randn(2, 5), torch.randn(2, 2)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    from leapp import session

    session._active = None
    leapp.start("three_nodes", save_path=tmp_path_factory.mktemp("export"))
    with torch.no_grad():
        run(*fresh())
    leapp.stop()
    return leapp.compile_graph()


def test_three_node_spec_has_fan_out_and_mixed_backends(compiled):
    spec = compiled.spec
    assert [m.name for m in spec.models] == ["encode", "act", "monitor"]
    assert [m.parameters.backend for m in spec.models] == ["jit", "onnx", "pt2"]
    assert spec.pipeline.data_flow == {"encode/features": ("act/features", "monitor/features")}
    assert spec.pipeline.outputs == {"act": ("action",), "monitor": ("energy", "peak")}


@pytest.mark.parametrize("node", ["encode", "act", "monitor"])
def test_each_artifact_matches_eager_on_fresh_inputs(compiled, node):
    model = load_model(compiled.spec, node)
    for _ in range(50):
        state, command = fresh()
        with torch.no_grad():
            features, action, energy, peak = run(state, command)
        inputs = {"encode": [state, command], "act": [features], "monitor": [features]}[node]
        expected = {"encode": (features,), "act": (action,), "monitor": (energy, peak)}[node]
        for got, want in zip(model.run(inputs), expected, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_pipeline_step_matches_eager_on_fresh_inputs(compiled):
    pipeline = leapp.Pipeline.load(compiled.path)
    for _ in range(50):
        state, command = fresh()
        with torch.no_grad():
            features, action, energy, peak = run(state, command)
        out = pipeline.step({"encode/state": state, "encode/command": command})
        assert set(out) == {"encode/features", "act/action", "monitor/energy", "monitor/peak"}
        torch.testing.assert_close(out["encode/features"], features, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out["act/action"], action, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out["monitor/energy"], energy, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out["monitor/peak"], peak, rtol=1e-5, atol=1e-5)


def test_seed_pipeline_step_matches_eager_on_fresh_inputs(tmp_path):
    import torch_pipeline as seed

    torch.manual_seed(0)
    policy = seed.Policy().eval()
    leapp.start(name="torch_pipeline", save_path=tmp_path)
    seed.run_policy(policy, seed.preprocess(torch.zeros(6), torch.zeros(3)))
    leapp.stop()
    pipeline = leapp.Pipeline.load(leapp.compile_graph().path)
    for _ in range(50):
        state, velocity = torch.randn(6) * 3, torch.randn(3)
        with torch.no_grad():
            obs = seed.preprocess(state, velocity)
            action = seed.run_policy(policy, obs)
        out = pipeline.step({"preprocess/state": state, "preprocess/velocity": velocity})
        torch.testing.assert_close(out["preprocess/obs"], obs, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out["policy/action"], action, rtol=1e-5, atol=1e-5)
