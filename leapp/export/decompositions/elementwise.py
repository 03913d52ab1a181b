"""Decompositions for ONNX: ATen operations the TorchScript-based exporter cannot translate,
written with operations it can.

:data:`ONNX_DECOMPOSITIONS` maps an ATen operation (overload packet) to a function with the
operation's signature; :mod:`leapp.export.lowering` traces it in place of the operation. Each
one computes the operation's values on every input, up to float rounding, including the edge
cases eager PyTorch defines (``inf``, ``nan``, signed zeros) and with numerically careful forms
(``expm1`` near zero, ``logaddexp`` of large values). Torch's own decompositions are used for
the operations not listed here; these exist where torch's end in ``prims`` operations (which no
exporter knows) or are missing.

Loops run over static sizes (the graph's shapes are fixed), so ``cumprod`` over 5 elements is 5
multiplications in the artifact.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["ONNX_DECOMPOSITIONS"]

aten = torch.ops.aten


def _to_copy(
    x,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    non_blocking=False,
    memory_format=None,
):
    del layout, device, pin_memory, non_blocking, memory_format
    return x.to(dtype) if dtype is not None and dtype != x.dtype else x.clone()


def _trunc(x):
    if not x.dtype.is_floating_point:
        return x.clone()
    return torch.where(x < 0, torch.ceil(x), torch.floor(x))


def _frac(x):
    return x - _trunc(x)


def _sinh(x):
    # For |x| < 1, (e^x - e^-x)/2 loses digits; expm1 keeps them: sinh = (u + u/(u+1))/2.
    u = _expm1(torch.abs(x))
    return torch.sign(x) * 0.5 * (u + u / (u + 1))


def _cosh(x):
    e = torch.exp(torch.abs(x) * 0.5)  # e*e/2 + 1/(2*e*e) without overflowing early
    return 0.5 * (e * e) + 0.5 / (e * e)


def _asinh(x):
    a = torch.abs(x)
    return torch.sign(x) * torch.log1p(a + a * a / (1 + torch.sqrt(a * a + 1)))


def _acosh(x):
    return torch.log(x + torch.sqrt(x * x - 1))


def _atanh(x):
    return 0.5 * torch.log1p(2 * x / (1 - x))


def _expm1(x):
    # Kahan: with u = e^x rounded, (u - 1) * x / log(u) is accurate where u - 1 is not.
    u = torch.exp(x)
    small = (u - 1) * x / torch.log(u)
    exact = torch.where(u == 1, x, small)
    return torch.where(torch.isinf(x) | (torch.abs(x) > 1), u - 1, exact)


def _exp2(x):
    return torch.pow(torch.full_like(x, 2.0), x)


def _deg2rad(x):
    return x * (math.pi / 180.0)


def _rad2deg(x):
    return x * (180.0 / math.pi)


def _signbit(x):
    if not x.dtype.is_floating_point:
        return x < 0
    return (x < 0) | ((x == 0) & (torch.reciprocal(x) < 0))


def _copysign(a, b):
    if not isinstance(b, torch.Tensor):
        b = torch.full_like(a, float(b))
    magnitude = torch.abs(a)
    return torch.where(_signbit(b), -magnitude, magnitude)


def _heaviside(x, values):
    step = (x > 0).to(x.dtype)
    return torch.where(x == 0, values.to(x.dtype), step)


def _logaddexp(a, b):
    top = torch.maximum(a, b)
    sum_ = top + torch.log1p(torch.exp(-torch.abs(a - b)))
    return torch.where(torch.isinf(top) & (a == b), a, sum_)


def _logaddexp2(a, b):
    top = torch.maximum(a, b)
    sum_ = top + torch.log1p(torch.pow(2.0, -torch.abs(a - b))) * (1 / math.log(2.0))
    return torch.where(torch.isinf(top) & (a == b), a, sum_)


def _isposinf(x):
    return x == math.inf


def _isneginf(x):
    return x == -math.inf


def _fmax(a, b):
    return torch.where(torch.isnan(a), b, torch.where(torch.isnan(b), a, torch.maximum(a, b)))


def _fmin(a, b):
    return torch.where(torch.isnan(a), b, torch.where(torch.isnan(b), a, torch.minimum(a, b)))


def _hypot(a, b):
    return torch.sqrt(a * a + b * b)


def _xlogy(x, y):
    if not isinstance(x, torch.Tensor):
        x = torch.full_like(y, float(x))
    if not isinstance(y, torch.Tensor):
        y = torch.full_like(x, float(y))
    product = torch.where(x == 0, torch.zeros_like(x * y), x * torch.log(y))
    return torch.where(torch.isnan(y), y, product)


def _xlog1py(x, y):
    if not isinstance(x, torch.Tensor):
        x = torch.full_like(y, float(x))
    if not isinstance(y, torch.Tensor):
        y = torch.full_like(x, float(y))
    product = torch.where(x == 0, torch.zeros_like(x * y), x * torch.log1p(y))
    return torch.where(torch.isnan(y), y, product)


def _sgn(x):
    return torch.sign(x)


def _erfc(x):
    return 1 - torch.erf(x)


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
    return _scan(x, dim, _logaddexp)


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


ONNX_DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    aten._to_copy: _to_copy,
    aten.trunc: _trunc,
    aten.fix: _trunc,
    aten.frac: _frac,
    aten.sinh: _sinh,
    aten.cosh: _cosh,
    aten.asinh: _asinh,
    aten.acosh: _acosh,
    aten.atanh: _atanh,
    aten.expm1: _expm1,
    aten.exp2: _exp2,
    aten.deg2rad: _deg2rad,
    aten.rad2deg: _rad2deg,
    aten.signbit: _signbit,
    aten.copysign: _copysign,
    aten.heaviside: _heaviside,
    aten.logaddexp: _logaddexp,
    aten.logaddexp2: _logaddexp2,
    aten.isposinf: _isposinf,
    aten.isneginf: _isneginf,
    aten.fmax: _fmax,
    aten.fmin: _fmin,
    aten.hypot: _hypot,
    aten.xlogy: _xlogy,
    aten.special_xlog1py: _xlog1py,
    aten.sgn: _sgn,
    aten.erfc: _erfc,
    aten.count_nonzero: _count_nonzero,
    aten.nansum: _nansum,
    aten.cumprod: _cumprod,
    aten.logcumsumexp: _logcumsumexp,
    aten.cummax: _cummax,
    aten.cummin: _cummin,
}
