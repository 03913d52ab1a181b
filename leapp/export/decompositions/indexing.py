"""Indexing: selecting, filling, copying and reducing along a dimension by index tensors.

The exporter's ``index_select``/``index_fill``/``index_copy`` write invalid models for a 0-d
index, its ``scatter_reduce`` has no ``include_self=False`` or ``mean``, ``index_reduce`` and
``put`` have no translation. These forms use one-hot comparisons (``index == arange(size)``)
over the static size of the indexed dimension, which every ONNX runtime runs, and
``aten.index`` (a Gather) to pick.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["DECOMPOSITIONS"]

aten = torch.ops.aten


def _along(x: torch.Tensor, dim: int, positions: torch.Tensor) -> torch.Tensor:
    """``x`` indexed by ``positions`` (1-d) along ``dim`` (an ``aten.index``, a Gather)."""
    dim = dim % max(x.dim(), 1)
    return x[(slice(None),) * dim + (positions,)]


def _hits(index: torch.Tensor, size: int) -> torch.Tensor:
    """``[size, k]``: position ``p`` is hit by entry ``j`` of the flattened ``index``."""
    flat = index.reshape(-1)
    flat = torch.where(flat < 0, flat + size, flat)
    return torch.arange(size, dtype=flat.dtype).unsqueeze(1) == flat.unsqueeze(0)


def _broadcast_on(mask: torch.Tensor, x: torch.Tensor, dim: int) -> torch.Tensor:
    shape = [1] * x.dim()
    shape[dim] = mask.shape[0]
    return mask.reshape(shape)


def _index_select(x, dim, index):
    if x.dim() == 0:
        return x.clone()
    flat = index.reshape(-1)
    size = x.shape[dim]
    return _along(x, dim, torch.where(flat < 0, flat + size, flat))


def _index_fill(x, dim, index, value):
    if x.dim() == 0:
        filled = torch.as_tensor(value).to(x.dtype).reshape(())
        return filled.clone() if index.numel() else x.clone()
    dim = dim % x.dim()
    hit = _broadcast_on(_hits(index, x.shape[dim]).any(1), x, dim)
    return torch.where(hit, torch.as_tensor(value, dtype=x.dtype), x)


def _last_hit(index: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per position: whether an index entry hits it, and the last entry that does."""
    hits = _hits(index, size)
    order = torch.arange(1, hits.shape[1] + 1, dtype=torch.int64)
    last = (hits.to(torch.int64) * order).amax(1) - 1
    return hits.any(1), torch.clamp(last, min=0)


def _index_copy(x, dim, index, source):
    if x.dim() == 0:
        return source.reshape(x.shape).clone()
    dim = dim % x.dim()
    hit, last = _last_hit(index, x.shape[dim])
    return torch.where(_broadcast_on(hit, x, dim), _along(source, dim, last), x)


def _index_add(x, dim, index, source, *, alpha=1):
    if x.dim() == 0:
        return x + alpha * source.reshape(x.shape)
    dim = dim % x.dim()
    hits = _hits(index, x.shape[dim]).to(source.dtype)  # [n, k]
    moved = torch.movedim(source, dim, -1)  # [..., k]
    added = torch.movedim((moved.unsqueeze(-2) * hits).sum(-1), -1, dim)
    return x + alpha * added if alpha != 1 else x + added


_IDENTITY = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "amax": -math.inf, "amin": math.inf}


def _extreme(dtype: torch.dtype, reduce: str) -> float | int:
    if dtype.is_floating_point:
        return _IDENTITY[reduce]
    info = torch.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _reduce(x, hits, values, reduce, include_self):
    """``x`` ([..., n]) with ``values`` ([..., k]) reduced into the positions ``hits``
    ([..., k, n]) marks."""
    expanded = values.unsqueeze(-1)
    if reduce in ("sum", "mean"):
        reduced = torch.where(hits, expanded, torch.zeros_like(expanded)).sum(-2)
    elif reduce == "prod":
        reduced = torch.where(hits, expanded, torch.ones_like(expanded)).prod(-2)
    else:
        fill = torch.full_like(expanded, _extreme(x.dtype, reduce))
        chosen = torch.where(hits, expanded, fill)
        reduced = chosen.amax(-2) if reduce == "amax" else chosen.amin(-2)
    hit = hits.any(-2)
    if reduce == "mean":
        count = hits.sum(-2).to(x.dtype) + (1 if include_self else 0)
        total = reduced + x if include_self else reduced
        count = torch.where(count == 0, torch.ones_like(count), count)
        mean = (
            total / count
            if x.dtype.is_floating_point
            else torch.div(total, count, rounding_mode="floor")
        )
        return torch.where(hit, mean.to(x.dtype), x)
    if include_self:
        combine = {
            "sum": torch.add,
            "prod": torch.mul,
            "amax": torch.maximum,
            "amin": torch.minimum,
        }
        reduced = combine[reduce](x, reduced.to(x.dtype))
    return torch.where(hit, reduced.to(x.dtype), x)


def _scatter_reduce(x, dim, index, src, reduce, *, include_self=True):
    if x.dim() == 0:
        x, index, src = x.reshape(1), index.reshape(1), src.reshape(1)
        return _scatter_reduce(x, 0, index, src, reduce, include_self=include_self).reshape(())
    dim = dim % x.dim()
    if any(index.shape[d] != x.shape[d] for d in range(x.dim()) if d != dim):
        raise NotImplementedError("scatter_reduce with an index narrower than the input")
    src = src[tuple(slice(0, size) for size in index.shape)]
    n = x.shape[dim]
    moved_index = torch.movedim(index, dim, -1)
    hits = moved_index.unsqueeze(-1) == torch.arange(n, dtype=index.dtype)  # [..., k, n]
    result = _reduce(
        torch.movedim(x, dim, -1), hits, torch.movedim(src, dim, -1), reduce, include_self
    )
    return torch.movedim(result, -1, dim)


def _index_reduce(x, dim, index, source, reduce, *, include_self=True):
    if x.dim() == 0:
        return _scatter_reduce(x, 0, index, source, reduce, include_self=include_self)
    dim = dim % x.dim()
    hits = _hits(index, x.shape[dim]).transpose(0, 1)  # [k, n]
    moved = torch.movedim(x, dim, -1)
    values = torch.movedim(source, dim, -1)
    hits = hits.expand(*moved.shape[:-1], *hits.shape)
    result = _reduce(moved, hits, values, reduce, include_self)
    return torch.movedim(result, -1, dim)


def _put(x, index, source, accumulate=False):
    flat = x.reshape(-1)
    if accumulate:
        return _index_add(flat, 0, index.reshape(-1), source.reshape(-1)).reshape(x.shape)
    return _index_copy(flat, 0, index.reshape(-1), source.reshape(-1)).reshape(x.shape)


def _unfold(x, dimension, size, step):
    if x.dim() == 0:
        return x.reshape(1).clone()
    dim = dimension % x.dim()
    starts = torch.arange(0, x.shape[dim] - size + 1, step).unsqueeze(1)
    windows = (starts + torch.arange(size)).reshape(-1)  # static positions
    picked = _along(torch.movedim(x, dim, -1), -1, windows)
    picked = picked.reshape(*picked.shape[:-1], starts.shape[0], size)
    return torch.movedim(picked, -2, dim)


def _repeat(x, repeats):
    repeats = list(repeats)
    padded = x.reshape([1] * (len(repeats) - x.dim()) + list(x.shape))
    spread, expanded, merged = [], [], []
    for count, size in zip(repeats, padded.shape, strict=True):
        spread += [1, size]
        expanded += [count, size]
        merged.append(count * size)
    return padded.reshape(spread).expand(expanded).reshape(merged).clone()


def _diag_embed(x, offset=0, dim1=-2, dim2=-1):
    length = x.shape[-1] if x.dim() else 1
    side = length + abs(offset)
    rows = torch.arange(length) + max(-offset, 0)
    cols = torch.arange(length) + max(offset, 0)
    place = (rows.reshape(-1, 1, 1) == torch.arange(side).reshape(1, -1, 1)) & (
        cols.reshape(-1, 1, 1) == torch.arange(side).reshape(1, 1, -1)
    )  # [length, side, side]
    values = x.reshape(*x.shape[:-1], length, 1, 1) if x.dim() else x.reshape(1, 1, 1)
    matrix = torch.where(place, values, torch.zeros_like(values)).sum(-3)
    out_dims = x.dim() + 1
    return torch.movedim(matrix, (-2, -1), (dim1 % out_dims, dim2 % out_dims))


def _diag(x, diagonal=0):
    if x.dim() == 1:
        return _diag_embed(x, diagonal, 0, 1)
    return torch.diagonal(x, diagonal, 0, 1).clone()


def _diagflat(x, offset=0):
    return _diag_embed(x.reshape(-1), offset, 0, 1)


def _diagonal_scatter(x, src, offset=0, dim1=0, dim2=1):
    d1, d2 = dim1 % x.dim(), dim2 % x.dim()
    rows, cols = x.shape[d1], x.shape[d2]
    length = src.shape[-1] if src.dim() else 0
    first = torch.arange(length) + max(-offset, 0)
    second = torch.arange(length) + max(offset, 0)
    place = (first.reshape(-1, 1, 1) == torch.arange(rows).reshape(1, -1, 1)) & (
        second.reshape(-1, 1, 1) == torch.arange(cols).reshape(1, 1, -1)
    )
    values = src.reshape(*src.shape[:-1], length, 1, 1)
    spread = torch.where(place, values, torch.zeros_like(values)).sum(-3)
    spread = torch.movedim(spread, (-2, -1), (d1, d2))
    mask = torch.movedim(place.any(0).expand(*src.shape[:-1], rows, cols), (-2, -1), (d1, d2))
    return torch.where(mask, spread, x)


def _combinations(x, r=2, with_replacement=False):
    choose = (
        itertools.combinations_with_replacement if with_replacement else itertools.combinations
    )
    picks = list(choose(range(x.shape[0]), r))
    if not picks:
        return x.new_zeros((0, r) if r else (0,))
    positions = torch.tensor(picks, dtype=torch.int64)
    return _along(x, 0, positions.reshape(-1)).reshape(len(picks), r)


def _nonzero_static(x, *, size, fill_value=-1):
    mask = (x != 0).reshape(-1)
    rank = torch.cumsum(mask.to(torch.int64), 0) - 1  # slot of each nonzero element
    slots = (rank.unsqueeze(0) == torch.arange(size).unsqueeze(1)) & mask.unsqueeze(0)
    coordinates = torch.tensor(
        list(itertools.product(*[range(n) for n in x.shape])) or [[0] * x.dim()],
        dtype=torch.int64,
    ).reshape(-1, max(x.dim(), 1))[:, : x.dim()]
    chosen = (slots.to(torch.int64).unsqueeze(-1) * coordinates.unsqueeze(0)).sum(1)
    found = slots.any(1, keepdim=True)
    return torch.where(found, chosen, torch.full_like(chosen, fill_value))


def _squeeze(x, dim=None):
    if dim is None:
        return x.reshape([n for n in x.shape if n != 1])
    dims = {d % max(x.dim(), 1) for d in (dim if isinstance(dim, (list, tuple)) else [dim])}
    return x.reshape([n for i, n in enumerate(x.shape) if not (i in dims and n == 1)])


DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    aten.index_select: _index_select,
    aten.index_fill: _index_fill,
    aten.index_copy: _index_copy,
    aten.index_add: _index_add,
    aten.index_reduce: _index_reduce,
    aten.scatter_reduce: _scatter_reduce,
    aten.put: _put,
    aten.unfold: _unfold,
    aten.unfold_copy: _unfold,
    aten.repeat: _repeat,
    aten.diag_embed: _diag_embed,
    aten.diag: _diag,
    aten.diagflat: _diagflat,
    aten.diagonal_scatter: _diagonal_scatter,
    aten.combinations: _combinations,
    aten.nonzero_static: _nonzero_static,
    aten.squeeze: _squeeze,
}
