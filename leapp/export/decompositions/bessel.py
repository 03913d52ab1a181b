"""Bessel functions of orders 0 and 1 (J, Y, I, K, scaled I and K, spherical j0) and the
Hurwitz zeta function, in float64 and rounded to the input's dtype.

Each uses its power series (Abramowitz and Stegun 9.1.10-11, 9.6.10-11) for small arguments
and its Hankel asymptotic expansion (9.2.5-10, 9.7.1-2) beyond a switch point where double
precision is kept by both; loops have fixed lengths.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from leapp.export.decompositions.special import _BERNOULLI, _EULER, _result_dtype, _wide

__all__ = ["DECOMPOSITIONS"]

aten = torch.ops.aten

_TERMS = 60  # power-series terms: enough for |x| <= 20 in double precision
_ASYMPTOTIC_TERMS = 14


def _psi_pair(k: int, order: int) -> float:
    """psi(k + 1) + psi(k + order + 1) for integers (harmonic numbers minus Euler's gamma)."""
    harmonic = sum(1 / m for m in range(1, k + 1))
    harmonic_order = sum(1 / m for m in range(1, k + order + 1))
    return harmonic + harmonic_order - 2 * _EULER


def _series(x, order: int, alternating: bool, weights: Callable[[int], float] | None = None):
    """sum_k s^k w(k) (x/2)^(2k+order) / (k! (k+order)!), s = -1 when ``alternating``."""
    quarter = x * x / 4
    term = torch.pow(x / 2, order) / math.factorial(order)
    total = term * (weights(0) if weights else 1.0)
    for k in range(1, _TERMS):
        term = term * quarter / (k * (k + order))
        if alternating:
            term = -term
        total = total + term * (weights(k) if weights else 1.0)
    return total


def _coefficients(order: int) -> list[float]:
    """a_k(order) = prod_{m<=k} (4 order^2 - (2m-1)^2) / (k! 8^k)."""
    values, value = [1.0], 1.0
    for k in range(1, _ASYMPTOTIC_TERMS):
        value *= (4 * order * order - (2 * k - 1) ** 2) / (8 * k)
        values.append(value)
    return values


def _expansion(x, order: int, signs: Callable[[int], int]):
    total = torch.zeros_like(x)
    for k, a in enumerate(_coefficients(order)):
        total = total + signs(k) * a * torch.pow(x, -k)
    return total


def _hankel(x, order: int):
    """(P, Q, chi) of the Hankel expansion for x > 0."""
    p = torch.zeros_like(x)
    q = torch.zeros_like(x)
    for k, a in enumerate(_coefficients(order)):
        term = a * torch.pow(x, -k)
        if k % 2 == 0:
            p = p + (-1) ** (k // 2) * term
        else:
            q = q + (-1) ** (k // 2) * term
    return p, q, x - (order / 2 + 0.25) * math.pi


def _bessel_j(x, order: int):
    wide = _wide(x)
    z = torch.abs(wide)
    small = _series(wide, order, alternating=True)
    big_z = torch.clamp(z, min=12.0)
    p, q, chi = _hankel(big_z, order)
    big = torch.sqrt(2 / (math.pi * big_z)) * (p * torch.cos(chi) - q * torch.sin(chi))
    if order % 2:
        big = torch.sign(wide) * big
    return torch.where(z <= 12, small, big).to(_result_dtype(x))


def _bessel_y(x, order: int):
    wide = _wide(x)
    safe = torch.clamp(wide, min=1e-300)
    log_half = torch.log(safe / 2)
    j = _series(safe, order, alternating=True)
    pairs = _series(safe, order, alternating=True, weights=lambda k: _psi_pair(k, order))
    if order == 0:
        small = 2 / math.pi * log_half * j - pairs / math.pi
    else:
        small = -2 / (math.pi * safe) + 2 / math.pi * log_half * j - pairs / math.pi
    big_x = torch.clamp(wide, min=12.0)
    p, q, chi = _hankel(big_x, order)
    big = torch.sqrt(2 / (math.pi * big_x)) * (p * torch.sin(chi) + q * torch.cos(chi))
    out = torch.where(wide <= 12, small, big)
    out = torch.where(wide == 0, torch.full_like(wide, -math.inf), out)
    out = torch.where(wide < 0, torch.full_like(wide, math.nan), out)
    return out.to(_result_dtype(x))


def _bessel_i(x, order: int, scaled: bool):
    wide = _wide(x)
    z = torch.abs(wide)
    small = _series(z, order, alternating=False)
    if scaled:
        small = small * torch.exp(-z)
    big_z = torch.clamp(z, min=20.0)
    big = _expansion(big_z, order, lambda k: (-1) ** k) / torch.sqrt(2 * math.pi * big_z)
    if not scaled:
        big = big * torch.exp(big_z)
    out = torch.where(z <= 20, small, big)
    if order % 2:
        out = torch.sign(wide) * out
    return out.to(_result_dtype(x))


def _bessel_k(x, order: int, scaled: bool):
    wide = _wide(x)
    safe = torch.clamp(wide, min=1e-300)
    log_half = torch.log(safe / 2)
    i = _series(safe, order, alternating=False)
    pairs = _series(safe, order, alternating=False, weights=lambda k: _psi_pair(k, order))
    # A&S 9.6.13 (order 0) and 9.6.11 (order 1)
    small = -log_half * i + pairs / 2 if order == 0 else 1 / safe + log_half * i - pairs / 2
    if scaled:
        small = small * torch.exp(safe)
    big_x = torch.clamp(wide, min=8.0)
    big = _expansion(big_x, order, lambda k: 1) * torch.sqrt(math.pi / (2 * big_x))
    if not scaled:
        big = big * torch.exp(-big_x)
    out = torch.where(wide <= 8, small, big)
    out = torch.where(wide == 0, torch.full_like(wide, math.inf), out)
    out = torch.where(wide < 0, torch.full_like(wide, math.nan), out)
    return out.to(_result_dtype(x))


def _spherical_j0(x):
    wide = _wide(x)
    tiny = torch.abs(wide) < 1e-4
    safe = torch.where(tiny, torch.ones_like(wide), wide)
    out = torch.where(tiny, 1 - wide * wide / 6, torch.sin(safe) / safe)
    out = torch.where(torch.isinf(wide), torch.zeros_like(wide), out)
    return out.to(_result_dtype(x))


def _zeta(x, q):
    """Hurwitz zeta: a direct sum, then Euler-Maclaurin's tail (x > 1, q > 0)."""
    if not isinstance(x, torch.Tensor):
        x = torch.full_like(q, float(x))
    if not isinstance(q, torch.Tensor):
        q = torch.full_like(x, float(q))
    s, a = _wide(x), _wide(q)
    steps = 12
    total = torch.zeros_like(s + a)
    for k in range(steps):
        total = total + torch.pow(a + k, -s)
    tail_base = a + steps
    total = total + torch.pow(tail_base, 1 - s) / (s - 1) + torch.pow(tail_base, -s) / 2
    rising = s
    for j, bernoulli in enumerate(_BERNOULLI, start=1):
        total = total + bernoulli / math.factorial(2 * j) * rising * torch.pow(
            tail_base, -s - 2 * j + 1
        )
        rising = rising * (s + 2 * j - 1) * (s + 2 * j)
    total = torch.where(s == 1, torch.full_like(total, math.inf), total)
    total = torch.where(s < 1, torch.full_like(total, math.nan), total)
    return total.to(_result_dtype(x))


DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    aten.special_bessel_j0: lambda x: _bessel_j(x, 0),
    aten.special_bessel_j1: lambda x: _bessel_j(x, 1),
    aten.special_bessel_y0: lambda x: _bessel_y(x, 0),
    aten.special_bessel_y1: lambda x: _bessel_y(x, 1),
    aten.i0: lambda x: _bessel_i(x, 0, False),
    aten.special_i0e: lambda x: _bessel_i(x, 0, True),
    aten.special_i1: lambda x: _bessel_i(x, 1, False),
    aten.special_i1e: lambda x: _bessel_i(x, 1, True),
    aten.special_modified_bessel_i0: lambda x: _bessel_i(x, 0, False),
    aten.special_modified_bessel_i1: lambda x: _bessel_i(x, 1, False),
    aten.special_modified_bessel_k0: lambda x: _bessel_k(x, 0, False),
    aten.special_modified_bessel_k1: lambda x: _bessel_k(x, 1, False),
    aten.special_scaled_modified_bessel_k0: lambda x: _bessel_k(x, 0, True),
    aten.special_scaled_modified_bessel_k1: lambda x: _bessel_k(x, 1, True),
    aten.special_spherical_bessel_j0: _spherical_j0,
    aten.special_zeta: _zeta,
}
