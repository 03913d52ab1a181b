"""Every family of torch operation is recorded, exported with each backend, and matches eager
PyTorch on fresh random inputs (not only the traced ones)."""

from __future__ import annotations

import pytest
import torch
from support.eager import assert_matches_eager, export_function

torch.manual_seed(0)
SEQUENTIAL = torch.nn.Sequential(
    torch.nn.Linear(5, 8),
    torch.nn.LayerNorm(8),
    torch.nn.ELU(),
    torch.nn.Linear(8, 4),
    torch.nn.BatchNorm1d(4),
    torch.nn.Sigmoid(),
).eval()
with torch.no_grad():
    SEQUENTIAL[4].running_mean.uniform_(-0.5, 0.5)
    SEQUENTIAL[4].running_var.uniform_(0.5, 2.0)
OFFSET = torch.linspace(-1.0, 1.0, 5)


def arithmetic_operators(x, y):
    z = (x - y) * 2.0 + 1 / (x.abs() + 1) - 3 ** x.clamp(-1, 1) + x / (y.abs() + 0.5)
    return z + (x @ y.T).sum() + (-x) ** 2 - OFFSET


def rounding_operators(x, y):
    # Floor and remainder jump at integers: inputs are kept off those points (see below).
    return (2 - x) // 1.5 + x % 0.75 + torch.floor_divide(y, 0.5) + torch.remainder(-y, 2.0)


def comparisons_and_masks(x, y):
    mask = ((x > y) & (x < 1)) | ~(y > 0)
    return torch.where(mask, x, y) + (x == y).float() + torch.maximum(x, y) * (x != 0)


def indexing_and_views(x, y):
    picked = x[:, 1:3].sum(-1, keepdim=True) * y[..., -1:]
    return picked + x[0] + x.T[0] + x.mT.sum() + x.reshape(25).view(5, 5)[::2].sum(0)


def modules_and_functional(x, y):
    head = torch.nn.functional.gelu(y[:, :4]) + torch.relu(y[:, :4])
    return SEQUENTIAL(x) + head + torch.nn.functional.softmax(x[:, :4], dim=-1)


def reductions_and_tuples(x, y):
    best = torch.max(x, dim=1).values + x.max(1)[1].float()
    return best + torch.split(y, 2, dim=1)[0].sum(1) + x.mean(0) * y.std(1) + x.norm(dim=1)


def in_place_on_inputs_and_views(x, y):
    x.sub_(0.5)
    x[:3].mul_(0.5)
    y[:, 0] = 0.0
    return x + y


def writes_into_a_fresh_buffer(x, y):
    buffer = torch.zeros(10)
    buffer[:5] = x[0]
    buffer[5:] = y[1, :5] * 2
    buffer += 1.0
    return buffer * 3


def shapes_and_creation(x, y):
    flat = x.reshape(-1).view(5, 5).permute(1, 0).flatten()
    return flat + x.new_ones(25) + torch.zeros_like(x).reshape(25) + y.unsqueeze(0).flatten()


def several_outputs(x, y):
    return torch.tanh(x), (x * y).sum(-1), torch.argmax(y, dim=1)


FAMILIES = [
    arithmetic_operators,
    rounding_operators,
    comparisons_and_masks,
    indexing_and_views,
    modules_and_functional,
    reductions_and_tuples,
    in_place_on_inputs_and_views,
    writes_into_a_fresh_buffer,
    shapes_and_creation,
    several_outputs,
]


def make_inputs():
    return {"x": torch.randn(5, 5), "y": torch.randn(5, 5)}


def off_integer_inputs():
    """Quarter steps plus 0.1: no quotient of the rounding family lands on an integer."""
    return {k: torch.randint(-12, 12, (5, 5)) / 4 + 0.1 for k in ("x", "y")}


INPUTS = {rounding_operators: off_integer_inputs}


@pytest.mark.parametrize("backend", ["jit", "onnx", "pt2"])
@pytest.mark.parametrize("fn", FAMILIES, ids=lambda f: f.__name__)
def test_exported_artifact_matches_eager_on_fresh_inputs(tmp_path, fn, backend):
    inputs = INPUTS.get(fn, make_inputs)
    compiled = export_function(tmp_path, fn, inputs(), backend)
    assert compiled.report.ok
    assert_matches_eager(compiled, fn, inputs)


def test_in_place_operations_keep_eager_semantics_for_the_caller(tmp_path):
    x, y = torch.randn(5, 5), torch.randn(5, 5)
    expected_x, expected_y = x.clone(), y.clone()
    in_place_on_inputs_and_views(expected_x, expected_y)
    import leapp
    from leapp import annotate

    leapp.start("pipe", save_path=tmp_path)
    tx, ty = annotate.input_tensors("node", {"x": x, "y": y})
    out = in_place_on_inputs_and_views(tx, ty)
    annotate.output_tensors("node", {"out": out})
    leapp.stop()
    # The traced values share storage with the caller's tensors, so the caller sees the writes.
    torch.testing.assert_close(x, expected_x)
    torch.testing.assert_close(y, expected_y)
