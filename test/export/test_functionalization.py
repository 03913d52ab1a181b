"""Nodes with in-place operations are functionalized before export; kernels that read their
inputs' values are traced through data-free equivalents, or refused naming node, op and line."""

from __future__ import annotations

import pytest
import torch
from support.eager import assert_matches_eager, export_function

from leapp.errors import ExportError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


def command_policy(x, mode):
    """A locomotion-style node: one-hot of a mode index, a state updated in place."""
    command = torch.nn.functional.one_hot(mode.long(), num_classes=3).float().flatten()
    state = x.clone()
    state.mul_(0.5).add_(1.0)
    return torch.cat([state, command])


def _inputs():
    return {"x": torch.randn(4), "mode": torch.randint(0, 3, (1,)).float()}


@pytest.mark.parametrize("backend", ["jit", "onnx", "pt2"])
def test_one_hot_in_a_mutating_node_exports_and_matches_eager(tmp_path, backend):
    compiled = export_function(tmp_path, command_policy, _inputs(), backend)
    assert compiled.report.ok
    assert_matches_eager(compiled, command_policy, _inputs, samples=30)


def test_kernel_reading_values_is_refused_naming_node_op_and_line(tmp_path):
    def classes(x, mode):
        state = x.clone()
        state.add_(1.0)  # an in-place update: the node is functionalized
        return state, torch.nn.functional.one_hot(mode.long())  # class count read from values

    inputs = {"x": torch.randn(3), "mode": torch.tensor([0.0, 2.0])}
    with pytest.raises(ExportError) as refused:
        export_function(tmp_path, classes, inputs, "jit")
    message = str(refused.value)
    assert "node 'node'" in message and "one_hot" in message
    assert "test_functionalization.py:" in message and "Python numbers" in message
