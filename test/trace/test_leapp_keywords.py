"""Keywords and names NVIDIA LEAPP code passes, each with its meaning here.

Every exported artifact is compared with eager PyTorch on fresh random inputs.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from support.eager import assert_matches_eager, export_function

import leapp
from leapp import annotate
from leapp.spec.examples import load_examples


def _double_plus_one(x):
    return x * 2 + 1


def _run_node(tmp_path, runs=1, **start):
    leapp.start("pipe", save_path=tmp_path, **start)
    for _ in range(runs):
        x = annotate.input_tensors("node", {"x": torch.randn(3)})
        annotate.output_tensors("node", {"y": _double_plus_one(x)})
    leapp.stop()


# ------------------------------------------------------------------------- TracedTensor.tensor
def test_traced_tensor_tensor_is_the_plain_value_sharing_storage(tmp_path):
    value = torch.randn(3)
    leapp.start("pipe", save_path=tmp_path)
    traced = annotate.input_tensors("node", {"x": value})
    plain = traced.tensor
    annotate.output_tensors("node", {"y": traced + 1})
    leapp.stop()
    assert type(plain) is torch.Tensor
    assert plain.data_ptr() == value.data_ptr()
    torch.testing.assert_close(plain, value)


# ------------------------------------------------------------------------------ leapp.start
def test_verbose_logs_every_recorded_node_run_at_info(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="leapp"):
        _run_node(tmp_path, runs=2, verbose=True)
    runs = [r for r in caplog.records if "node 'node' run" in r.getMessage()]
    assert [r.levelno for r in runs] == [logging.INFO, logging.INFO]
    assert "inputs ['x'], outputs ['y']" in runs[0].getMessage()


def test_without_verbose_node_runs_are_not_logged(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="leapp"):
        _run_node(tmp_path, runs=2)
    assert not [r for r in caplog.records if "node 'node' run" in r.getMessage()]


def test_max_cached_io_keeps_the_examples_of_the_first_runs(tmp_path):
    _run_node(tmp_path, runs=5, max_cached_io=2)
    compiled = leapp.compile_graph()
    samples = load_examples(compiled.path.parent / compiled.spec.pipeline.examples)
    assert len(samples["node"]) == 2
    assert_matches_eager(compiled, _double_plus_one, lambda: {"x": torch.randn(3)})


def test_without_max_cached_io_every_run_is_kept(tmp_path):
    _run_node(tmp_path, runs=4)
    compiled = leapp.compile_graph()
    samples = load_examples(compiled.path.parent / compiled.spec.pipeline.examples)
    assert len(samples["node"]) == 4


def test_max_cached_io_keeps_edges_seen_on_later_runs(tmp_path):
    leapp.start("pipe", save_path=tmp_path, max_cached_io=1)
    h = torch.zeros(2)
    for _ in range(3):
        h = annotate.input_tensors("node", {"h": h})
        h = annotate.output_tensors("node", {"h": h * 0.5 + 1})
    leapp.stop()
    compiled = leapp.compile_graph()
    assert compiled.spec.pipeline.feedback_flow == {"node/h": ("node/h",)}


@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_max_cached_io_must_be_a_positive_whole_number(tmp_path, value):
    with pytest.raises(leapp.SessionError, match="max_cached_io"):
        leapp.start("pipe", save_path=tmp_path, max_cached_io=value)


def test_patching_keyword_is_accepted_and_logged_at_debug(tmp_path, caplog):
    with caplog.at_level(logging.DEBUG, logger="leapp"):
        _run_node(tmp_path, global_patching=False, patching="all")
    assert any("needs no patches" in r.getMessage() for r in caplog.records)
    compiled = leapp.compile_graph()
    assert_matches_eager(compiled, _double_plus_one, lambda: {"x": torch.randn(3)})


def test_without_global_patching_numpy_crossings_give_plain_arrays(tmp_path):
    leapp.start("pipe", save_path=tmp_path, global_patching=False)
    x = annotate.input_tensors("node", {"x": torch.tensor([1.0, 2.0, 3.0])})
    for read in (lambda t: t.numpy(), np.asarray, np.array):
        plain = read(x)
        assert type(plain) is np.ndarray
        np.testing.assert_array_equal(plain, [1.0, 2.0, 3.0])  # branches on values: plain
    with pytest.raises(leapp.TraceError, match="not computed from the node's traced inputs"):
        annotate.output_tensors("node", {"y": torch.from_numpy(x.numpy() * 2)})
    annotate.output_tensors("node", {"y": x * 2})
    leapp.stop()
    assert_matches_eager(leapp.compile_graph(), lambda x: x * 2, lambda: {"x": torch.randn(3)})


def test_by_default_numpy_crossings_keep_the_trace(tmp_path):
    leapp.start("pipe", save_path=tmp_path)
    x = annotate.input_tensors("node", {"x": torch.randn(3)})
    assert isinstance(x.numpy(), leapp.TracedArray)
    annotate.output_tensors("node", {"y": torch.from_numpy(np.asarray(x) * 2)})
    leapp.stop()
    assert_matches_eager(leapp.compile_graph(), lambda x: x * 2, lambda: {"x": torch.randn(3)})


# ------------------------------------------------------------------------------ compile_graph
def test_compile_graph_without_validation_writes_the_export_without_a_report(tmp_path):
    _run_node(tmp_path)
    compiled = leapp.compile_graph(validate=False)
    assert compiled.report is None
    assert (compiled.path.parent / "node.pt").is_file()
    assert_matches_eager(compiled, _double_plus_one, lambda: {"x": torch.randn(3)})


def test_compile_graph_result_reads_as_leapps_node_to_passed_dict(tmp_path):
    leapp.start("pipe", save_path=tmp_path)
    x = annotate.input_tensors("steady", {"x": torch.randn(3)})
    annotate.output_tensors("steady", {"y": _double_plus_one(x)})
    x = annotate.input_tensors("noisy", {"x": torch.randn(3)})
    annotate.output_tensors("noisy", {"y": x + torch.rand_like(x)})  # differs on every run
    leapp.stop()
    compiled = leapp.compile_graph(strict=False)
    assert dict(compiled) == {"steady": True, "noisy": False}
    assert not all(compiled.values()) and not compiled
    with pytest.raises(KeyError, match="not validated"):
        compiled["absent"]

    _run_node(tmp_path)
    validated = leapp.compile_graph()
    assert dict(validated) == {"node": True} and validated and all(validated.values())
    _run_node(tmp_path)
    unvalidated = leapp.compile_graph(validate=False)
    assert dict(unvalidated) == {} and bool(unvalidated)


# ------------------------------------------------------------------------------ export_with names
@pytest.mark.parametrize(
    ("name", "backend", "suffix"),
    [
        ("jit-trace", "jit", ".pt"),
        ("jit-script", "jit", ".pt"),
        ("onnx-torchscript", "onnx", ".onnx"),
        ("onnx-dynamo", "onnx", ".onnx"),
        ("exported-program", "pt2", ".pt2"),
        ("torch", "jit", ".pt"),
    ],
)
def test_leapp_backend_names_export_as_the_backend_readers_know(tmp_path, name, backend, suffix):
    def fn(x, h):
        return torch.tanh(x @ torch.ones(3, 2) + h)

    compiled = export_function(tmp_path, fn, {"x": torch.randn(3), "h": torch.randn(2)}, name)
    parameters = compiled.spec.model("node").parameters
    assert (parameters.backend, parameters.model_path) == (backend, f"node{suffix}")
    assert leapp.spec.load(compiled.path).model("node").parameters.backend == backend
    assert_matches_eager(compiled, fn, lambda: {"x": torch.randn(3), "h": torch.randn(2)})


def test_jit_trace_does_not_script(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("torch.jit.script must not be called for 'jit-trace'")

    monkeypatch.setattr(torch.jit, "script", refuse)
    compiled = export_function(tmp_path, _double_plus_one, {"x": torch.randn(3)}, "jit-trace")
    assert_matches_eager(compiled, _double_plus_one, lambda: {"x": torch.randn(3)})


def test_jit_script_failing_is_an_export_error_naming_the_alternatives(tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("cannot script this")

    monkeypatch.setattr(torch.jit, "script", fail)
    with pytest.raises(leapp.ExportError, match=r"torch\.jit\.script.*jit-trace"):
        export_function(tmp_path, _double_plus_one, {"x": torch.randn(3)}, "jit-script")


def test_method_accepts_leapp_backend_names(tmp_path):
    @annotate.method(export_with="onnx-torchscript")
    def act(obs):
        action = torch.relu(obs) - 0.5
        return action

    leapp.start("pipe", save_path=tmp_path)
    act(torch.randn(4))
    leapp.stop()
    compiled = leapp.compile_graph()
    assert compiled.spec.model("act").parameters.backend == "onnx"
    assert_matches_eager(
        compiled, lambda obs: torch.relu(obs) - 0.5, lambda: {"obs": torch.randn(4)}, "act"
    )


def test_leapps_earlier_session_calls_on_annotate_work(tmp_path):
    annotate.start(name="pipe", save_path=tmp_path)
    x = annotate.input_tensors("node", {"x": torch.randn(3)})
    annotate.output_tensors("node", {"y": _double_plus_one(x)})
    annotate.stop()
    compiled = annotate.compile_graph(visualize=False)
    assert_matches_eager(compiled, _double_plus_one, lambda: {"x": torch.randn(3)})
