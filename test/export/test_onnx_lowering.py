"""ONNX export of graphs the TorchScript-based exporter cannot write as they are: lowered to
ATen operations it knows, with every input port kept, matching eager PyTorch on fresh inputs."""

from __future__ import annotations

import math

import onnx
import pytest
import torch
from support.eager import assert_matches_eager, export_function

from leapp.errors import ExportError
from leapp.run.model import load_model

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


def _vector():
    return {"x": torch.randn(8) * 3, "y": torch.randn(8) * 3}


LOWERED = {
    "sinh": lambda x, y: torch.sinh(x),
    "acosh": lambda x, y: torch.acosh(1 + x.abs()),
    "expm1": lambda x, y: torch.expm1(x * 1e-4) * 1e4,
    "exp2": lambda x, y: torch.exp2(x),
    "frac": lambda x, y: torch.frac(x),
    "logaddexp": lambda x, y: torch.logaddexp(x * 40, y * 40),
    "heaviside": lambda x, y: torch.heaviside(x, y),
    "copysign": lambda x, y: torch.copysign(x, y),
    "xlogy": lambda x, y: torch.xlogy(x, y.abs()),
    "cumprod": lambda x, y: torch.cumprod(x, 0),
    "cummax": lambda x, y: torch.cummax(x, 0).values,
    "inner": lambda x, y: torch.inner(x, y),
    "addr": lambda x, y: torch.addr(torch.ones(8, 8), x, y),
    "index_add": lambda x, y: torch.index_add(x, 0, torch.tensor([0, 2, 2]), y[:3], alpha=2),
    "block_diag": lambda x, y: torch.block_diag(x.reshape(2, 4), y.reshape(4, 2)),
    "adaptive_avg_pool1d": lambda x, y: torch.nn.functional.adaptive_avg_pool1d(
        x.reshape(1, 1, 8), 3
    ),
    "softplus": lambda x, y: torch.nn.functional.softplus(x, beta=2, threshold=3),
    "kthvalue": lambda x, y: torch.kthvalue(x, 3).values,
    "searchsorted": lambda x, y: torch.searchsorted(torch.sort(x).values, y),
}


@pytest.mark.parametrize("name", sorted(LOWERED))
def test_lowered_node_matches_eager_on_fresh_inputs(tmp_path, name):
    fn = LOWERED[name]
    compiled = export_function(tmp_path, fn, _vector(), "onnx")
    assert_matches_eager(compiled, fn, _vector, samples=20, atol=1e-4)


def test_decompositions_keep_eager_edge_cases(tmp_path):
    def fn(x, y):
        return (
            torch.expm1(x),
            torch.logaddexp(x, y),
            torch.copysign(torch.ones_like(x), y),
            torch.fmax(x, y),
            torch.isposinf(x),
        )

    special = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-7, -88.0, 88.0]
    inputs = {"x": torch.tensor(special), "y": torch.tensor(list(reversed(special)))}
    compiled = export_function(tmp_path, fn, inputs, "onnx")
    got = load_model(compiled.spec, "node").run([inputs["x"], inputs["y"]])
    for actual, expected in zip(got, fn(**inputs), strict=True):
        torch.testing.assert_close(actual, expected, equal_nan=True)


def test_common_graph_is_exported_as_recorded(tmp_path):
    layer = torch.nn.Linear(9, 6)
    compiled = export_function(
        tmp_path, lambda obs: torch.tanh(layer(obs)), {"obs": torch.randn(9)}, "onnx"
    )
    model = onnx.load(str(compiled.spec.directory / "node.onnx"))
    assert [n.op_type for n in model.graph.node] in (["Gemm", "Tanh"], ["MatMul", "Add", "Tanh"])


def test_input_no_value_is_read_from_stays_an_input_of_the_model(tmp_path):
    def fn(x, y):
        return x.new_zeros(3) + y

    inputs = {"x": torch.randn(4), "y": torch.randn(3)}
    compiled = export_function(tmp_path, fn, inputs, "onnx")
    model = onnx.load(str(compiled.spec.directory / "node.onnx"))
    assert [value.name for value in model.graph.input] == ["x", "y"]
    assert [port.name for port in compiled.spec.model("node").inputs] == ["x", "y"]
    assert_matches_eager(compiled, fn, lambda: {"x": torch.randn(4), "y": torch.randn(3)})


def test_empty_input_exports_as_a_constant(tmp_path):
    def fn(x, y):
        return torch.nn.functional.unfold(x, 2), y * 2

    inputs = {"x": torch.empty(0, 1, 5, 5), "y": torch.randn(3)}
    compiled = export_function(tmp_path, fn, inputs, "onnx")
    assert_matches_eager(
        compiled, fn, lambda: {"x": torch.empty(0, 1, 5, 5), "y": torch.randn(3)}, samples=5
    )


def test_operation_without_onnx_form_is_refused_naming_it_and_its_line(tmp_path):
    with pytest.raises(ExportError) as refused:
        export_function(
            tmp_path, lambda x: torch.special.airy_ai(x), {"x": torch.randn(4)}, "onnx"
        )
    message = str(refused.value)
    assert "node 'node'" in message and "airy_ai" in message
    assert "test_onnx_lowering.py:" in message and "export_with='jit' or 'pt2'" in message


def test_complex_output_travels_as_real_pairs_and_reads_back_complex(tmp_path):
    def fn(x):
        return torch.fft.rfft(x), torch.fft.irfft(torch.fft.rfft(x), 8)

    compiled = export_function(tmp_path, fn, {"x": torch.randn(8)}, "onnx")
    model = onnx.load(str(compiled.spec.directory / "node.onnx"))
    dims = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    port = compiled.spec.model("node").outputs[0]  # the spec says what the model returns
    assert dims == [5, 2] and (port.dtype, port.shape) == ("float32", (5, 2))
    assert port.extra == {"as_complex": "complex64"}
    assert_matches_eager(compiled, fn, lambda: {"x": torch.randn(8)}, samples=10, atol=1e-4)


def test_softplus_keeps_its_threshold_where_the_traced_inputs_never_reach_it(tmp_path):
    def fn(x):
        return torch.nn.functional.softplus(x, beta=2, threshold=3)

    compiled = export_function(tmp_path, fn, {"x": torch.linspace(-1.0, 0.5, 8)}, "onnx")
    model = load_model(compiled.spec, "node")
    x = torch.linspace(1.0, 4.0, 8)  # 2x crosses the threshold 3 here: x itself above it
    (got,) = model.run([x])
    torch.testing.assert_close(got, fn(x), rtol=1e-5, atol=1e-5)
