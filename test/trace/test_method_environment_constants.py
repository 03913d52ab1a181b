"""``annotate.method(environment_constants=[...])``, LEAPP's keyword: the module-level objects a
decorated function uses (a ``torch.jit.trace``-d model, a gain tensor) are frozen into the node
as constants, and each name must be one the function can see. ``annotate._method`` is LEAPP's
legacy spelling of the same decorator."""

from __future__ import annotations

import pytest
import torch

import leapp
from leapp import annotate

GAIN = torch.tensor([2.0, 3.0, 4.0])
TICKS = 30


def _export(tmp_path, decorated, make_inputs, backend_ticks=2):
    leapp.start("constants", save_path=tmp_path)
    with torch.no_grad():
        for _ in range(backend_ticks):
            decorated(*make_inputs())
    leapp.stop()
    return leapp.compile_graph()


@pytest.mark.parametrize("backend", ["jit", "onnx", "pt2"])
def test_a_traced_model_named_in_environment_constants_is_frozen_into_the_node(tmp_path, backend):
    torch.manual_seed(0)
    encoder = torch.jit.trace(
        torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ELU()).eval(), torch.randn(4)
    )

    @annotate.method(export_with=backend, environment_constants=["encoder", "GAIN"])
    def encode(obs, threshold):
        features = encoder(obs)[:3] * GAIN
        return torch.where(features > threshold, features, torch.zeros_like(features))

    def inputs():
        return torch.randn(4), torch.tensor(0.1)

    compiled = _export(tmp_path, encode, inputs)
    assert [p.name for p in compiled.spec.model("encode").inputs] == ["obs", "threshold"]
    pipeline = leapp.Pipeline.load(compiled.path)
    with torch.no_grad():
        for _ in range(TICKS):
            obs, threshold = inputs()
            got = pipeline.step({"encode/obs": obs, "encode/threshold": threshold})
            expected = encode(obs, threshold)  # outside a session: the plain function
            torch.testing.assert_close(got["encode/output1"], expected, rtol=1e-5, atol=1e-5)


def test_an_environment_constant_the_function_cannot_see_is_refused_by_name(tmp_path):
    @annotate.method(environment_constants=["GAIN", "missing_model"])
    def scale(x):
        return x * GAIN

    leapp.start("constants", save_path=tmp_path)
    with pytest.raises(leapp.TraceError, match=r"\['missing_model'\] are not names scale"):
        scale(torch.ones(3))


def test_environment_constants_must_be_names():
    with pytest.raises(leapp.TraceError, match="environment_constants"):
        annotate.method(environment_constants=[GAIN])


def test_the_legacy_method_spelling_is_the_decorator(tmp_path):
    assert annotate._method is annotate.method

    @annotate._method(export_with="jit", environment_constants=["GAIN"])
    def scale(x):
        return x * GAIN

    compiled = _export(tmp_path, scale, lambda: (torch.ones(3),))
    assert dict(compiled) == {"scale": True}
    fresh = torch.randn(3)
    out = leapp.Pipeline.load(compiled.path).step({"scale/x": fresh})
    torch.testing.assert_close(out["scale/output1"], fresh * GAIN)
