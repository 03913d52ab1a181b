"""Elementwise operations: hyperbolic functions, ``expm1``, ``logaddexp``, sign tests, ...

Numerically careful forms (``expm1`` near zero, ``logaddexp`` of large values) and eager
PyTorch's edge cases (``inf``, ``nan``, signed zeros).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["DECOMPOSITIONS", "expm1", "logaddexp", "signbit"]

aten = torch.ops.aten


def _trunc(x):
    if not x.dtype.is_floating_point:
        return x.clone()
    return torch.where(x < 0, torch.ceil(x), torch.floor(x))


def _frac(x):
    return x - _trunc(x)


def _sinh(x):
    # For |x| < 1, (e^x - e^-x)/2 loses digits; expm1 keeps them: sinh = (u + u/(u+1))/2.
    u = expm1(torch.abs(x))
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


def expm1(x):
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


def signbit(x):
    if not x.dtype.is_floating_point:
        return x < 0
    return (x < 0) | ((x == 0) & (torch.reciprocal(x) < 0))


def _copysign(a, b):
    if not isinstance(b, torch.Tensor):
        b = torch.full_like(a, float(b))
    magnitude = torch.abs(a)
    return torch.where(signbit(b), -magnitude, magnitude)


def _heaviside(x, values):
    step = (x > 0).to(x.dtype)
    return torch.where(x == 0, values.to(x.dtype), step)


def logaddexp(a, b):
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


def _angle(x):
    if not x.dtype.is_floating_point:
        x = x.to(torch.get_default_dtype())
    pi = torch.full_like(x, math.pi)
    return torch.where(torch.isnan(x), x, torch.where(x < 0, pi, torch.zeros_like(x)))


def _frexp(x):
    magnitude = torch.abs(x)
    finite = torch.isfinite(x) & (x != 0)
    safe = torch.where(finite, magnitude, torch.ones_like(magnitude))
    exponent = torch.floor(torch.log2(safe)) + 1
    mantissa = safe / torch.pow(2.0, exponent)
    # log2 rounds near powers of two: move the mantissa back into [0.5, 1).
    high = mantissa >= 1
    exponent = torch.where(high, exponent + 1, exponent)
    mantissa = torch.where(high, mantissa * 0.5, mantissa)
    low = mantissa < 0.5
    exponent = torch.where(low, exponent - 1, exponent)
    mantissa = torch.where(low, mantissa * 2, mantissa)
    mantissa = torch.where(finite, torch.where(x < 0, -mantissa, mantissa), x)
    exponent = torch.where(finite, exponent, torch.zeros_like(exponent))
    return mantissa, exponent.to(torch.int32)


def _isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    if not isinstance(b, torch.Tensor):
        b = torch.full_like(a, b)
    close = a == b
    if a.dtype.is_floating_point:
        finite = torch.isfinite(a) & torch.isfinite(b)
        near = torch.abs(a - b) <= atol + rtol * torch.abs(b)
        close = close | (finite & near)
        if equal_nan:
            close = close | (torch.isnan(a) & torch.isnan(b))
    return close


def _float_power(a, b):
    a = a.to(torch.float64) if isinstance(a, torch.Tensor) else float(a)
    b = b.to(torch.float64) if isinstance(b, torch.Tensor) else float(b)
    if not isinstance(a, torch.Tensor):
        a = torch.full_like(b, a)
    return torch.pow(a, b)


def _full_like(
    x, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None
):
    del layout, device, pin_memory, memory_format
    dtype = dtype or x.dtype
    return torch.full(tuple(x.shape), _scalar(fill_value, dtype), dtype=dtype)


def _zeros_like(x, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _full_like(x, 0, dtype=dtype)


def _fill(x, value):
    if isinstance(value, torch.Tensor):
        return value.to(x.dtype).expand(x.shape).clone()
    return torch.full(tuple(x.shape), _scalar(value, x.dtype), dtype=x.dtype)


def _scalar(value, dtype: torch.dtype):
    """A Python number of ``dtype``'s kind (the exporter cannot trace ``full`` with a bool)."""
    if dtype == torch.bool:
        return bool(value)
    return float(value) if dtype.is_floating_point else int(value)


def _zero(x):
    return torch.full(tuple(x.shape), 0, dtype=x.dtype)


DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    aten.angle: _angle,
    aten.frexp: _frexp,
    aten.isclose: _isclose,
    aten.float_power: _float_power,
    aten.full_like: _full_like,
    aten.zeros_like: _zeros_like,
    aten.fill: _fill,
    aten.zero: _zero,
    aten.trunc: _trunc,
    aten.fix: _trunc,
    aten.frac: _frac,
    aten.sinh: _sinh,
    aten.cosh: _cosh,
    aten.asinh: _asinh,
    aten.acosh: _acosh,
    aten.atanh: _atanh,
    aten.expm1: expm1,
    aten.exp2: _exp2,
    aten.deg2rad: _deg2rad,
    aten.rad2deg: _rad2deg,
    aten.signbit: signbit,
    aten.copysign: _copysign,
    aten.heaviside: _heaviside,
    aten.logaddexp: logaddexp,
    aten.logaddexp2: _logaddexp2,
    aten.isposinf: _isposinf,
    aten.isneginf: _isneginf,
    aten.fmax: _fmax,
    aten.fmin: _fmin,
    aten.hypot: _hypot,
    aten.xlogy: _xlogy,
    aten.special_xlog1py: _xlog1py,
    aten.sgn: _sgn,
}
