"""What the tracer records: the seed listing, shared storage, pruning, edges, the spec written."""

from __future__ import annotations

import logging

import pytest
import torch
import torch_pipeline
import yaml

import leapp
from leapp import annotate
from leapp.spec.examples import load_examples

SEED_LISTING = """\
%state             = placeholder[target=state]
%velocity          = placeholder[target=velocity]
%_tensor_constant0 = get_attr[target=_tensor_constant0]
%sub               = call_function[target=torch.sub](args = (%state, %_tensor_constant0))
%_tensor_constant1 = get_attr[target=_tensor_constant1]
%div               = call_function[target=torch.div](args = (%sub, %_tensor_constant1))
%clamp             = call_function[target=torch.clamp](args = (%div, -5.0, 5.0))
%cat               = call_function[target=torch.cat](args = ([%clamp, %velocity],))
return cat"""


def trace_seed(tmp_path, **compile_options):
    torch.manual_seed(0)
    policy = torch_pipeline.Policy().eval()
    leapp.start(name="torch_pipeline", save_path=tmp_path)
    obs = torch_pipeline.preprocess(torch.zeros(6), torch.zeros(3))
    torch_pipeline.run_policy(policy, obs)
    leapp.stop()
    return policy, leapp.compile_graph(**compile_options)


def test_seed_preprocess_graph_prints_exactly_as_the_seed_listing(tmp_path):
    _, compiled = trace_seed(tmp_path)
    assert leapp.format_graph(compiled.graphs["preprocess"]) == SEED_LISTING


def test_seed_export_folder_holds_spec_artifacts_and_examples(tmp_path):
    _, compiled = trace_seed(tmp_path)
    folder = tmp_path / "torch_pipeline"
    names = sorted(p.name for p in folder.iterdir())
    assert names == [
        "policy.onnx",
        "preprocess.pt",
        "torch_pipeline.yaml",
        "torch_pipeline_examples.safetensors",
    ]
    document = yaml.safe_load((folder / "torch_pipeline.yaml").read_text())
    assert list(document) == ["models", "pipeline", "system information"]
    assert list(document["models"]) == ["preprocess", "policy"]
    assert document["models"]["preprocess"]["inputs"] == [
        {"name": "state", "dtype": "float32", "shape": [6], "type": "tensor"},
        {"name": "velocity", "dtype": "float32", "shape": [3], "type": "tensor"},
    ]
    assert document["models"]["policy"]["parameters"]["backend"] == "onnx"
    assert document["models"]["policy"]["parameters"]["opset_version"] >= 17
    pipeline = document["pipeline"]
    assert pipeline["data_flow"] == {"preprocess/obs": ["policy/obs"]}
    assert pipeline["feedback_flow"] == {}
    assert pipeline["inputs"] == {"preprocess": ["state", "velocity"]}
    assert pipeline["outputs"] == {"policy": ["action"]}
    assert document["system information"]["leapp config version"] == "1.3"
    assert compiled.spec == leapp.spec.load(folder)


def test_traced_tensor_shares_storage_with_the_tensor_handed_in(tmp_path):
    state = torch.randn(6)
    leapp.start("p", save_path=tmp_path)
    traced = annotate.input_tensors("a", {"state": state})
    assert isinstance(traced, leapp.TracedTensor)
    assert isinstance(traced, torch.Tensor)
    assert traced.data_ptr() == state.data_ptr()


def test_annotations_outside_a_session_return_their_values_unchanged():
    state, velocity = torch.randn(6), torch.randn(3)
    got = annotate.input_tensors("a", {"state": state, "velocity": velocity})
    assert got[0] is state and got[1] is velocity
    assert annotate.output_tensors("a", {"y": state}, export_with="onnx") is state


def test_seed_example_runs_as_written_outside_a_session():
    policy = torch_pipeline.Policy().eval()
    obs = torch_pipeline.preprocess(torch.ones(6), torch.ones(3))
    action = torch_pipeline.run_policy(policy, obs)
    assert type(action) is torch.Tensor and action.shape == (6,)


def test_input_tensors_may_be_called_several_times_before_the_node_closes(tmp_path):
    leapp.start("p", save_path=tmp_path)
    a = annotate.input_tensors("n", {"a": torch.ones(2)})
    b = a * 2
    c = annotate.input_tensors("n", {"c": torch.ones(2)})
    annotate.output_tensors("n", {"y": b + c})
    leapp.stop()
    compiled = leapp.compile_graph()
    assert [p.name for p in compiled.spec.model("n").inputs] == ["a", "c"]


def test_code_that_feeds_no_output_is_pruned(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.ones(2)})
    unused = torch.exp(x) * 3  # noqa: F841
    annotate.output_tensors("n", {"y": x + 1})
    leapp.stop()
    listing = leapp.format_graph(leapp.compile_graph().graphs["n"])
    assert "exp" not in listing and "mul" not in listing


def test_unused_input_is_dropped_with_a_log_line_naming_it(tmp_path, caplog):
    leapp.start("p", save_path=tmp_path)
    x, _ = annotate.input_tensors("n", {"x": torch.ones(2), "ignored": torch.ones(2)})
    annotate.output_tensors("n", {"y": x + 1})
    leapp.stop()
    with caplog.at_level(logging.INFO, logger="leapp"):
        compiled = leapp.compile_graph()
    assert [p.name for p in compiled.spec.model("n").inputs] == ["x"]
    assert compiled.spec.pipeline.inputs == {"n": ("x",)}
    assert "node 'n': input 'ignored' does not contribute to any output" in caplog.text


def test_untraced_tensors_are_frozen_with_their_value_at_trace_time(tmp_path):
    offset = torch.ones(3)
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.zeros(3)})
    annotate.output_tensors("n", {"y": x + offset})
    leapp.stop()
    offset += 100.0  # changes after tracing must not leak into the export
    pipeline = leapp.Pipeline.load(leapp.compile_graph().path)
    out = pipeline.step({"n/x": torch.zeros(3)})
    torch.testing.assert_close(out["n/y"], torch.ones(3))


def test_published_output_fed_to_two_nodes_makes_two_edges(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(4)})
    y = annotate.output_tensors("a", {"y": x * 2})
    b = annotate.input_tensors("b", {"y": y})
    annotate.output_tensors("b", {"u": b + 1})
    c = annotate.input_tensors("c", {"v": y})
    annotate.output_tensors("c", {"w": c - 1})
    leapp.stop()
    spec = leapp.compile_graph().spec
    assert spec.pipeline.data_flow == {"a/y": ("b/y", "c/v")}
    assert spec.pipeline.outputs == {"b": ("u",), "c": ("w",)}


def test_input_from_an_unpublished_intermediate_is_rejected(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(4)})
    hidden = x * 2
    annotate.output_tensors("a", {"y": hidden + 1})
    with pytest.raises(leapp.TraceError, match=r"not one of its published outputs"):
        annotate.input_tensors("b", {"h": hidden})


def test_static_outputs_are_exported_as_constants(tmp_path):
    gains = torch.tensor([1.0, 2.0, 3.0])
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.ones(3)})
    annotate.output_tensors("n", {"y": x * 2}, export_with="onnx", static_outputs={"kp": gains})
    leapp.stop()
    pipeline = leapp.Pipeline.load(leapp.compile_graph().path)
    out = pipeline.step({"n/x": torch.full((3,), 4.0)})
    torch.testing.assert_close(out["n/kp"], gains)
    torch.testing.assert_close(out["n/y"], torch.full((3,), 8.0))


def test_graph_configs_land_in_pipeline_configs(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.ones(3)})
    annotate.output_tensors("n", {"y": x * 2})
    leapp.stop()
    spec = leapp.compile_graph(graph_configs=leapp.GraphConfigs(frequency=50)).spec
    assert spec.pipeline.configs == {"frequency": 50}


def test_examples_hold_every_run_of_every_node(tmp_path):
    leapp.start("p", save_path=tmp_path)
    for step in range(3):
        x = annotate.input_tensors("n", {"x": torch.full((2,), float(step))})
        annotate.output_tensors("n", {"y": x * 2})
    leapp.stop()
    compiled = leapp.compile_graph()
    samples = load_examples(compiled.path.parent / compiled.spec.pipeline.examples)["n"]
    assert len(samples) == 3
    torch.testing.assert_close(samples[2].inputs["x"], torch.full((2,), 2.0))
    torch.testing.assert_close(samples[2].outputs["y"], torch.full((2,), 4.0))


def test_node_exported_with_none_is_recorded_without_an_artifact(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.ones(3)})
    annotate.output_tensors("n", {"y": x * 2}, export_with=None)
    leapp.stop()
    compiled = leapp.compile_graph()
    parameters = compiled.spec.model("n").parameters
    assert parameters.backend is None and parameters.model_path is None
    assert compiled.report.skipped == ("n",)
    assert sorted(p.name for p in compiled.path.parent.iterdir()) == [
        "p.yaml",
        "p_examples.safetensors",
    ]


def _user_artifact(tmp_path, scale: float):
    """A TorchScript file built by the user outside leapp: y = x * scale."""

    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = scale

        def forward(self, x):
            return x * self.scale

    path = tmp_path / "mine.pt"
    torch.jit.save(torch.jit.script(Scale()), str(path))
    return path


def test_users_own_artifact_is_registered_with_checksums(tmp_path):
    artifact = _user_artifact(tmp_path, 2.0)
    leapp.start("p", save_path=tmp_path / "out")
    x = annotate.input_tensors("n", {"x": torch.ones(3)})
    annotate.output_tensors("n", {"y": x * 2}, export_with=artifact)
    leapp.stop()
    compiled = leapp.compile_graph()
    parameters = compiled.spec.model("n").parameters
    assert parameters.backend == "jit" and parameters.model_path == "n.pt"
    assert leapp.spec.file_checksums(compiled.path.parent / "n.pt")[1] == parameters.sha256sum


def test_strict_compile_raises_when_an_artifact_disagrees_with_the_trace(tmp_path):
    artifact = _user_artifact(tmp_path, 3.0)  # the traced code multiplies by 2
    leapp.start("p", save_path=tmp_path / "out")
    x = annotate.input_tensors("n", {"x": torch.ones(3)})
    annotate.output_tensors("n", {"y": x * 2}, export_with=artifact)
    leapp.stop()
    with pytest.raises(
        leapp.ValidationError, match=r"node 'n', output 'y', sample 0: .*largest difference 1"
    ):
        leapp.compile_graph()


def test_lenient_compile_reports_the_mismatch_and_returns(tmp_path, caplog):
    artifact = _user_artifact(tmp_path, 3.0)
    leapp.start("p", save_path=tmp_path / "out")
    x = annotate.input_tensors("n", {"x": torch.ones(3)})
    annotate.output_tensors("n", {"y": x * 2}, export_with=artifact)
    leapp.stop()
    with caplog.at_level(logging.WARNING, logger="leapp"):
        compiled = leapp.compile_graph(strict=False)
    assert not compiled.report.ok
    assert compiled.report.failures[0].node == "n"
    assert "node 'n', output 'y'" in caplog.text
