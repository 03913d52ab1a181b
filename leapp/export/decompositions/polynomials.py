"""Chebyshev polynomials of the four kinds (and their shifted forms) by their closed forms.

``torch.special.chebyshev_polynomial_t(x, n)`` takes the degree as a tensor, so a recurrence
would run a number of steps read from the input's values. The trigonometric forms do not:
with theta = acos(x), T_n = cos(n theta), U_n = sin((n+1) theta) / sin(theta),
V_n = cos((n+1/2) theta) / cos(theta/2), W_n = sin((n+1/2) theta) / sin(theta/2), and the
hyperbolic forms with acosh(|x|) outside [-1, 1]. Degrees are truncated to integers and a
negative degree gives 0, as in eager PyTorch. Computed in float64 from angles in float32
(ONNX Runtime's Acos and Acosh), so degrees beyond a few hundred lose digits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from leapp.export.decompositions.special import _result_dtype, _wide

__all__ = ["DECOMPOSITIONS"]

aten = torch.ops.aten


def _operands(x, n):
    if not isinstance(x, torch.Tensor):
        x = torch.full_like(n, float(x), dtype=torch.get_default_dtype())
    if not isinstance(n, torch.Tensor):
        n = torch.full_like(x, float(n))
    wide, degree = _wide(x), torch.trunc(_wide(n))
    odd = (degree - 2 * torch.floor(degree / 2)) == 1
    return x, wide, degree, torch.where(odd, -1.0, 1.0).to(torch.float64)


def _finish(value, degree, source):
    value = torch.where(degree < 0, torch.zeros_like(value), value)
    return value.to(_result_dtype(source))


def _chebyshev(kind: str, shifted: bool) -> Callable[..., torch.Tensor]:
    def polynomial(x, n):
        source, wide, degree, parity = _operands(x, n)
        if shifted:
            wide = 2 * wide - 1
        inside = torch.clamp(wide, -1.0, 1.0)
        # ONNX Runtime has Acos and Acosh in float32 only.
        theta = torch.acos(inside.to(torch.float32)).to(torch.float64)
        outside = torch.acosh(torch.clamp(torch.abs(wide), min=1.0).to(torch.float32))
        outside = outside.to(torch.float64)
        negative = wide < 0
        if kind == "t":
            within = torch.cos(degree * theta)
            beyond = torch.cosh(degree * outside) * torch.where(negative, parity, 1.0)
            edge = torch.where(negative, parity, 1.0)
        elif kind == "u":
            within = torch.sin((degree + 1) * theta) / torch.sin(theta)
            beyond = torch.sinh((degree + 1) * outside) / torch.sinh(outside)
            beyond = beyond * torch.where(negative, parity, 1.0)
            edge = (degree + 1) * torch.where(negative, parity, 1.0)
        else:
            half = degree + 0.5
            cos_form = (torch.cos(half * theta) / torch.cos(theta / 2),
                        torch.cosh(half * outside) / torch.cosh(outside / 2))  # fmt: skip
            sin_form = (torch.sin(half * theta) / torch.sin(theta / 2),
                        torch.sinh(half * outside) / torch.sinh(outside / 2))  # fmt: skip
            # V(-x) = (-1)^n W(x), W(-x) = (-1)^n V(x): outside [-1, 1] on the left the
            # other kind's hyperbolic form applies.
            first, second = (cos_form, sin_form) if kind == "v" else (sin_form, cos_form)
            within = first[0]
            beyond = torch.where(negative, parity * second[1], first[1])
            one_right = 1.0 if kind == "v" else 2 * degree + 1
            one_left = parity * (2 * degree + 1) if kind == "v" else parity
            edge = torch.where(negative, one_left, torch.ones_like(parity) * one_right)
        value = torch.where(torch.abs(wide) < 1, within, beyond)
        value = torch.where(torch.abs(wide) == 1, edge, value)
        value = torch.where(torch.isnan(wide), wide, value)
        return _finish(value, degree, source)

    return polynomial


DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    getattr(aten, f"special_{'shifted_' if shifted else ''}chebyshev_polynomial_{kind}"): (
        _chebyshev(kind, shifted)
    )
    for kind in "tuvw"
    for shifted in (False, True)
}
