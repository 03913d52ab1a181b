"""TorchScript nodes run in TorchScript's static runtime only where it gives exactly what the
graph executor gives; a step of nodes that record no gradients switches no grad mode."""

from __future__ import annotations

import pytest
import torch
from support.eager import export_function

from leapp.run import static_runtime
from leapp.run.model import load_model
from leapp.run.pipeline import Pipeline

MEAN, STD = torch.zeros(6), torch.full((6,), 0.5)
PREPROCESS_PORTS = [(torch.float32, (6,)), (torch.float32, (3,))]
TO_STATIC = torch._C._jit_to_static_module


def preprocess(state, velocity):
    return torch.cat([torch.clamp((state - MEAN) / STD, -5.0, 5.0), velocity])


def export_preprocess(tmp_path, backend="jit"):
    inputs = {"state": torch.randn(6), "velocity": torch.randn(3)}
    return export_function(tmp_path, preprocess, inputs, backend)


def fresh_inputs():
    return [torch.randn(6) * 4, torch.randn(3)]


def bits(value):
    return value.contiguous().view(torch.int32)


def test_torchscript_node_runs_in_the_static_runtime_bit_for_bit_like_the_graph_executor(
    tmp_path,
):
    compiled = export_preprocess(tmp_path)
    model = load_model(compiled.spec, "node")
    assert isinstance(model._single, torch.StaticModule) and model._grad_free
    executor = torch.jit.load(str(compiled.spec.directory / "node.pt"))
    for _ in range(50):
        inputs = fresh_inputs()
        (got,) = model.run(inputs)
        with torch.no_grad():
            want = executor(*inputs)
        assert torch.equal(bits(got), bits(want))
        torch.testing.assert_close(got, preprocess(*inputs), rtol=0, atol=1e-6)


class FakeStatic:
    """A static runtime stand-in: the real one, with ``change`` applied to every result."""

    def __init__(self, real, change):
        self.real, self.change = real, change

    def __call__(self, *inputs):
        return self.change(self.real(*inputs), inputs)


def static_forward_with(monkeypatch, path, change, ports=PREPROCESS_PORTS):
    """``static_forward`` of the artifact at ``path``, its static runtime's results altered by
    ``change(result, inputs)``."""
    monkeypatch.setattr(
        torch._C, "_jit_to_static_module", lambda module: FakeStatic(TO_STATIC(module), change)
    )
    module = torch.jit.load(str(path)).eval()
    forward = module._c._get_method("forward")
    example = [torch.randn(shape) for _, shape in ports]
    return static_runtime.static_forward(module, forward, ports, example, node="n")


def test_static_runtime_is_used_where_nothing_differs(tmp_path, monkeypatch):
    compiled = export_preprocess(tmp_path)
    path = compiled.spec.directory / "node.pt"
    assert static_forward_with(monkeypatch, path, lambda result, _: result) is not None


def test_static_runtime_that_hands_out_one_buffer_twice_is_not_used(tmp_path, monkeypatch):
    kept = {}

    def reuse(result, _):
        buffer = kept.setdefault("buffer", result.clone())
        return buffer.copy_(result)  # the same tensor every call, overwritten

    compiled = export_preprocess(tmp_path)
    path = compiled.spec.directory / "node.pt"
    assert static_forward_with(monkeypatch, path, reuse) is None


def test_static_runtime_that_changes_one_bit_is_not_used(tmp_path, monkeypatch):
    def negative_zero(result, _):
        changed = result.clone()
        changed[changed == 0] = -0.0  # equal as numbers, not as bits
        return changed

    def nudged(result, _):
        return torch.nextafter(result, torch.full_like(result, 10.0))

    compiled = export_preprocess(tmp_path)
    path = compiled.spec.directory / "node.pt"
    for change in (negative_zero, nudged):
        assert static_forward_with(monkeypatch, path, change) is None


def test_static_runtime_whose_output_is_an_input_where_the_executor_copies_is_not_used(
    tmp_path, monkeypatch
):
    compiled = export_function(tmp_path, lambda x: x * 1.0, {"x": torch.randn(5)}, "jit")
    path = compiled.spec.directory / "node.pt"
    ports = [(torch.float32, (5,))]
    assert static_forward_with(monkeypatch, path, lambda _, inputs: inputs[0], ports) is None
    assert static_forward_with(monkeypatch, path, lambda result, _: result, ports) is not None


def test_step_outputs_of_a_static_runtime_node_are_inference_tensors(tmp_path):
    compiled = export_preprocess(tmp_path)
    pipeline = Pipeline.load(compiled.path)
    inputs = fresh_inputs()
    (out,) = pipeline.step({"node/state": inputs[0], "node/velocity": inputs[1]}).values()
    assert out.is_inference() and not out.requires_grad
    torch.testing.assert_close(out, preprocess(*inputs), rtol=0, atol=1e-6)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
        out.add_(1)
    assert torch.equal(out.clone().add_(1), out + 1)  # a clone is an ordinary tensor


def test_step_of_grad_free_nodes_switches_no_grad_mode_and_detaches_inputs(tmp_path):
    compiled = export_preprocess(tmp_path)
    pipeline = Pipeline.load(compiled.path)
    assert "set_grad_enabled" not in pipeline.step_source
    state, velocity = fresh_inputs()
    out = pipeline.step({"node/state": state.requires_grad_(), "node/velocity": velocity})
    assert not out["node/out0"].requires_grad
    torch.testing.assert_close(out["node/out0"], preprocess(state, velocity).detach())


def test_step_turns_gradients_off_around_a_node_that_could_record_them(tmp_path):
    weight = torch.randn(9, 9, requires_grad=True)
    compiled = export_function(
        tmp_path, lambda x: weight @ x, {"x": torch.randn(9)}, "pt2", node="mix"
    )
    pipeline = Pipeline.load(compiled.path)
    assert "set_grad_enabled(False)" in pipeline.step_source
    x = torch.randn(9, requires_grad=True)
    out = pipeline.step({"mix/x": x})["mix/out0"]
    assert not out.requires_grad and torch.is_grad_enabled()
    torch.testing.assert_close(out, (weight @ x).detach())
