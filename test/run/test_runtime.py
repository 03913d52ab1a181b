"""The reference runtime runs exported nodes and pipelines like eager PyTorch; checks inputs."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.fx
from support.eager import export_module

from leapp import spec as spec_file
from leapp.errors import PipelineError, SpecError
from leapp.run.model import load_model
from leapp.run.onnx_runner import load_onnx
from leapp.run.pipeline import Pipeline

SAMPLES = 50


class Preprocess(torch.nn.Module):
    """The seed's preprocess node: normalize, clamp, concatenate."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(6))
        self.register_buffer("std", torch.full((6,), 0.5))

    def forward(self, state, velocity):
        return torch.cat([torch.clamp((state - self.mean) / self.std, -5.0, 5.0), velocity])


class Policy(torch.nn.Module):
    """The seed's policy node: Linear(9, 6) + tanh."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(9, 6)

    def forward(self, obs):
        return torch.tanh(self.net(obs.unsqueeze(0))).squeeze(0)


class Mixed(torch.nn.Module):
    """Float, 0-d float, 0-d int64 and bool outputs."""

    def forward(self, x, count):
        return x * 2.0, x.sum(), torch.argmax(x) + count, x > 0


def write_export(directory, nodes, data_flow=None, name="pipe"):
    """Export ``nodes`` = [(node, module, example inputs, inputs, outputs, backend)] + spec."""
    models, fed = [], {c for consumers in (data_flow or {}).values() for c in consumers}
    for node, module, examples, inputs, outputs, backend in nodes:
        graph_module, artifact = export_module(
            module, examples, backend, directory, inputs, outputs, node
        )
        results = graph_module(*examples)
        results = (results,) if isinstance(results, torch.Tensor) else results
        md5 = sha = None
        if artifact.model_path:
            md5, sha = spec_file.file_checksums(directory / artifact.model_path)
        parameters = spec_file.ModelParameters(
            artifact.model_path,
            md5,
            sha,
            artifact.backend,
            opset_version=artifact.opset_version,
            torch_version=artifact.torch_version,
        )
        models.append(
            spec_file.ModelSpec(
                node,
                tuple(_port(n, v) for n, v in zip(inputs, examples, strict=True)),
                tuple(_port(n, v) for n, v in zip(outputs, results, strict=True)),
                parameters,
            )
        )
    consumed = set(data_flow or {})
    pipeline = spec_file.PipelineSpec(
        data_flow={k: tuple(v) for k, v in (data_flow or {}).items()},
        feedback_flow={},
        inputs={
            m.name: tuple(p.name for p in m.inputs if f"{m.name}/{p.name}" not in fed)
            for m in models
        },
        outputs={
            m.name: tuple(p.name for p in m.outputs if f"{m.name}/{p.name}" not in consumed)
            for m in models
        },
    )
    pipeline = dataclasses.replace(
        pipeline,
        inputs={k: v for k, v in pipeline.inputs.items() if v},
        outputs={k: v for k, v in pipeline.outputs.items() if v},
    )
    spec = spec_file.Spec(name, tuple(models), pipeline, spec_file.system_information())
    return spec_file.dump(spec, directory / f"{name}.yaml")


def _port(name, value):
    return spec_file.TensorSpec(name, str(value.dtype).removeprefix("torch."), tuple(value.shape))


@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    """The seed's two-node pipeline: preprocess (jit) feeding policy (onnx)."""
    torch.manual_seed(0)
    preprocess, policy = Preprocess(), Policy()
    directory = tmp_path_factory.mktemp("seed") / "torch_pipeline"
    spec = write_export(
        directory,
        [
            (
                "preprocess",
                preprocess,
                (torch.zeros(6), torch.zeros(3)),
                ["state", "velocity"],
                ["obs"],
                "jit",
            ),
            ("policy", policy, (torch.zeros(9),), ["obs"], ["action"], "onnx"),
        ],
        {"preprocess/obs": ["policy/obs"]},
        name="torch_pipeline",
    )
    return spec, preprocess, policy


def test_pipeline_step_matches_eager_on_fresh_inputs(seed):
    spec, preprocess, policy = seed
    pipeline = Pipeline.load(spec.path.parent)
    assert pipeline.input_keys == ("preprocess/state", "preprocess/velocity")
    for _ in range(SAMPLES):
        state, velocity = torch.randn(6) * 3, torch.randn(3)
        out = pipeline.step({"preprocess/state": state, "preprocess/velocity": velocity})
        obs = preprocess(state, velocity)
        assert set(out) == {"preprocess/obs", "policy/action"}
        torch.testing.assert_close(out["preprocess/obs"], obs, rtol=0, atol=1e-5)
        torch.testing.assert_close(out["policy/action"], policy(obs), rtol=0, atol=1e-5)


def test_pipeline_accepts_non_contiguous_inputs(seed):
    spec, preprocess, policy = seed
    pipeline = Pipeline(spec)
    state, velocity = torch.randn(6, 2)[:, 1], torch.randn(3, 3).t()[0]
    assert not state.is_contiguous() and not velocity.is_contiguous()
    out = pipeline.step({"preprocess/state": state, "preprocess/velocity": velocity})
    expected = policy(preprocess(state, velocity))
    torch.testing.assert_close(out["policy/action"], expected, rtol=0, atol=1e-5)


def test_onnx_model_accepts_non_contiguous_inputs_that_require_grad(seed):
    spec, _, policy = seed
    model = load_model(spec, "policy")
    obs = torch.randn(9, 2)[:, 1].requires_grad_()
    assert not obs.is_contiguous()
    torch.testing.assert_close(model.run([obs])[0], policy(obs), rtol=0, atol=1e-5)


def test_onnx_io_binding_is_used_only_where_it_agrees_on_random_values(seed, monkeypatch):
    """A bound run that answers every call with its first result (stale buffers) agrees with
    ``session.run`` on zeros alone; the random check catches it and the node runs through
    ``session.run``, like eager PyTorch."""
    from leapp.run import onnx_runner

    spec, _, policy = seed
    assert onnx_runner.load_onnx(spec, "policy").bound is not None  # the cheap entry, normally

    class StaleRun(onnx_runner.BoundRun):
        __slots__ = ("first",)

        def call(self, values):
            if not hasattr(self, "first"):
                self.first = super().call(values)
            return [array.copy() for array in self.first]

    monkeypatch.setattr(onnx_runner, "BoundRun", StaleRun)
    model = onnx_runner.load_onnx(spec, "policy")
    assert model.bound is None and model.call == model.call_session
    obs = torch.randn(9)
    found = torch.from_numpy(model.call([obs.numpy()])[0])
    torch.testing.assert_close(found, policy(obs), rtol=0, atol=1e-5)


def test_pipeline_load_verifies_checksums(seed, tmp_path):
    spec, _, _ = seed
    copy = tmp_path / "torch_pipeline"
    copy.mkdir()
    for file in spec.path.parent.iterdir():
        (copy / file.name).write_bytes(file.read_bytes())
    (copy / "policy.onnx").write_bytes((copy / "policy.onnx").read_bytes() + b"\0")
    with pytest.raises(SpecError, match=r"policy\.onnx"):
        Pipeline.load(copy)


@pytest.mark.parametrize(
    ("inputs", "pattern"),
    [
        ({"preprocess/state": torch.zeros(6)}, r"missing input\(s\) \['preprocess/velocity'\]"),
        (
            {
                "preprocess/state": torch.zeros(6),
                "preprocess/velocity": torch.zeros(3),
                "policy/obs": torch.zeros(9),
            },
            r"unexpected input\(s\) \['policy/obs'\]",
        ),
        (
            {"preprocess/state": torch.zeros(6), "policy/obs": torch.zeros(9)},
            r"missing input\(s\) \['preprocess/velocity'\]; unexpected input\(s\) "
            r"\['policy/obs'\]",
        ),
        (
            {"preprocess/state": torch.zeros(5), "preprocess/velocity": torch.zeros(3)},
            r"input 'preprocess/state' has shape \[5\], expected \[6\]",
        ),
        (
            {"preprocess/state": torch.zeros(6), "preprocess/velocity": torch.zeros(3).double()},
            r"input 'preprocess/velocity' has dtype float64, expected float32",
        ),
        (
            {"preprocess/state": [0.0] * 6, "preprocess/velocity": torch.zeros(3)},
            r"input 'preprocess/state' is a list, expected a torch.Tensor",
        ),
    ],
    ids=["missing", "extra", "swapped", "shape", "dtype", "not-a-tensor"],
)
def test_step_rejects_bad_inputs_naming_the_port(seed, inputs, pattern):
    pipeline = Pipeline(seed[0])
    with pytest.raises(PipelineError, match=pattern):
        pipeline.step(inputs)


@pytest.mark.parametrize("backend", ["jit", "onnx", "pt2"])
def test_load_model_runs_every_backend_like_eager(backend, tmp_path):
    module = Mixed()
    spec = write_export(
        tmp_path,
        [
            (
                "mixed",
                module,
                (torch.zeros(4), torch.tensor(0)),
                ["x", "count"],
                ["double", "total", "index", "positive"],
                backend,
            )
        ],
    )
    model = load_model(spec, "mixed")
    assert model.backend == backend
    for step in range(SAMPLES):
        args = (torch.randn(4), torch.tensor(step))
        for got, want in zip(model.run(args), module(*args), strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape
            torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


def test_model_run_rejects_wrong_number_of_inputs(seed):
    model = load_model(seed[0], "preprocess")
    with pytest.raises(PipelineError, match=r"node 'preprocess' takes 2 inputs"):
        model.run([torch.zeros(6)])


def test_load_model_rejects_unknown_node(seed):
    with pytest.raises(PipelineError, match=r"no node 'planner'.*\['preprocess', 'policy'\]"):
        load_model(seed[0], "planner")


def test_pipeline_rejects_a_node_without_artifact(tmp_path):
    spec = write_export(
        tmp_path, [("idle", torch.nn.Tanh(), (torch.zeros(3),), ["x"], ["y"], None)]
    )
    with pytest.raises(PipelineError, match=r"nodes \['idle'\] have no artifact"):
        Pipeline(spec)
    with pytest.raises(PipelineError, match=r"node 'idle' has no artifact"):
        load_model(spec, "idle")


def test_pipeline_with_feedback_but_no_initial_values_file_is_rejected(seed):
    spec = seed[0]
    looped = dataclasses.replace(
        spec,
        pipeline=dataclasses.replace(
            spec.pipeline,
            data_flow={},
            inputs={"preprocess": ("state", "velocity")},
            feedback_flow={"preprocess/obs": ("policy/obs",)},
        ),
    )
    with pytest.raises(PipelineError, match=r"feedback inputs \['policy/obs'\] but no initial"):
        Pipeline(looped)


def test_pipeline_runs_producers_before_consumers_whatever_the_spec_order(seed):
    spec, preprocess, policy = seed
    reordered = dataclasses.replace(spec, models=tuple(reversed(spec.models)))
    state, velocity = torch.randn(6), torch.randn(3)
    out = Pipeline(reordered).step({"preprocess/state": state, "preprocess/velocity": velocity})
    expected = policy(preprocess(state, velocity))
    torch.testing.assert_close(out["policy/action"], expected, rtol=0, atol=1e-5)


def test_pipeline_rejects_a_data_flow_cycle_naming_its_nodes(seed):
    spec = seed[0]
    looped = dataclasses.replace(
        spec,
        pipeline=dataclasses.replace(
            spec.pipeline,
            data_flow={**spec.pipeline.data_flow, "policy/action": ("preprocess/state",)},
            inputs={"preprocess": ("velocity",)},
        ),
    )
    pattern = (
        r"cycle through nodes \['policy', 'preprocess'\] \(preprocess feeds policy, policy "
        r"feeds preprocess\); .* belong in feedback_flow"
    )
    with pytest.raises(PipelineError, match=pattern):
        Pipeline(looped)


@pytest.mark.parametrize("load", [load_model, load_onnx], ids=["load_model", "load_onnx"])
def test_loading_rejects_an_artifact_that_disagrees_with_the_spec(seed, load):
    # The torch runtime and the torch-free ONNX runner check outputs with one check.
    spec = seed[0]
    policy = spec.model("policy")
    wrong = dataclasses.replace(
        policy, outputs=(dataclasses.replace(policy.outputs[0], shape=(5,)),)
    )
    changed = dataclasses.replace(spec, models=(spec.models[0], wrong))
    with pytest.raises(PipelineError, match=r"output 'action'.*float32 \[6\] on zeros.*\[5\]"):
        load(changed, "policy")


def test_step_outputs_do_not_track_gradients(seed):
    pipeline = Pipeline(seed[0])
    state = torch.zeros(6, requires_grad=True)
    out = pipeline.step({"preprocess/state": state, "preprocess/velocity": torch.zeros(3)})
    assert not any(value.requires_grad for value in out.values())
