"""Index lists of ``index_put`` spelled out for the TorchScript-based ONNX exporter.

``x[:, joints] = values`` (and a script's ``index_put_(x, [None, joints], values)``, the form
TorchScript policies scatter their actions with) is an ``aten.index_put`` whose index list holds
``None`` for each dimension taken whole. The exporter's ``index_put`` treats every entry of a
list longer than one as an index tensor: it adds the entries up to find their broadcast shape,
writes a ``None`` as an empty input name, and the model it writes is invalid (ONNX Runtime:
"Node (/Add)'s input 0 is marked single but has an empty string in the graph"). The same
translation passes index tensors of another dtype than int64 to ScatterND, which takes int64
only, and reshapes the values to the indexed shape where they must be broadcast to it.

:func:`spell_out_index_lists` rewrites each call of a lowered graph (shapes are static) that
has one of these forms into the form the exporter writes correctly: every ``None`` becomes the
constant ``arange(size)`` of its dimension, every entry is an int64 tensor placed at its
dimensions of the indexed shape (PyTorch's rule: the index tensors' broadcast shape stands where
they are when they are adjacent, first otherwise), and the values are expanded to the indexed
shape. The call indexes the same elements in the same order, so it writes the same values.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import torch
import torch.fx as fx

__all__ = ["spell_out_index_lists"]

logger = logging.getLogger(__name__)

_INDEX_PUT = {torch.ops.aten.index_put, torch.ops.aten.index_put_}


@dataclass(frozen=True)
class _Spelling:
    """One ``index_put`` call spelled out: ``places[d]`` is the shape entry ``d`` of the index
    list takes (its sizes at its dimensions of ``shape``, 1 elsewhere); ``shape`` is the indexed
    shape of the listed dimensions, ``trailing`` the sizes of the dimensions after them."""

    shape: tuple[int, ...]
    places: tuple[tuple[int, ...], ...]
    trailing: tuple[int, ...]


def spell_out_index_lists(module: fx.GraphModule) -> int:
    """Rewrite each ``index_put`` of ``module`` that the exporter would write wrongly (see the
    module docstring); returns how many were rewritten. Calls whose shapes are unknown (no
    ``meta["val"]``), that index with a boolean mask or write into a tensor without elements
    are left as they are."""
    rewritten = 0
    for fx_node in list(module.graph.nodes):
        if fx_node.op != "call_function" or not _is_index_put(fx_node.target):
            continue
        spelling = _spelling(fx_node)
        if spelling is not None and _needs_rewrite(fx_node, spelling):
            _rewrite(module, fx_node, spelling)
            rewritten += 1
    if rewritten:
        logger.debug("index_put calls spelled out for ONNX: %d", rewritten)
    return rewritten


def _is_index_put(target: object) -> bool:
    return isinstance(target, torch._ops.OpOverload) and target.overloadpacket in _INDEX_PUT


def _value(arg: object) -> torch.Tensor | None:
    value = arg.meta.get("val") if isinstance(arg, fx.Node) else None
    return value if isinstance(value, torch.Tensor) else None


def _spelling(fx_node: fx.Node) -> _Spelling | None:
    """How the call's index list is spelled out, or None where it cannot be."""
    source, indices = _value(fx_node.args[0]), fx_node.args[1]
    if source is None or not isinstance(indices, (list, tuple)) or not indices:
        return None
    tensors = [_value(entry) for entry in indices if entry is not None]
    if not tensors or any(t is None or not _integral(t) for t in tensors):
        return None
    broadcast = tuple(int(n) for n in torch.broadcast_shapes(*(t.shape for t in tensors)))
    listed = [d for d, entry in enumerate(indices) if entry is not None]
    whole = [d for d, entry in enumerate(indices) if entry is None]
    adjacent = listed[-1] - listed[0] + 1 == len(listed)
    at = sum(1 for d in whole if adjacent and d < listed[0])  # whole dimensions before
    sizes = [int(source.shape[d]) for d in whole]
    shape = (*sizes[:at], *broadcast, *sizes[at:])
    if source.numel() == 0 or 0 in shape:  # nothing to write; and the exporter's shape
        return None  # inference of a Reshape to a shape with a zero kills it (SIGFPE)
    end = at + len(broadcast)  # the index tensors' dimensions are shape[at:end]
    places = []
    for d, entry in enumerate(indices):
        place = [1] * len(shape)
        if entry is None:
            position = whole.index(d)
            place[position if position < at else position + len(broadcast)] = sizes[position]
        else:
            entry_shape = list(_value(entry).shape)
            place[end - len(entry_shape) : end] = entry_shape
        places.append(tuple(place))
    trailing = tuple(int(n) for n in source.shape[len(indices) :])
    return _Spelling(shape=shape, places=tuple(places), trailing=trailing)


def _integral(value: torch.Tensor) -> bool:
    return not value.dtype.is_floating_point and value.dtype not in (torch.bool, torch.uint8)


def _needs_rewrite(fx_node: fx.Node, spelling: _Spelling) -> bool:
    indices, values = fx_node.args[1], _value(fx_node.args[2])
    return (
        None in indices
        or any(_value(entry).dtype != torch.int64 for entry in indices if entry is not None)
        or values is None
        or tuple(values.shape) != spelling.shape + spelling.trailing
    )


def _rewrite(module: fx.GraphModule, fx_node: fx.Node, spelling: _Spelling) -> None:
    graph = module.graph
    target, indices, values = fx_node.args[0], fx_node.args[1], fx_node.args[2]
    full = [*spelling.shape, *spelling.trailing]
    spelled = []
    with graph.inserting_before(fx_node):
        for d, (entry, place) in enumerate(zip(indices, spelling.places, strict=True)):
            if entry is None:
                name = f"_{fx_node.name}_whole_{d}"
                whole = torch.arange(math.prod(place), dtype=torch.int64).reshape(place)
                module.register_buffer(name, whole)
                spelled.append(graph.get_attr(name))
                continue
            if _value(entry).dtype != torch.int64:
                entry = graph.call_method("to", (entry, torch.int64))
            spelled.append(graph.call_function(torch.ops.aten.reshape.default, (entry, place)))
        expanded = graph.call_function(torch.ops.aten.expand.default, (values, full))
    fx_node.args = (target, spelled, expanded, *fx_node.args[3:])
