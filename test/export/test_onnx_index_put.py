"""ONNX export of ``index_put`` whose index list takes dimensions whole (``x[:, joints] = v``,
a script's ``index_put_(x, [None, joints], v)``): torch's exporter wrote such a call as an
invalid model ("Node (/Add)'s input 0 is marked single but has an empty string"); each whole
dimension is now spelled out as an index (:mod:`leapp.export.index_lists`) and the model
matches eager PyTorch on fresh inputs."""

from __future__ import annotations

import onnx
import pytest
import torch
from support.eager import assert_matches_eager, export_function

from leapp.errors import ExportError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")

aten = torch.ops.aten
JOINTS = torch.tensor([0, 2, 5])


class ScatterIntoZeros(torch.nn.Module):
    """The last step of rl_sar's TorchScript policies: outputs scattered into zeros of the
    batch size read from the input, at constant joint indices, with ``index_put_``."""

    def __init__(self):
        super().__init__()
        self.register_buffer("joints", JOINTS.clone())

    def forward(self, actions: torch.Tensor) -> torch.Tensor:
        out = torch.zeros([actions.size(0), 8])
        indices: list[torch.Tensor | None] = [None, self.joints]
        out.index_put_(indices, actions.view([3]))
        return out


def test_a_scripted_scatter_into_zeros_with_a_whole_dimension_exports_to_onnx(tmp_path):
    script = torch.jit.script(ScatterIntoZeros())
    compiled = export_function(tmp_path, lambda actions: script(actions), _actions(), "onnx")
    assert dict(compiled) == {"node": True}
    assert_matches_eager(compiled, lambda actions: script(actions), _actions, samples=20)
    model = onnx.load(str(compiled.spec.directory / "node.onnx"))
    assert all(name for node in model.graph.node for name in node.input)  # no empty input
    assert "ScatterND" in {node.op_type for node in model.graph.node}


def _actions():
    return {"actions": torch.randn(1, 3)}


def _setitem(key):
    def assign(x, v):
        y = x.clone()
        y[key] = v
        return y

    return assign


# name: (function of x and v, shape of x, shape of v)
INDEX_LISTS = {
    "leading": (_setitem((slice(None), JOINTS)), (4, 8), (4, 3)),
    "leading, values broadcast": (_setitem((slice(None), JOINTS)), (4, 8), (3,)),
    "leading, a scalar value": (_setitem((slice(None), JOINTS)), (4, 8), ()),
    "two leading": (_setitem((slice(None), slice(None), JOINTS)), (2, 3, 8), (3,)),
    "trailing": (lambda x, v: aten.index_put(x, [JOINTS, None], v), (8, 4), (3, 4)),
    "between adjacent indices": (
        lambda x, v: aten.index_put(x, [None, JOINTS, JOINTS.flip(0), None], v),
        (2, 8, 6, 3),
        (2, 3, 3),
    ),
    "between separated indices": (
        lambda x, v: aten.index_put(x, [JOINTS, None, JOINTS.reshape(3, 1)], v),
        (8, 5, 6),
        (3, 3, 5),
    ),
    "ellipsis": (_setitem((Ellipsis, JOINTS, slice(None))), (2, 3, 8, 2), (3, 2)),
    "negative indices": (_setitem((slice(None), torch.tensor([-1, 0]))), (3, 6), (2,)),
    "int32 indices": (_setitem((slice(None), JOINTS.to(torch.int32))), (4, 8), (3,)),
    "accumulated": (
        lambda x, v: aten.index_put(x, [None, JOINTS], v, accumulate=True),
        (4, 8),
        (4, 3),
    ),
    # no whole dimension, but written wrongly too: ScatterND takes int64 indices only, and the
    # values were reshaped, not broadcast, to the indexed shape
    "int32 indices, no whole dimension": (_setitem(JOINTS.to(torch.int32)), (8, 4), (3, 4)),
    "values broadcast, no whole dimension": (_setitem(JOINTS), (8, 4), (4,)),
}


@pytest.mark.parametrize("name", sorted(INDEX_LISTS))
def test_index_put_index_lists_are_spelled_out_and_match_eager_in_onnx(tmp_path, name):
    fn, x_shape, v_shape = INDEX_LISTS[name]

    def fresh():
        return {"x": torch.randn(x_shape), "v": torch.randn(v_shape)}

    compiled = export_function(tmp_path, fn, fresh(), "onnx")
    assert dict(compiled) == {"node": True}
    assert_matches_eager(compiled, fn, fresh, samples=20)


def test_an_index_tensor_fed_as_an_input_with_a_whole_dimension_matches_eager(tmp_path):
    def scatter(x, v, joints):
        y = x.clone()
        y[:, joints] = v
        return y

    def fresh():  # distinct joints: eager leaves the winner of a repeated index unspecified
        return {"x": torch.randn(4, 8), "v": torch.randn(3), "joints": torch.randperm(8)[:3]}

    compiled = export_function(tmp_path, scatter, fresh(), "onnx")
    assert_matches_eager(compiled, scatter, fresh, samples=20)


def test_a_boolean_mask_beside_a_whole_dimension_stays_a_clear_export_error(tmp_path):
    mask = torch.tensor([True, False, True, False, False, False, False, True])
    with pytest.raises(ExportError, match=r"node 'node'.*export_with='jit' or 'pt2'"):
        export_function(
            tmp_path,
            _setitem((slice(None), mask)),
            {"x": torch.randn(2, 8), "v": torch.randn(3)},
            "onnx",
        )
