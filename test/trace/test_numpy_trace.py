"""NumPy nodes are recorded as torch graphs: every family of NumPy operation exports with each
backend and matches eager NumPy on fresh random inputs; crossings between NumPy and torch keep
the trace and the edges between nodes; what cannot be recorded says so."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from support.eager import FRESH_SAMPLES, export_function

import leapp
from leapp import annotate
from leapp.errors import TraceError
from leapp.trace.arrays.array import TracedArray
from leapp.trace.tensors.tensor import TracedTensor

HERE = re.escape(Path(__file__).name)
RNG = np.random.default_rng(0)
W = RNG.standard_normal((5, 3)).astype(np.float32)
LOW = np.linspace(-1.0, -0.1, 5).astype(np.float32)
HIGH = np.linspace(0.1, 1.0, 5).astype(np.float32)


def export_numpy(tmp_path, fn, inputs, backend, node="node"):
    """Trace ``fn(**traced arrays)`` as ``node`` and export it with ``backend``; the traced
    inputs must be TracedArrays (NumPy in, NumPy traced)."""

    def traced_as_arrays(**traced):
        assert all(isinstance(t, TracedArray) for t in traced.values())
        return fn(**traced)

    return export_function(tmp_path, traced_as_arrays, inputs, backend, node)


def assert_matches_numpy(compiled, fn, make_inputs, node="node", atol=1e-5):
    """The artifact and eager NumPy agree (values and dtypes) on fresh inputs."""
    from leapp.run.model import load_model

    model = load_model(compiled.spec, node)
    ports = [p.name for p in compiled.spec.model(node).inputs]
    for _ in range(FRESH_SAMPLES):
        fresh = make_inputs()
        expected = fn(**{k: v.copy() for k, v in fresh.items()})
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = model.run([torch.from_numpy(fresh[p].copy()) for p in ports])
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            e = np.asarray(e)
            assert g.numpy().dtype == e.dtype
            np.testing.assert_allclose(g.numpy(), e, rtol=1e-5, atol=atol)


# ----------------------------------------------------------------- operation families
def arithmetic_and_comparisons(x, y):
    z = (x - y) * 2.0 + 1 / (np.abs(x) + 1) - 3 ** np.clip(x, -1, 1) + x / (np.abs(y) + 0.5)
    mask = ((x > y) & (x < 1)) | ~(y > 0)
    return z + (x == y) + mask * 1.5 - (-x) ** 2 + np.square(y) + np.negative(x) * (x != 0)


def rounding(x, y):
    return (2 - x) // 1.5 + x % 0.75 + np.floor_divide(y, 0.5) + np.fmod(-y, 2.0) + np.rint(x)


def trigonometry_and_exponentials(x, y):
    angles = np.sin(x) * np.cos(y) + np.tan(np.clip(x, -1, 1)) + np.arctan2(y, x + 3)
    smooth = np.tanh(x) + np.exp(np.clip(y, -3, 3)) + np.log(np.abs(x) + 1) + np.sqrt(np.abs(y))
    return angles + smooth + np.sign(x) + np.log1p(np.abs(y)) + np.hypot(x, y) + np.deg2rad(y)


def clip_where_and_extrema(x, y):
    bounded = np.clip(x, -0.5, 0.5) + np.clip(y, LOW, HIGH) + x.clip(max=0.3)
    chosen = np.where(x > y, x, y * 2) + np.where(x > 0, 1.0, -1.0)
    return bounded + chosen + np.minimum(x, 0.2) + np.maximum(x, y) + np.fmax(y, -0.1)


def reductions(x, y):
    return (
        np.sum(x, axis=0) + y.sum(axis=0) * np.mean(x, axis=1, keepdims=True)[:, 0][0],
        x.max(axis=1) - np.min(y, axis=1) + np.std(x, axis=1, ddof=1) + np.var(y, axis=1),
        np.mean(x) + np.max(y) + np.prod(y[:2], axis=0).sum() + np.linalg.norm(x, axis=1),
        np.argmax(x, axis=1),
        y.argmin(),
        np.cumsum(x, axis=1)[:, -1] + np.all(x > -10, axis=1) + np.any(y > 2, axis=1),
        np.sum(x, axis=(0, 1), keepdims=True),
    )


def joining_and_splitting(x, y):
    joined = np.concatenate([x, y, LOW[:4, None]], axis=1)
    stacked = np.stack([x[0], y[0]]) + np.vstack([x[1], y[1]]) + np.hstack([x[:2], y[:2]])[:, :5]
    first, second = np.split(y, [2], axis=0)
    return joined, stacked + first, second * 2, np.concatenate((x, y), axis=None)


def shapes(x, y):
    flat = x.reshape(20).reshape(2, 10).T.ravel() + y.flatten()
    moved = np.transpose(np.expand_dims(x, 0), (2, 1, 0)).squeeze(-1) + y.T
    return (
        flat,
        moved + np.swapaxes(y, 0, 1) + np.moveaxis(x[None], 0, -1)[..., 0].T,
        np.broadcast_to(x[0], (3, 5)) + np.tile(y[0], (3, 1)) + np.repeat(x[1:2], 3, axis=0),
        np.flip(x, axis=1) + np.roll(y, 2, axis=1) + np.flipud(x),
    )


def indexing(x, y):
    return (
        x[1:3, ::-1] + y[::-2, :],
        x[-1, :4] + y[..., 1][None, :, None][0, :, 0] + x[3:0:-1, 4][0],
        x[[0, 2]] + y[:, np.array([4, 0, 1, 2, 3])][1:3],
        x[np.array([True, False, True, True])] * 2,
        x[np.arange(4), np.argmax(y, axis=1)],
        np.asarray([row.sum() for row in y]) + x[::-1, ::-1][1:, :2].sum(axis=1).sum(),
    )


def linear_algebra(x, y):
    return (
        x @ y.T + np.dot(x[0], y[0]),
        np.dot(x, W) + np.matmul(y, W) + np.einsum("ij,jk->ik", x, W),
        np.einsum("ij,ij->i", x, y) + np.outer(x[0], y[0])[:4, 0],
    )


def dtypes_and_promotion(x, y):
    i = (x * 10).astype(np.int64)
    j = (y * 10).astype(np.int32)
    return (
        i / (np.abs(j) + 1),
        i // 3 + j,
        x.astype(np.float64) * 2 + np.float64(1.5),
        (i > 0).astype(np.float32) + (x > 0),
        np.sqrt(np.abs(j)),
    )


def creation_like(x, y):
    return (
        np.zeros_like(x) + np.ones_like(y) * x + np.full_like(x, 0.5),
        np.full_like(x, 3, dtype=np.int32) + np.zeros_like(y, dtype=np.int32),
        np.full_like(y, x[0, 0]),
    )


def writes(x, y):
    buffer = np.zeros_like(x)
    buffer[:2] = x[:2]
    buffer[2:, ::-1] = y[2:]
    buffer += 1
    buffer[buffer > 1.5] = 0.0
    copy = x.copy()
    copy[0, 0] = 5
    copy *= 2
    copy[:, np.array([1, 3])] = y[:, :2]
    y[1] = -1.0
    return buffer, copy, y


def more_functions(x, y):
    return (
        np.sort(x, axis=1) + np.roll(y, 3) + np.triu(x, 1) + np.round(y, 2),
        np.linalg.norm(x, ord=1, axis=0) + np.std(y) + np.add.reduce(x, axis=0),
        np.einsum("...j,...j->...", x, y) + np.cumsum(y, axis=None)[::5],
        np.argmax(x, keepdims=True),
        np.isclose(x, y, atol=0.5) | np.any(x > 0, axis=0, keepdims=True),
        np.hstack(np.array_split(y, 3, axis=1)) + np.atleast_2d(x[0]),
        np.stack([row * i for i, row in enumerate(x)]),
        np.asarray([row.max() for row in y]),
    )


FAMILIES = [
    arithmetic_and_comparisons,
    rounding,
    trigonometry_and_exponentials,
    clip_where_and_extrema,
    reductions,
    joining_and_splitting,
    shapes,
    indexing,
    linear_algebra,
    dtypes_and_promotion,
    creation_like,
    writes,
    more_functions,
]


def make_inputs():
    return {
        "x": RNG.standard_normal((4, 5)).astype(np.float32),
        "y": RNG.standard_normal((4, 5)).astype(np.float32),
    }


def off_integer_inputs():
    """Quarter steps plus 0.1: no quotient or product of the families lands on an integer."""
    return {k: (RNG.integers(-12, 12, (4, 5)) / 4 + 0.1).astype(np.float32) for k in "xy"}


INPUTS = {rounding: off_integer_inputs, dtypes_and_promotion: off_integer_inputs}


@pytest.mark.parametrize("backend", ["jit", "onnx", "pt2"])
@pytest.mark.parametrize("fn", FAMILIES, ids=lambda f: f.__name__)
def test_numpy_node_artifact_matches_eager_numpy_on_fresh_inputs(tmp_path, fn, backend):
    inputs = INPUTS.get(fn, make_inputs)
    compiled = export_numpy(tmp_path, fn, inputs(), backend)
    assert compiled.report.ok
    assert_matches_numpy(compiled, fn, inputs)


# ----------------------------------------------------------------- traced arrays
def test_input_array_comes_back_traced_and_sharing_memory(tmp_path):
    state = np.arange(6, dtype=np.float32)
    leapp.start("p", save_path=tmp_path)
    traced = annotate.input_tensors("a", {"state": state})
    assert isinstance(traced, TracedArray) and isinstance(traced, np.ndarray)
    assert np.shares_memory(traced, state)
    traced[0] = 7.0
    assert state[0] == 7.0
    annotate.output_tensors("a", {"y": traced * 2})
    leapp.stop()


def test_numpy_operations_are_recorded_under_torch_names(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": np.ones(3, np.float32)})
    annotate.output_tensors("a", {"y": np.clip(np.sin(x) * 2, -1, 1)[::-1]})
    leapp.stop()
    listing = leapp.format_graph(leapp.compile_graph().graphs["a"])
    for name in ("torch.sin", "torch.mul", "torch.clamp", "torch.flip"):
        assert name in listing
    assert "numpy" not in listing


def test_numpy_promotion_that_torch_lacks_is_recorded_as_a_cast(tmp_path):
    leapp.start("p", save_path=tmp_path)
    i = annotate.input_tensors("a", {"i": np.arange(1, 4)})
    annotate.output_tensors("a", {"y": i / i[::-1]})
    leapp.stop()
    compiled = leapp.compile_graph()
    assert compiled.spec.model("a").outputs[0].dtype == "float64"
    assert "float64" in leapp.format_graph(compiled.graphs["a"])


def test_array_ports_are_described_with_torch_dtype_names(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x, n = annotate.input_tensors("a", {"x": np.zeros(2), "n": np.zeros((2, 3), np.int32)})
    annotate.output_tensors("a", {"y": x + n.sum(axis=1), "m": n > 0})
    leapp.stop()
    model = leapp.compile_graph().spec.model("a")
    assert [(p.name, p.dtype, tuple(p.shape)) for p in (*model.inputs, *model.outputs)] == [
        ("x", "float64", (2,)),
        ("n", "int32", (2, 3)),
        ("y", "float64", (2,)),
        ("m", "bool", (2, 3)),
    ]


# ----------------------------------------------------------------------- crossings
def test_torch_from_numpy_and_as_tensor_keep_the_trace(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": np.ones(3, np.float32)})
    t = torch.from_numpy(x)
    u = torch.as_tensor(x * 2, dtype=torch.float64)
    assert isinstance(t, TracedTensor) and isinstance(u, TracedTensor)
    assert np.shares_memory(t.numpy(), x)
    annotate.output_tensors("a", {"y": torch.relu(t) + u})
    leapp.stop()
    listing = leapp.format_graph(leapp.compile_graph().graphs["a"])
    assert "torch.relu](args = (%x,)" in listing


def test_tensor_numpy_and_np_asarray_keep_the_trace(tmp_path):
    leapp.start("p", save_path=tmp_path)
    t = annotate.input_tensors("a", {"t": torch.ones(3)})
    a, b = t.numpy(), np.asarray(t * 2)
    assert isinstance(a, TracedArray) and isinstance(b, TracedArray)
    annotate.output_tensors("a", {"y": np.exp(a) + b, "z": np.array(a)})
    leapp.stop()
    listing = leapp.format_graph(leapp.compile_graph().graphs["a"])
    assert "torch.exp](args = (%t,)" in listing


def test_torch_operator_with_a_traced_array_gives_a_traced_tensor_as_in_eager(tmp_path):
    leapp.start("p", save_path=tmp_path)
    t, a = annotate.input_tensors("a", {"t": torch.ones(3), "a": np.full(3, 2.0, np.float32)})
    product = t * a  # eager torch returns a tensor here (through Tensor.__array_wrap__)
    assert isinstance(product, TracedTensor)
    annotate.output_tensors("a", {"y": torch.tanh(product)})
    leapp.stop()
    listing = leapp.format_graph(leapp.compile_graph().graphs["a"])
    assert "torch.mul](args = (%t, %a)" in listing


def test_crossing_wrappers_are_installed_only_while_recording(tmp_path):
    originals = (torch.from_numpy, torch.as_tensor, np.asarray, np.array)
    leapp.start("p", save_path=tmp_path)
    assert torch.from_numpy is not originals[0]
    assert torch.as_tensor(np.ones(2)).dtype == torch.float64  # untraced values pass through
    x = annotate.input_tensors("a", {"x": np.ones(2)})
    annotate.output_tensors("a", {"y": x + 1})
    leapp.stop()
    assert (torch.from_numpy, torch.as_tensor, np.asarray, np.array) == originals
    assert type(torch.from_numpy(x)) is torch.Tensor  # after stop: plain behaviour


@pytest.mark.parametrize(
    "cross",
    [lambda a: a, lambda a: torch.from_numpy(a), lambda a: torch.as_tensor(a)],
    ids=["array", "from_numpy", "as_tensor"],
)
def test_array_output_feeding_another_node_is_an_edge(tmp_path, cross):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("prep", {"x": np.ones(3, np.float32)})
    obs = annotate.output_tensors("prep", {"obs": np.tanh(x)})
    o = annotate.input_tensors("policy", {"obs": cross(obs)})
    annotate.output_tensors("policy", {"action": o * 2})
    leapp.stop()
    pipeline = leapp.compile_graph().spec.pipeline
    assert dict(pipeline.data_flow) == {"prep/obs": ("policy/obs",)}
    assert dict(pipeline.inputs) == {"prep": ("x",)}


def test_tensor_output_crossing_to_numpy_keeps_the_edge(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("policy", {"x": torch.ones(3)})
    action = annotate.output_tensors("policy", {"action": torch.tanh(x)})
    a = annotate.input_tensors("post", {"action": action.numpy()})
    annotate.output_tensors("post", {"scaled": np.clip(a * 3, -2, 2)})
    leapp.stop()
    assert dict(leapp.compile_graph().spec.pipeline.data_flow) == {
        "policy/action": ("post/action",)
    }


# ------------------------------------------------------ the NumPy preprocessing pipeline
STATE_MEAN = np.linspace(-0.5, 0.5, 6)
STATE_STD = np.full(6, 0.5)


def numpy_preprocess(state, velocity):
    state, velocity = annotate.input_tensors("prep", {"state": state, "velocity": velocity})
    normalized = np.clip((state - STATE_MEAN) / STATE_STD, -5.0, 5.0).astype(np.float32)
    features = np.concatenate([normalized[::-1], np.tanh(velocity), np.abs(velocity[::-2])])
    obs = features * np.float32(0.5) + np.sqrt(np.square(velocity).sum(keepdims=True))[0]
    annotate.output_tensors("prep", {"obs": obs}, export_with="onnx")
    return obs


def torch_policy(policy, obs):
    obs = annotate.input_tensors("policy", {"obs": torch.from_numpy(obs)})
    action = policy(obs.unsqueeze(0)).squeeze(0)
    annotate.output_tensors("policy", {"action": action}, export_with="jit")
    return action


def test_numpy_preprocessing_feeding_a_torch_policy_matches_eager(tmp_path):
    torch.manual_seed(0)
    policy = torch.nn.Sequential(torch.nn.Linear(11, 6), torch.nn.Tanh()).eval()
    fresh = [
        (RNG.standard_normal(6).astype(np.float32), RNG.standard_normal(3).astype(np.float32))
        for _ in range(FRESH_SAMPLES + 1)
    ]
    leapp.start("numpy_pipeline", save_path=tmp_path)
    torch_policy(policy, numpy_preprocess(*fresh[0]))
    leapp.stop()
    compiled = leapp.compile_graph()
    assert dict(compiled.spec.pipeline.data_flow) == {"prep/obs": ("policy/obs",)}
    pipeline = leapp.Pipeline.load(compiled.path)
    for state, velocity in fresh[1:]:
        with torch.no_grad():
            expected = torch_policy(policy, numpy_preprocess(state.copy(), velocity.copy()))
        got = pipeline.step(
            {"prep/state": torch.from_numpy(state), "prep/velocity": torch.from_numpy(velocity)}
        )
        torch.testing.assert_close(got["policy/action"], expected, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------- what cannot be traced
def test_numpy_function_without_torch_equivalent_raises_with_its_name_and_line(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("prep", {"x": np.ones(4)})
    line = sys._getframe().f_lineno + 3
    pattern = rf"node 'prep': numpy\.fft\.fft at .*{HERE}:{line} has no torch equivalent.*fft"
    with pytest.raises(TraceError, match=pattern):
        np.fft.fft(x)


def test_freezing_an_unsupported_numpy_result_needs_the_opt_in_and_warns(tmp_path):
    leapp.start("p", save_path=tmp_path, freeze_python_values=True)
    x = annotate.input_tensors("prep", {"x": np.array([1.0, 2.0, 6.0])})
    with pytest.warns(leapp.FrozenValueWarning, match=rf"numpy\.median at .*{HERE}:\d+ has no"):
        middle = np.median(x)
    annotate.output_tensors("prep", {"y": x - middle})
    leapp.stop()
    compiled = leapp.compile_graph()
    assert "_tensor_constant" in leapp.format_graph(compiled.graphs["prep"])


def test_torch_equivalent_that_disagrees_with_numpy_raises(tmp_path, monkeypatch):
    from leapp.numpy import ufuncs

    monkeypatch.setitem(ufuncs.UFUNCS, np.sin, torch.cos)
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": np.linspace(0.1, 1, 4)})
    with pytest.raises(TraceError, match=r"numpy\.sin at .* computed values that differ"):
        np.sin(x)


def test_arrays_of_two_open_nodes_cannot_be_mixed(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": np.ones(3)})
    z = annotate.input_tensors("b", {"z": np.ones(3)})
    with pytest.raises(TraceError, match=r"mixes values of the open nodes 'a' and 'b'"):
        np.add(x, z)


def test_branching_on_a_traced_array_raises(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": np.ones(3)})
    with pytest.raises(TraceError, match=rf"bool\(\)/if/while .* at .*{HERE}:\d+.*np\.where"):
        if x.sum() > 0:
            pass
    with pytest.raises(TraceError, match=r"float\(\) at"):
        float(x[0])


def test_boolean_mask_from_traced_values_raises_with_the_workaround(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": np.ones(3)})
    with pytest.raises(
        TraceError, match=rf"indexing at .*{HERE}:\d+: .*data-dependent.*np\.where"
    ):
        x[x > 0]


def writes_through_views(x, y):
    head = x[:2]  # a view: NumPy's writes into x show in head, and the other way round
    flipped = y[::-1]
    x[0] = 5.0
    tail = x[2:]
    tail *= 2
    y[1, :] += 1  # the view's += writes back into y
    flipped[0] = 0.0
    return head + 1, x, y, flipped


@pytest.mark.parametrize("backend", ["jit", "onnx"])
def test_writes_reach_every_array_sharing_the_memory_as_in_numpy(tmp_path, backend):
    compiled = export_numpy(tmp_path, writes_through_views, make_inputs(), backend)
    assert_matches_numpy(compiled, writes_through_views, make_inputs)


def test_array_derived_by_an_untraced_ndarray_method_cannot_be_used(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": np.ones(4)})
    with pytest.raises(TraceError, match=r"derived from a traced array by an ndarray method"):
        x.view() + 1


def test_writing_traced_values_into_an_untraced_array_raises(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": np.ones(4)})
    buffer = np.zeros(4)
    with pytest.raises(TraceError, match=r"writes traced values into an array that is not"):
        np.add(x, 1, out=buffer)


def test_input_array_of_a_dtype_torch_lacks_is_rejected(tmp_path):
    leapp.start("p", save_path=tmp_path)
    with pytest.raises(TraceError, match=r"dtype <U1 has no torch equivalent"):
        annotate.input_tensors("a", {"x": np.array(["a", "b"])})
