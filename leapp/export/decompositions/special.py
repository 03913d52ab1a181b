"""Special functions: gamma family, error-function family, Bessel functions, Hurwitz zeta.

ONNX has only ``Erf``. These evaluate the textbook series and asymptotic expansions in float64
(ONNX Runtime computes in doubles on the CPU) and round the result to the input's dtype, which
keeps float32 results within a few ulps: power series where they converge fast, asymptotic
expansions beyond, recurrences that shift the argument into the asymptotic range, reflection
formulas for negative arguments. Loops have fixed lengths, chosen for double precision.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["DECOMPOSITIONS"]

aten = torch.ops.aten

_SHIFT = 10  # recurrence steps that move gamma-family arguments to where expansions converge
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6)  # B2, B4, ... B14
_EULER = 0.5772156649015329


def _wide(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float64)


def _result_dtype(x: torch.Tensor) -> torch.dtype:
    return x.dtype if x.dtype.is_floating_point else torch.get_default_dtype()


def _where(condition, a, b):
    return torch.where(condition, a, b)


# --- gamma family ---------------------------------------------------------------------------


def _lgamma_positive(x):
    """log|Gamma(x)| for x >= 0.5 (float64): shifted Stirling series."""
    shifted = x + _SHIFT
    product = torch.zeros_like(x)
    for k in range(_SHIFT):
        product = product + torch.log(x + k)
    series = (shifted - 0.5) * torch.log(shifted) - shifted + 0.5 * math.log(2 * math.pi)
    power = 1 / shifted
    for j, bernoulli in enumerate(_BERNOULLI[:5], start=1):
        series = series + bernoulli / (2 * j * (2 * j - 1)) * power
        power = power / (shifted * shifted)
    return series - product


def _lgamma(x):
    wide = _wide(x)
    reflected = 1 - wide
    safe = _where(wide < 0.5, reflected, wide)
    positive = _lgamma_positive(safe)
    sine = torch.abs(torch.sin(math.pi * wide))
    negative = math.log(math.pi) - torch.log(sine) - positive
    out = _where(wide < 0.5, negative, positive)
    out = _where(torch.isinf(wide), torch.full_like(wide, math.inf), out)
    return out.to(_result_dtype(x))


def _digamma_positive(x):
    shifted = x + _SHIFT
    total = torch.zeros_like(x)
    for k in range(_SHIFT):
        total = total + 1 / (x + k)
    inverse_square = 1 / (shifted * shifted)
    series = torch.log(shifted) - 0.5 / shifted
    power = inverse_square
    for j, bernoulli in enumerate(_BERNOULLI[:6], start=1):
        series = series - bernoulli / (2 * j) * power
        power = power * inverse_square
    return series - total


def _digamma(x):
    wide = _wide(x)
    safe = _where(wide < 0.5, 1 - wide, wide)
    positive = _digamma_positive(safe)
    negative = positive - math.pi * _cot(math.pi * wide)
    out = _where(wide < 0.5, negative, positive)
    integer = (wide <= 0) & (wide == torch.floor(wide))
    out = _where(integer, torch.full_like(wide, math.nan), out)
    out = _where(wide == 0, torch.full_like(wide, -math.inf), out)
    return out.to(_result_dtype(x))


def _cot(x):
    return torch.cos(x) / torch.sin(x)  # ONNX Runtime has no double Tan


def _cot_derivative(n: int) -> list[float]:
    """Coefficients (lowest first) of P_n with d^n/dx^n cot(x) = P_n(cot(x))."""
    poly = [0.0, 1.0]
    for _ in range(n):
        derivative = [k * c for k, c in enumerate(poly)][1:] or [0.0]
        # P' * -(1 + c^2)
        grown = [0.0] * (len(derivative) + 2)
        for k, c in enumerate(derivative):
            grown[k] -= c
            grown[k + 2] -= c
        poly = grown
    return poly


def _polygamma_positive(n, x):
    """The n-th derivative of digamma for x >= 0.5 (float64), n >= 1."""
    shifted = x + _SHIFT
    total = torch.zeros_like(x)
    for k in range(_SHIFT):
        total = total + torch.pow(x + k, -(n + 1))
    series = math.factorial(n - 1) * torch.pow(shifted, -n)
    series = series + math.factorial(n) / 2 * torch.pow(shifted, -(n + 1))
    for j, bernoulli in enumerate(_BERNOULLI, start=1):
        factor = bernoulli * math.factorial(2 * j + n - 1) / math.factorial(2 * j)
        series = series + factor * torch.pow(shifted, -(2 * j + n))
    return (-1) ** (n + 1) * (series + math.factorial(n) * total)


def _polygamma(n, x):
    if n == 0:
        return _digamma(x)
    wide = _wide(x)
    safe = _where(wide < 0.5, 1 - wide, wide)
    positive = _polygamma_positive(n, safe)
    # reflection: psi_n(1-x) + (-1)^(n+1) psi_n(x) = (-1)^n pi d^n/dx^n cot(pi x)
    c = _cot(math.pi * wide)
    cot_n = torch.zeros_like(wide)
    for coefficient in reversed(_cot_derivative(n)):
        cot_n = cot_n * c + coefficient
    negative = (-1) ** (n + 1) * ((-1) ** n * math.pi ** (n + 1) * cot_n - positive)
    out = _where(wide < 0.5, negative, positive)
    integer = (wide <= 0) & (wide == torch.floor(wide))
    out = _where(integer, torch.full_like(wide, math.nan), out)
    return out.to(_result_dtype(x))


def _special_polygamma(n, x):
    return _polygamma(n, x)


def _mvlgamma(x, p):
    wide = _wide(x)
    out = torch.full_like(wide, p * (p - 1) / 4 * math.log(math.pi))
    for j in range(p):
        out = out + _lgamma(wide - j / 2)
    return out.to(_result_dtype(x))


# --- error-function family ------------------------------------------------------------------

_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
         -1.13520398, 1.48851587, -0.82215223, 0.17087277)  # fmt: skip


def _erfc_parts(z):
    """For z >= 0: (t, exponent) with erfc(z) = t * exp(exponent - z^2), relative error
    below 1.2e-7 (a Chebyshev fit in t = 1 / (1 + z/2))."""
    t = 1 / (1 + 0.5 * z)
    poly = torch.full_like(z, _ERFC[-1])
    for coefficient in reversed(_ERFC[:-1]):
        poly = coefficient + t * poly
    return t, poly


def _erfc(x):
    wide = _wide(x)
    z = torch.abs(wide)
    t, poly = _erfc_parts(z)
    tail = t * torch.exp(poly - z * z)
    return _where(wide >= 0, tail, 2 - tail).to(_result_dtype(x))


def _erfcx(x):
    wide = _wide(x)
    z = torch.abs(wide)
    t, poly = _erfc_parts(z)
    scaled = t * torch.exp(poly)
    out = _where(wide >= 0, scaled, 2 * torch.exp(wide * wide) - scaled)
    return out.to(_result_dtype(x))


def _log_ndtr(x):
    return _log_ndtr_wide(_wide(x)).to(_result_dtype(x))


def _log_ndtr_wide(wide):
    z = -wide / math.sqrt(2)
    t, poly = _erfc_parts(torch.abs(z))
    lower = math.log(0.5) + torch.log(t) + poly - z * z  # x <= 0: log(erfc(z) / 2)
    upper = torch.log1p(-0.5 * t * torch.exp(poly - z * z))  # x > 0: log(1 - erfc(|z|) / 2)
    return _where(wide <= 0, lower, upper)


def _erfinv_from(y, w):
    """erfinv(y) given w = -log((1 - y) * (1 + y)): Giles' single-precision fit (relative
    error below 4e-7; ONNX Runtime has no double Erf to refine it with)."""
    central = w - 2.5
    p = torch.full_like(w, 2.81022636e-08)
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):  # fmt: skip
        p = c + p * central
    tail = torch.sqrt(w) - 3
    q = torch.full_like(w, -0.000200214257)
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):  # fmt: skip
        q = c + q * tail
    return _where(w < 5, p, q) * y


def _erfinv(y):
    wide = _wide(y)
    w = -torch.log((1 - wide) * (1 + wide))
    out = _erfinv_from(wide, w)
    out = _where(torch.abs(wide) == 1, wide * math.inf, out)
    return out.to(_result_dtype(y))


def _ndtri(p):
    wide = _wide(p)
    low = _where(wide < 0.5, wide, 1 - wide)  # the tail probability, computed exactly
    # Abramowitz and Stegun 26.2.23 (error below 4.5e-4) for the lower-tail quantile...
    t = torch.sqrt(-2 * torch.log(low))
    numerator = 2.515517 + t * (0.802853 + t * 0.010328)
    denominator = 1 + t * (1.432788 + t * (0.189269 + t * 0.001308))
    x = numerator / denominator - t
    # ...then Newton on log(Phi(x)) = log(low), exact in the far tail too.
    for _ in range(3):
        log_phi = _log_ndtr_wide(x)
        ratio = torch.exp(log_phi + 0.5 * x * x + 0.5 * math.log(2 * math.pi))  # Phi / phi
        step = (log_phi - torch.log(low)) * ratio
        x = _where(torch.isfinite(step), x - step, x)
    out = _where(wide < 0.5, x, -x)
    out = _where(wide == 0, torch.full_like(wide, -math.inf), out)
    out = _where(wide == 1, torch.full_like(wide, math.inf), out)
    return out.to(_result_dtype(p))


def _incomplete_gamma(a, x, upper: bool):
    """Regularized incomplete gamma P(a, x) (or Q with ``upper``): its series below x = a + 1,
    its continued fraction (modified Lentz) above, with fixed numbers of terms."""
    if not isinstance(a, torch.Tensor):
        a = torch.full_like(x, float(a))
    if not isinstance(x, torch.Tensor):
        x = torch.full_like(a, float(x))
    dtype = _result_dtype(a)
    a, x = _wide(a), _wide(x)
    safe_x = torch.clamp(x, min=1e-300)
    safe_a = torch.clamp(a, min=1e-300)
    prefactor = torch.exp(a * torch.log(safe_x) - safe_x - _lgamma(safe_a).to(torch.float64))
    term = 1 / safe_a
    total = term
    for k in range(1, 80):
        term = term * safe_x / (safe_a + k)
        total = total + term
    lower = prefactor * total
    tiny = 1e-300
    b = safe_x + 1 - safe_a
    c = torch.full_like(b, 1 / tiny)
    d = 1 / torch.where(torch.abs(b) < tiny, torch.full_like(b, tiny), b)
    h = d
    for i in range(1, 40):
        an = -i * (i - safe_a)
        b = b + 2
        d = an * d + b
        d = 1 / torch.where(torch.abs(d) < tiny, torch.full_like(d, tiny), d)
        c = b + an / c
        c = torch.where(torch.abs(c) < tiny, torch.full_like(c, tiny), c)
        h = h * d * c
    upper_value = prefactor * h
    use_series = x < a + 1
    p = torch.where(use_series, lower, 1 - upper_value)
    q = torch.where(use_series, 1 - lower, upper_value)
    out = q if upper else p
    out = torch.where(x == 0, torch.full_like(out, 1.0 if upper else 0.0), out)
    out = torch.where(torch.isinf(x) & (x > 0), torch.full_like(out, 0.0 if upper else 1.0), out)
    invalid = (a < 0) | (x < 0) | torch.isnan(a) | torch.isnan(x)
    out = torch.where(invalid, torch.full_like(out, math.nan), out)
    return out.to(dtype)


DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    aten.igamma: lambda a, x: _incomplete_gamma(a, x, False),
    aten.igammac: lambda a, x: _incomplete_gamma(a, x, True),
    aten.lgamma: _lgamma,
    aten.digamma: _digamma,
    aten.special_digamma: _digamma,
    aten.polygamma: _polygamma,
    aten.special_polygamma: _special_polygamma,
    aten.mvlgamma: _mvlgamma,
    aten.special_multigammaln: _mvlgamma,
    aten.erfc: _erfc,
    aten.special_erfcx: _erfcx,
    aten.special_log_ndtr: _log_ndtr,
    aten.erfinv: _erfinv,
    aten.special_ndtri: _ndtri,
}
