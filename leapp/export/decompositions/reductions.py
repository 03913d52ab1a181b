"""Reductions and scans: cumulative products and extremes, counts, sums that skip NaN.

Scans are unrolled over the static size of their dimension (``cumprod`` over 5 elements is 5
multiplications in the artifact).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from leapp.export.decompositions.elementwise import logaddexp

__all__ = ["DECOMPOSITIONS", "norm_along"]

aten = torch.ops.aten


def _count_nonzero(x, dim=None):
    return (x != 0).sum(dim=dim) if dim is not None else (x != 0).sum()


def _nansum(x, dim=None, keepdim=False, *, dtype=None):
    clean = torch.where(torch.isnan(x), torch.zeros_like(x), x)
    if dim is None:
        return clean.sum(dtype=dtype)
    return clean.sum(dim, keepdim=keepdim, dtype=dtype)


def _scan(x, dim, step):
    """``out[i] = step(out[i-1], x[i])`` along ``dim``, unrolled over its static size."""
    dim = dim % max(x.dim(), 1)
    if x.dim() == 0 or x.shape[dim] == 0:
        return x.clone()
    current = x.select(dim, 0)
    outputs = [current]
    for index in range(1, x.shape[dim]):
        current = step(current, x.select(dim, index))
        outputs.append(current)
    return torch.stack(outputs, dim)


def _cumprod(x, dim, *, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    return _scan(x, dim, torch.mul)


def _logcumsumexp(x, dim):
    return _scan(x, dim, logaddexp)


def _cumulative_extreme(x, dim, better):
    dim = dim % max(x.dim(), 1)
    if x.dim() == 0:
        return x.clone(), torch.zeros_like(x, dtype=torch.int64)
    if x.shape[dim] == 0:
        return x.clone(), torch.zeros_like(x, dtype=torch.int64)
    best, where = x.select(dim, 0), torch.zeros_like(x.select(dim, 0), dtype=torch.int64)
    values, indices = [best], [where]
    for index in range(1, x.shape[dim]):
        item = x.select(dim, index)
        # A NaN wins and keeps winning (eager propagates it); ties move to the later index.
        take = better(item, best) | (item == best) | torch.isnan(item)
        take = take & ~(torch.isnan(best) & ~torch.isnan(item))
        best = torch.where(take, item, best)
        where = torch.where(take, torch.full_like(where, index), where)
        values.append(best)
        indices.append(where)
    return torch.stack(values, dim), torch.stack(indices, dim)


def _cummax(x, dim):
    return _cumulative_extreme(x, dim, torch.gt)


def _cummin(x, dim):
    return _cumulative_extreme(x, dim, torch.lt)


def _dims(x, dim):
    if dim is None:
        return list(range(x.dim()))
    return [d % max(x.dim(), 1) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]


def _count_true(x, dim, keepdim):
    truth = (x != 0).to(torch.int64)
    dims = _dims(x, dim)
    if x.dim() == 0 or not dims:
        return truth, 1
    size = 1
    for d in dims:
        size *= x.shape[d]
    return truth.sum(dims, keepdim=keepdim), size


def _all(x, dim=None, keepdim=False):
    count, size = _count_true(x, dim, keepdim)
    return count == size


def _any(x, dim=None, keepdim=False):
    count, _ = _count_true(x, dim, keepdim)
    return count > 0


def _logsumexp(x, dim, keepdim=False):
    if not x.dtype.is_floating_point:
        x = x.to(torch.get_default_dtype())
    if x.dim() == 0:
        return x.clone()
    dims = _dims(x, dim)
    top = x.amax(dims, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    result = torch.log(torch.exp(x - top).sum(dims, keepdim=True)) + top
    return result if keepdim else result.squeeze(dims)


def _select_sorted(x, dim, keepdim, position):
    """Value and index of the element at ``position`` of ``x`` sorted along ``dim``
    (``position`` an int, or a tensor of per-row positions with ``dim`` kept)."""
    if x.dim() == 0:
        return x.clone(), torch.zeros((), dtype=torch.int64)
    dim = dim % x.dim()
    values, indices = torch.sort(x, dim=dim)
    if isinstance(position, int):
        value, index = values.narrow(dim, position, 1), indices.narrow(dim, position, 1)
    else:
        value, index = values.gather(dim, position), indices.gather(dim, position)
    if not keepdim:
        value, index = value.squeeze(dim), index.squeeze(dim)
    return value, index


def _kthvalue(x, k, dim=-1, keepdim=False):
    return _select_sorted(x, dim, keepdim, k - 1)


def _median(x, dim=None, keepdim=False):
    if dim is None:
        flat = x.reshape(-1)
        return _select_sorted(flat, 0, False, (flat.numel() - 1) // 2)[0]
    size = x.shape[dim % x.dim()] if x.dim() else 1
    return _select_sorted(x, dim, keepdim, (size - 1) // 2)


def _nanmedian(x, dim=None, keepdim=False):
    if dim is None:
        return _nanmedian(x.reshape(-1), 0, False)[0]
    if x.dim() == 0:
        return x.clone(), torch.zeros((), dtype=torch.int64)
    dim = dim % x.dim()
    valid = (~torch.isnan(x)).sum(dim, keepdim=True)  # NaN sorts last
    position = torch.clamp((valid - 1) // 2, min=0)
    return _select_sorted(x, dim, keepdim, position)


def _histc(x, bins=100, min=0, max=0):
    low = torch.full((), float(min), dtype=x.dtype)
    high = torch.full((), float(max), dtype=x.dtype)
    if min == max:
        low, high = x.min(), x.max()
        same = low == high
        low, high = torch.where(same, low - 1, low), torch.where(same, high + 1, high)
    flat = x.reshape(-1)
    inside = (flat >= low) & (flat <= high)
    position = torch.floor((flat - low) * bins / (high - low)).to(torch.int64)
    position = torch.clamp(position, 0, bins - 1)
    counts = (position.unsqueeze(1) == torch.arange(bins)).to(x.dtype) * inside.unsqueeze(1)
    return counts.sum(0)


def _searchsorted(
    sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None
):
    if sorter is not None:
        sorted_sequence = sorted_sequence.gather(-1, sorter)
    right = right or side == "right"
    if not isinstance(values, torch.Tensor):
        values = torch.full((), values, dtype=sorted_sequence.dtype)
    if sorted_sequence.dim() == 1:
        boundaries = sorted_sequence.reshape([1] * values.dim() + [-1])
    else:
        boundaries = sorted_sequence.unsqueeze(-2)
    below = boundaries <= values.unsqueeze(-1) if right else boundaries < values.unsqueeze(-1)
    return below.sum(-1).to(torch.int32 if out_int32 else torch.int64)


def _dist(a, b, p=2):
    difference = (a - b).reshape(-1)
    return norm_along(difference, float(p), -1)


def norm_along(difference, p, dim):
    """The p-norm of ``difference`` along ``dim``, for every p torch.norm takes."""
    magnitude = torch.abs(difference)
    if p == 0:
        return (magnitude != 0).to(difference.dtype).sum(dim)
    if p == math.inf:
        return magnitude.amax(dim)
    if p == -math.inf:
        return magnitude.amin(dim)
    if p == 1:
        return magnitude.sum(dim)
    if p == 2:
        return torch.sqrt((magnitude * magnitude).sum(dim))
    return torch.pow(torch.pow(magnitude, p).sum(dim), 1.0 / p)


def _quantile(x, q, dim=None, keepdim=False, *, interpolation="linear", ignore_nan=False):
    if dim is None:
        x, dim = x.reshape(-1), 0
    if x.dim() == 0:
        x, dim = x.reshape(1), 0
    dim = dim % x.dim()
    values = torch.sort(x, dim=dim)[0]  # NaN sorts last
    size = x.shape[dim]
    nan = torch.isnan(x).any(dim, keepdim=True)
    if ignore_nan:
        count = size - torch.isnan(x).sum(dim, keepdim=True)
    else:
        count = torch.full_like(nan, size, dtype=torch.int64)
    fractions = q if isinstance(q, torch.Tensor) else torch.tensor(float(q), dtype=x.dtype)
    results = []
    for fraction in fractions.reshape(-1).unbind(0) if fractions.dim() else [fractions]:
        position = fraction.to(x.dtype) * (count - 1).clamp(min=0).to(x.dtype)  # as eager
        low, high = torch.floor(position), torch.ceil(position)
        if interpolation == "lower":
            high = low
        elif interpolation == "higher":
            low = high
        elif interpolation == "nearest":
            low = high = torch.round(position)
        below = values.gather(dim, low.to(torch.int64))
        above = values.gather(dim, high.to(torch.int64))
        if interpolation == "midpoint":
            value = below + (above - below) * 0.5
        else:
            value = below + (above - below) * (position - low)
        empty = (count == 0) if ignore_nan else nan
        value = torch.where(empty, torch.full_like(value, math.nan), value)
        results.append(value if keepdim else value.squeeze(dim))
    if isinstance(q, torch.Tensor) and q.dim() == 1:
        return torch.stack(results, 0)
    return results[0]


def _nanquantile(x, q, dim=None, keepdim=False, *, interpolation="linear"):
    return _quantile(x, q, dim, keepdim, interpolation=interpolation, ignore_nan=True)


def _cov(x, *, correction=1, fweights=None, aweights=None):
    if fweights is not None or aweights is not None:
        raise NotImplementedError("cov with weights")
    rows = x.reshape(1, -1) if x.dim() < 2 else x
    centered = rows - rows.mean(1, keepdim=True)
    scale = max(rows.shape[1] - correction, 0)
    out = torch.matmul(centered, centered.transpose(0, 1)) / scale
    return out.reshape(()) if x.dim() < 2 else out


def _corrcoef(x):
    c = _cov(x)
    if c.dim() == 0:
        return c / c
    spread = torch.sqrt(torch.diagonal(c, 0, 0, 1))
    return torch.clamp(c / spread.unsqueeze(1) / spread.unsqueeze(0), -1, 1)


def _mode(x, dim=-1, keepdim=False):
    if x.dim() == 0:
        return x.clone(), torch.zeros((), dtype=torch.int64)
    dim = dim % x.dim()
    moved = torch.movedim(x, dim, x.dim() - 1)  # [..., n]
    same = moved.unsqueeze(-1) == moved.unsqueeze(-2)  # [..., n, n]
    counts = same.sum(-1)
    most = counts == counts.amax(-1, keepdim=True)
    fill = torch.full_like(moved, math.inf if moved.dtype.is_floating_point else 0)
    if not moved.dtype.is_floating_point:
        fill = torch.full_like(moved, torch.iinfo(moved.dtype).max)
    value = torch.where(most, moved, fill).amin(-1, keepdim=True)  # the smallest of the most
    order = torch.arange(1, moved.shape[-1] + 1)
    index = ((moved == value).to(torch.int64) * order).amax(-1, keepdim=True) - 1  # the last
    value, index = value.squeeze(-1), index.squeeze(-1)
    if keepdim:
        value, index = value.unsqueeze(dim), index.unsqueeze(dim)
    return value, index


DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    aten.quantile: _quantile,
    aten.nanquantile: _nanquantile,
    aten.cov: _cov,
    aten.corrcoef: _corrcoef,
    aten.mode: _mode,
    aten.all: _all,
    aten.any: _any,
    aten.logsumexp: _logsumexp,
    aten.kthvalue: _kthvalue,
    aten.median: _median,
    aten.nanmedian: _nanmedian,
    aten.histc: _histc,
    aten.searchsorted: _searchsorted,
    aten.dist: _dist,
    aten.count_nonzero: _count_nonzero,
    aten.nansum: _nansum,
    aten.cumprod: _cumprod,
    aten.logcumsumexp: _logcumsumexp,
    aten.cummax: _cummax,
    aten.cummin: _cummin,
}
