"""When no ONNX model of a node reproduces its traced outputs, ``compile_graph()`` fails with an
ExportError naming the node, the first operation that goes wrong (and the user's line) and the
next step (another backend), and leaves no model behind: it never writes an invalid model that
fails at load. The exporter is made to translate one operation wrongly with a custom ONNX
symbolic (3x where the operation computes 2x), so every attempt writes a wrong model."""

from __future__ import annotations

import pytest
import torch

import leapp
from leapp import annotate


@torch.library.custom_op("leapp_breakage::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2.0


@twice.register_fake
def _(x):
    return torch.empty_like(x)


@pytest.fixture
def wrong_symbolic():
    def thrice(g, x):
        return g.op("Mul", x, g.op("Constant", value_t=torch.tensor(3.0)))

    torch.onnx.register_custom_op_symbolic("leapp_breakage::twice", thrice, 20)
    yield
    torch.onnx.unregister_custom_op_symbolic("leapp_breakage::twice", 20)


def test_no_reproducing_onnx_model_is_an_export_error_naming_node_operation_and_backend(
    tmp_path, wrong_symbolic
):
    leapp.start("broken", save_path=tmp_path)
    x = annotate.input_tensors("policy", {"obs": torch.randn(4)})
    hidden = torch.relu(x) + 1.0
    line = f"test_onnx_breakage.py:{_next_line()}"
    scaled = torch.ops.leapp_breakage.twice(hidden)
    annotate.output_tensors("policy", {"action": torch.tanh(scaled)}, export_with="onnx")
    leapp.stop()
    with pytest.raises(leapp.ExportError) as error:
        leapp.compile_graph()
    message = str(error.value)
    assert "node 'policy'" in message and "reproduces its traced outputs" in message
    assert "first operation that goes wrong is torch.ops.leapp_breakage.twice" in message
    assert line in message and "export_with='jit' or 'pt2'" in message
    assert not (tmp_path / "broken" / "policy.onnx").exists()
    assert not (tmp_path / "broken" / "broken.yaml").exists()


def _next_line() -> int:
    import inspect

    return inspect.currentframe().f_back.f_lineno + 1
