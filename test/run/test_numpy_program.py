"""A TorchScript node whose graph holds only exact arithmetic and moves of values runs as NumPy
(what the ROS nodes call) only where NumPy gives exactly what TorchScript gives; anything else
keeps TorchScript."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support.eager import export_function

from leapp.run import numpy_source
from leapp.run.model import load_model
from leapp_ros.node.model import NumpyModel, TorchModel, load_node_model

MEAN, STD = torch.zeros(6), torch.full((6,), 0.5)


def preprocess(state, velocity):
    return torch.cat([torch.clamp((state - MEAN) / STD, -5.0, 5.0), velocity])


def moves(state, velocity):
    both = torch.stack([state[:3], velocity], 1)  # (3, 2)
    picked = both[:, 0].unsqueeze(0).reshape(3, 1).squeeze(1)
    return picked * 2.0 + velocity[0], torch.maximum(state, -state).reshape(2, 3), velocity


def fresh_inputs(generator, scale=1.0):
    return [torch.randn(6, generator=generator) * scale, torch.randn(3, generator=generator)]


def exported(tmp_path, fn, backend="jit"):
    inputs = {"state": torch.randn(6), "velocity": torch.randn(3)}
    return export_function(tmp_path, fn, inputs, backend)


def same_bits(got: np.ndarray, want: torch.Tensor) -> bool:
    want = want.detach().numpy()
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def same_values(got: np.ndarray, want: torch.Tensor) -> bool:
    """Bits, except the sign of a zero where both are zero (ATen's maximum gives either)."""
    want = want.detach().numpy()
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    both_zero = (got == 0) & (want == 0)
    return got[~both_zero].tobytes() == want[~both_zero].tobytes()


@pytest.mark.parametrize("fn", [preprocess, moves], ids=["preprocess", "shape_moves"])
def test_exact_graph_runs_as_numpy_bit_for_bit_like_torchscript_on_fresh_inputs(tmp_path, fn):
    compiled = exported(tmp_path, fn)
    model = load_model(compiled.spec, "node", as_numpy=True)
    assert model.numpy_call is not None
    executor = torch.jit.load(str(compiled.spec.directory / "node.pt"))
    generator = torch.Generator().manual_seed(7)
    for index in range(200):
        inputs = fresh_inputs(generator, scale=(0.01, 1.0, 30.0)[index % 3])
        got = model.numpy_call([value.numpy() for value in inputs])
        with torch.no_grad():
            want = executor(*inputs)
        want = (want,) if isinstance(want, torch.Tensor) else want
        eager = fn(*inputs)
        eager = (eager,) if isinstance(eager, torch.Tensor) else eager
        assert len(got) == len(want) == len(eager)
        for out, ts, ref in zip(got, want, eager, strict=True):
            assert same_values(out, ts)
            np.testing.assert_allclose(out, ref.numpy(), rtol=0, atol=1e-6)


def test_numpy_program_keeps_nan_and_infinities_where_torchscript_does(tmp_path):
    compiled = exported(tmp_path, preprocess)
    model = load_model(compiled.spec, "node", as_numpy=True)
    state = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-40, 3.0], dtype=np.float32)
    velocity = np.array([np.nan, -0.0, 2.0], dtype=np.float32)
    (got,) = model.numpy_call([state, velocity])
    with torch.no_grad():
        want = torch.jit.load(str(compiled.spec.directory / "node.pt"))(
            torch.from_numpy(state), torch.from_numpy(velocity)
        )
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want.numpy()))
    finite = ~np.isnan(got)
    assert got[finite].tobytes() == want.numpy()[finite].tobytes()  # -0.0 stays -0.0


def test_numpy_program_never_writes_into_its_inputs_and_owns_its_results(tmp_path):
    compiled = exported(tmp_path, moves)  # one result is an input handed on unchanged
    model = load_model(compiled.spec, "node", as_numpy=True)
    payload = bytes(np.arange(9, dtype=np.float32).tobytes())  # as a raw message's bytes
    state = np.frombuffer(payload, dtype=np.float32, count=6)
    velocity = np.frombuffer(payload, dtype=np.float32, offset=24, count=3)
    assert not state.flags.writeable
    results = model.numpy_call([state, velocity])
    for result in results:
        assert isinstance(result, np.ndarray) and result.flags.owndata and result.flags.writeable
        assert not np.shares_memory(result, state) and not np.shares_memory(result, velocity)
    np.testing.assert_array_equal(results[2], velocity)
    results[2][:] = 99.0  # a caller may keep and change its results
    assert model.numpy_call([state, velocity])[2].tolist() == velocity.tolist()


def inexact(state, velocity):
    return torch.tanh(state), velocity


def with_alpha(state, velocity):
    return torch.sub(state[:3], velocity, alpha=2)


def floored(state, velocity):
    return torch.div(state[:3], velocity, rounding_mode="floor")


def reduced(state, velocity):
    return state.sum() + velocity


@pytest.mark.parametrize("fn", [inexact, with_alpha, floored, reduced])
def test_graph_with_anything_but_exact_arithmetic_and_moves_keeps_torchscript(tmp_path, fn):
    compiled = exported(tmp_path, fn)
    model = load_model(compiled.spec, "node", as_numpy=True)
    assert model.numpy_call is None
    assert isinstance(load_node_model(compiled.spec, "node"), TorchModel)


def promoted(count):
    return count + 0.5  # torch: float32 (the default dtype); NumPy: float64


def test_a_numpy_result_of_another_dtype_keeps_torchscript(tmp_path):
    inputs = {"count": torch.arange(4, dtype=torch.int32)}
    compiled = export_function(tmp_path, promoted, inputs, "jit")
    model = load_model(compiled.spec, "node", as_numpy=True)
    assert model.numpy_call is None
    (got,) = model.run([torch.arange(4, dtype=torch.int32)])
    assert got.dtype == torch.float32


def int_steps(count):
    return count * 3 - 1, torch.cat([count, count])[1:5]


def test_integer_arithmetic_runs_as_numpy_with_torchs_dtypes(tmp_path):
    inputs = {"count": torch.arange(4, dtype=torch.int32)}
    compiled = export_function(tmp_path, int_steps, inputs, "jit")
    model = load_model(compiled.spec, "node", as_numpy=True)
    assert model.numpy_call is not None
    rng = np.random.default_rng(5)
    for _ in range(20):
        count = rng.integers(-(2**31), 2**31 - 1, size=4, dtype=np.int32)  # overflow wraps
        got = model.numpy_call([count])
        want = model.run([torch.from_numpy(count)])
        for a, b in zip(got, want, strict=True):
            assert a.dtype == np.int32 and a.tobytes() == b.numpy().tobytes()


def test_a_numpy_result_that_differs_in_one_bit_keeps_torchscript(tmp_path, monkeypatch):
    def one_ulp_off(a, b):
        result = np.subtract(a, b)
        return np.nextafter(result, np.float32(np.inf), dtype=result.dtype)

    monkeypatch.setitem(numpy_source.NAMESPACE, "subtract", one_ulp_off)
    compiled = exported(tmp_path, preprocess)
    assert load_model(compiled.spec, "node", as_numpy=True).numpy_call is None


def test_ros_node_of_an_exact_torchscript_graph_reads_payload_views_as_numpy(tmp_path):
    compiled = exported(tmp_path, preprocess)
    model = load_node_model(compiled.spec, "node")
    assert isinstance(model, NumpyModel) and model.reads_only and model.backend == "jit"
    reference = TorchModel(load_model(compiled.spec, "node"))
    assert reference.model.numpy_call is None  # only asked for: validation does not build it
    assert not reference.reads_only  # a TorchScript module may write into its inputs
    rng = np.random.default_rng(3)
    for _ in range(50):
        inputs = [rng.standard_normal(6, dtype=np.float32), rng.standard_normal(3, np.float32)]
        (got,), (want,) = model.call(inputs), reference.call(inputs)
        assert got.tobytes() == want.tobytes()
