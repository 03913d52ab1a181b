"""validate_export re-runs every artifact on the captured samples and reports mismatches."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.fx

from leapp import spec as spec_file
from leapp.errors import ValidationError
from leapp.export import export_node
from leapp.run.validation import compare, validate_export
from leapp.spec.examples import NodeSample, save_examples

SAMPLES = 50


class Scale(torch.nn.Module):
    def __init__(self, gain):
        super().__init__()
        self.register_buffer("gain", torch.full((4,), gain))

    def forward(self, x):
        return x * self.gain, (x > 0).sum()


def write_export(directory, nodes, name="pipe"):
    """Export ``nodes`` = [(node, module, backend)], each Scale-like: x[4] -> (y[4], n[])."""
    models, samples = [], {}
    for node, module, backend in nodes:
        graph_module = torch.fx.symbolic_trace(module)
        artifact = export_node(
            graph_module,
            (torch.zeros(4),),
            node=node,
            input_names=["x"],
            output_names=["y", "n"],
            backend=backend,
            directory=directory,
        )
        md5 = sha = None
        if artifact.model_path:
            md5, sha = spec_file.file_checksums(directory / artifact.model_path)
        parameters = spec_file.ModelParameters(
            artifact.model_path, md5, sha, artifact.backend, opset_version=artifact.opset_version
        )
        ports = (
            (spec_file.TensorSpec("x", "float32", (4,)),),
            (spec_file.TensorSpec("y", "float32", (4,)), spec_file.TensorSpec("n", "int64", ())),
        )
        models.append(spec_file.ModelSpec(node, *ports, parameters))
        samples[node] = []
        for _ in range(SAMPLES):
            x = torch.randn(4)
            y, n = module(x)
            samples[node].append(NodeSample({"x": x}, {"y": y, "n": n}))
    examples = f"{name}_examples.safetensors"
    save_examples(directory / examples, samples)
    pipeline = spec_file.PipelineSpec(
        data_flow={},
        feedback_flow={},
        inputs={m.name: ("x",) for m in models},
        outputs={m.name: ("y", "n") for m in models},
        examples=examples,
    )
    spec = spec_file.Spec(name, tuple(models), pipeline, spec_file.system_information())
    return spec_file.dump(spec, directory / f"{name}.yaml")


def test_faithful_artifacts_pass_on_every_sample(tmp_path):
    spec = write_export(tmp_path, [("a", Scale(2.0), "jit"), ("b", Scale(3.0), "onnx")])
    report = validate_export(spec, rtol=1e-5, atol=1e-6)
    assert report.ok and report.failures == ()
    assert report.checked == ("a", "b") and report.samples == 2 * SAMPLES
    assert report.max_abs_diff["b/n"] == 0.0 and report.max_abs_diff["b/y"] <= 1e-6
    report.raise_for_failures()


def test_swapped_artifact_is_reported_with_node_output_sample_and_difference(tmp_path):
    spec = write_export(tmp_path, [("a", Scale(2.0), "onnx")])
    other = tmp_path / "other"
    export_node(
        torch.fx.symbolic_trace(Scale(2.5)),
        (torch.zeros(4),),
        node="a",
        input_names=["x"],
        output_names=["y", "n"],
        backend="onnx",
        directory=other,
    )
    (tmp_path / "a.onnx").write_bytes((other / "a.onnx").read_bytes())
    report = validate_export(spec, rtol=1e-5, atol=1e-6)
    assert not report.ok
    assert {(f.node, f.output) for f in report.failures} == {("a", "y")}
    assert [f.sample for f in report.failures] == list(range(SAMPLES))
    assert all(f.max_abs_diff > 0 for f in report.failures)
    with pytest.raises(ValidationError, match=r"node 'a', output 'y', sample 0: .*difference"):
        report.raise_for_failures()


def test_nodes_without_artifact_are_skipped(tmp_path):
    spec = write_export(tmp_path, [("a", Scale(2.0), None), ("b", Scale(3.0), "jit")])
    report = validate_export(spec)
    assert report.skipped == ("a",) and report.checked == ("b",) and report.ok


def test_spec_without_examples_cannot_be_validated(tmp_path):
    spec = write_export(tmp_path, [("a", Scale(2.0), "jit")])
    bare = dataclasses.replace(spec, pipeline=dataclasses.replace(spec.pipeline, examples=None))
    with pytest.raises(ValidationError, match=r"'pipe' records no examples file"):
        validate_export(bare)


def test_integer_and_bool_outputs_must_match_exactly():
    ints = torch.tensor([1, 2, 3])
    assert compare(ints, ints.clone(), rtol=1.0, atol=1.0) == (0.0, None)
    difference, detail = compare(ints, torch.tensor([1, 2, 4]), rtol=1.0, atol=1.0)
    assert difference == 1.0 and detail == "1 of 3 values differ"
    flags = torch.tensor([True, False])
    assert compare(flags, ~flags, rtol=0, atol=0)[1] == "2 of 2 values differ"


def test_floats_compare_within_tolerance_and_nan_matches_nan():
    traced = torch.tensor([1.0, float("nan"), -2.0])
    assert compare(traced + 1e-7, traced, rtol=0, atol=1e-6)[1] is None
    difference, detail = compare(traced + 1e-3, traced, rtol=0, atol=1e-6)
    assert detail == "2 of 3 values beyond tolerance" and difference == pytest.approx(
        1e-3, rel=1e-3
    )
    assert compare(torch.tensor([1.0, 2.0, -2.0]), traced, rtol=0, atol=1)[0] == math.inf


def test_shape_and_dtype_differences_are_mismatches():
    assert compare(torch.zeros(3), torch.zeros(4), rtol=0, atol=0) == (
        math.inf,
        "shape [3] but [4] was traced",
    )
    assert compare(torch.zeros(3), torch.zeros(3).double(), rtol=0, atol=0)[1] == (
        "dtype torch.float32 but torch.float64 was traced"
    )


def test_equal_infinities_match():
    infinities = torch.tensor([math.inf, -math.inf, 1.0])
    assert compare(infinities, infinities.clone(), rtol=1e-3, atol=1e-5) == (0.0, None)
    _, detail = compare(torch.tensor([math.inf]), torch.tensor([-math.inf]), rtol=1, atol=1)
    assert detail is not None


def _positive_definite(n):
    a = torch.randn(n, n)
    return a @ a.T + n * torch.eye(n)


def test_artifact_that_raises_on_zeros_is_validated_on_its_traced_values(tmp_path, caplog):
    from support.eager import assert_matches_eager, export_function

    for backend in ("jit", "pt2"):
        compiled = export_function(
            tmp_path / backend,
            lambda a: torch.linalg.cholesky(a),
            {"a": _positive_definite(4)},
            backend,
        )
        assert compiled.report.ok and compiled.report.checked == ("node",)
        assert_matches_eager(
            compiled, lambda a: torch.linalg.cholesky(a), lambda: {"a": _positive_definite(4)}
        )
    assert "raises on zeros of its input shapes" in caplog.text


def test_output_whose_shape_depends_on_values_fails_validation(tmp_path):
    from support.eager import export_function

    x = torch.tensor([1.0, -2.0, 3.0, -4.0])
    with pytest.raises(ValidationError, match="depends on the input values"):
        export_function(tmp_path, lambda x: torch.masked_select(x, x > 0), {"x": x}, "jit")
