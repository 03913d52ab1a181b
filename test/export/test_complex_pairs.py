"""A complex output of an ONNX node is written as real pairs (ONNX Runtime has no complex
numbers), and the spec says so: the real dtype and the pairs' shape, plus ``as_complex`` (a key
LEAPP readers ignore) naming the complex dtype to rebuild; ``leapp.Pipeline`` still hands back
the complex value. TorchScript and pt2 artifacts return complex values, and their spec says
complex."""

from __future__ import annotations

import onnx
import pytest
import torch
from support.eager import export_function

import leapp
from leapp import annotate

TICKS = 30
ONNX_TYPES = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.DOUBLE: "float64"}


def _spectrum(x):
    return torch.view_as_complex(x * 2.0), x.sum(-1)


def test_the_spec_of_a_complex_onnx_output_matches_the_models_output_types(tmp_path):
    compiled = export_function(tmp_path, _spectrum, {"x": torch.randn(3, 2)}, "onnx")
    ports = compiled.spec.model("node").outputs
    proto = onnx.load(str(compiled.spec.directory / "node.onnx"))
    written = [
        (
            value.name,
            ONNX_TYPES[value.type.tensor_type.elem_type],
            tuple(d.dim_value for d in value.type.tensor_type.shape.dim),
        )
        for value in proto.graph.output
    ]
    assert written == [(p.name, p.dtype, p.shape) for p in ports]
    assert written[0] == ("out0", "float32", (3, 2))
    assert ports[0].extra == {"as_complex": "complex64"} and not ports[1].extra


def test_the_pipeline_hands_back_the_complex_value_of_an_onnx_node(tmp_path):
    compiled = export_function(tmp_path, _spectrum, {"x": torch.randn(3, 2)}, "onnx")
    pipeline = leapp.Pipeline.load(compiled.path)
    for _ in range(TICKS):
        x = torch.randn(3, 2)
        got = pipeline.step({"node/x": x})
        z, total = _spectrum(x)
        assert got["node/out0"].dtype == torch.complex64 and got["node/out0"].shape == (3,)
        torch.testing.assert_close(got["node/out0"], z)
        torch.testing.assert_close(got["node/out1"], total)


@pytest.mark.parametrize("backend", ["jit", "pt2"])
def test_torchscript_and_pt2_specs_keep_a_complex_output_complex(tmp_path, backend):
    compiled = export_function(tmp_path, _spectrum, {"x": torch.randn(3, 2)}, backend)
    port = compiled.spec.model("node").outputs[0]
    assert (port.dtype, port.shape, dict(port.extra)) == ("complex64", (3,), {})


def test_a_complex_onnx_output_feeds_a_torchscript_node_that_takes_it_complex(tmp_path):
    leapp.start("chain", save_path=tmp_path)
    x = annotate.input_tensors("make", {"x": torch.randn(3, 2)})
    z = annotate.output_tensors("make", {"z": torch.view_as_complex(x)}, export_with="onnx")
    z = annotate.input_tensors("use", {"z": z})
    annotate.output_tensors("use", {"power": (z * z.conj()).real}, export_with="jit")
    leapp.stop()
    pipeline = leapp.Pipeline.load(leapp.compile_graph().path)  # the wiring check accepts it
    for _ in range(5):
        x = torch.randn(3, 2)
        got = pipeline.step({"make/x": x})["use/power"]
        torch.testing.assert_close(got, x.pow(2).sum(-1))
