"""The ufunc half of the NumPy -> torch table: ufuncs, operators and ufunc methods.

:data:`UFUNCS` maps each ufunc to its torch function. Before the call, operands are cast to the
dtypes of the loop NumPy itself picks for them (``ufunc.resolve_dtypes``), so mixed-dtype
arithmetic computes exactly as NumPy does: ``int / int`` in float64, ``float32 + 0.1`` in
float32. Python scalars stay literals where the torch function accepts one as its second
operand (:data:`_LITERAL`); otherwise they become 0-d constants.

A few ufuncs are written as small formulas of torch operators instead of their own torch
operator, because the ONNX exporter lacks the latter (``np.hypot``, ``np.trunc``, ``np.fmax``,
the hyperbolic functions, degree/radian conversion). ``ufunc.reduce`` (``np.add.reduce``...)
and ``ufunc.accumulate`` are supported for the ufuncs that have a torch reduction.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from leapp.numpy.operands import NO_VALUE, numpy_dtype, operand, promote, reject, tensor_of
from leapp.numpy.reductions import reduce_axes

__all__ = ["UFUNCS", "ufunc_translation"]


def _divmod(a, b):
    return torch.floor_divide(a, b), torch.remainder(a, b)


# Ufuncs whose own torch operator the ONNX exporter lacks, written with operators every backend
# exports (the same formulas torch uses, so results agree to rounding).
def _hypot(a, b):
    return torch.sqrt(torch.square(a) + torch.square(b))


def _trunc(x):
    return torch.where(x < 0, torch.ceil(x), torch.floor(x))


def _fmax(a, b):
    return torch.where(torch.isnan(b), a, torch.where(torch.isnan(a), b, torch.maximum(a, b)))


def _fmin(a, b):
    return torch.where(torch.isnan(b), a, torch.where(torch.isnan(a), b, torch.minimum(a, b)))


def _sinh(x):
    return (torch.exp(x) - torch.exp(-x)) / 2


def _cosh(x):
    return (torch.exp(x) + torch.exp(-x)) / 2


def _arcsinh(x):
    return torch.sign(x) * torch.log(torch.abs(x) + torch.sqrt(torch.square(x) + 1))


def _arccosh(x):
    return torch.log(x + torch.sqrt(torch.square(x) - 1))


def _arctanh(x):
    return (torch.log1p(x) - torch.log1p(-x)) / 2


def _scale(factor: float):
    return lambda x: torch.mul(x, factor)


# ------------------------------------------------------------------------------ ufuncs
_LITERAL = {  # ufuncs whose torch function takes a Python scalar as its second operand
    getattr(np, name)
    for name in (
        "add subtract multiply true_divide floor_divide remainder fmod power float_power equal "
        "not_equal less less_equal greater greater_equal bitwise_and bitwise_or bitwise_xor "
        "left_shift right_shift copysign divmod"
    ).split()
}
UFUNCS: dict[np.ufunc, Any] = {
    np.add: torch.add, np.subtract: torch.sub, np.multiply: torch.mul,
    np.true_divide: torch.div, np.floor_divide: torch.floor_divide,
    np.remainder: torch.remainder, np.fmod: torch.fmod, np.power: torch.pow,
    np.float_power: torch.pow, np.negative: torch.neg, np.positive: torch.positive,
    np.absolute: torch.abs, np.fabs: torch.abs, np.sign: torch.sign,
    np.reciprocal: torch.reciprocal, np.square: torch.square, np.sqrt: torch.sqrt,
    np.exp: torch.exp, np.exp2: lambda x: torch.pow(2.0, x), np.expm1: torch.expm1,
    np.log: torch.log,
    np.log2: torch.log2, np.log10: torch.log10, np.log1p: torch.log1p, np.sin: torch.sin,
    np.cos: torch.cos, np.tan: torch.tan, np.arcsin: torch.asin, np.arccos: torch.acos,
    np.arctan: torch.atan, np.arctan2: torch.atan2, np.sinh: _sinh, np.cosh: _cosh,
    np.tanh: torch.tanh, np.arcsinh: _arcsinh, np.arccosh: _arccosh, np.arctanh: _arctanh,
    np.hypot: _hypot, np.deg2rad: _scale(np.pi / 180), np.rad2deg: _scale(180 / np.pi),
    np.degrees: _scale(180 / np.pi), np.radians: _scale(np.pi / 180),
    np.floor: torch.floor, np.ceil: torch.ceil, np.trunc: _trunc, np.rint: torch.round,
    np.maximum: torch.maximum, np.minimum: torch.minimum, np.fmax: _fmax, np.fmin: _fmin,
    np.equal: torch.eq, np.not_equal: torch.ne, np.less: torch.lt,
    np.less_equal: torch.le, np.greater: torch.gt, np.greater_equal: torch.ge,
    np.logical_and: torch.logical_and, np.logical_or: torch.logical_or,
    np.logical_xor: torch.logical_xor, np.logical_not: torch.logical_not,
    np.bitwise_and: torch.bitwise_and, np.bitwise_or: torch.bitwise_or,
    np.bitwise_xor: torch.bitwise_xor, np.invert: torch.bitwise_not,
    np.left_shift: torch.bitwise_left_shift, np.right_shift: torch.bitwise_right_shift,
    np.isnan: torch.isnan, np.isinf: torch.isinf, np.isfinite: torch.isfinite,
    np.signbit: torch.signbit, np.copysign: torch.copysign, np.logaddexp: torch.logaddexp,
    np.logaddexp2: torch.logaddexp2, np.heaviside: torch.heaviside,
    np.nextafter: torch.nextafter, np.matmul: torch.matmul, np.divmod: _divmod,
}  # fmt: skip
_REDUCE = {
    np.add: "sum",
    np.multiply: "prod",
    np.maximum: "max",
    np.minimum: "min",
    np.logical_and: "all",
    np.logical_or: "any",
}
_ACCUMULATE = {np.add: torch.cumsum, np.multiply: torch.cumprod}
# On booleans the bitwise operators are the logical ones, which the ONNX exporter knows.
_BOOLEAN = {
    torch.bitwise_and: torch.logical_and,
    torch.bitwise_or: torch.logical_or,
    torch.bitwise_xor: torch.logical_xor,
    torch.bitwise_not: torch.logical_not,
}


def ufunc_translation(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """The torch equivalent of ``ufunc.<method>(*inputs, **kwargs)``, or None if there is none."""
    if method == "reduce" and ufunc in _REDUCE:
        return functools.partial(_ufunc_reduce, _REDUCE[ufunc])
    if method == "accumulate" and ufunc in _ACCUMULATE:
        return functools.partial(_ufunc_accumulate, _ACCUMULATE[ufunc])
    if method != "__call__" or ufunc not in UFUNCS:
        return None
    loop = _loop_dtypes(ufunc, inputs, kwargs.get("dtype"))
    function = UFUNCS[ufunc]
    if loop is not None and all(dtype == np.bool_ for dtype in loop):
        function = _BOOLEAN.get(function, function)
    return functools.partial(_apply_ufunc, function, loop, ufunc in _LITERAL)


def _apply_ufunc(
    function,
    loop,
    literal,
    *operands,
    dtype=None,
    casting=None,
    order=None,
    subok=None,
    signature=None,
    **other,
):
    reject(signature=signature, **other)
    loop = loop or (promote(*operands),) * len(operands)
    cast = [
        operand(v, t, literal and i > 0)
        for i, (v, t) in enumerate(zip(operands, loop, strict=True))
    ]
    return function(*cast)


def _loop_dtypes(ufunc: np.ufunc, inputs: tuple, dtype: Any) -> tuple[np.dtype, ...] | None:
    """The input dtypes of the loop NumPy runs for these inputs (None if it cannot say)."""

    def kind(value):
        if isinstance(value, (np.ndarray, np.generic)):
            return value.dtype
        if isinstance(value, torch.Tensor):
            return numpy_dtype(value.dtype)
        if isinstance(value, bool):
            return np.dtype(bool)
        return type(value) if isinstance(value, (int, float, complex)) else np.asarray(value).dtype

    try:
        kinds = (*map(kind, inputs), *(None,) * ufunc.nout)
        if dtype is None:
            return ufunc.resolve_dtypes(kinds)[: ufunc.nin]
        signature = (None,) * ufunc.nin + (np.dtype(dtype),) * ufunc.nout
        return ufunc.resolve_dtypes(kinds, signature=signature)[: ufunc.nin]
    except Exception:  # NumPy could not say: fall back to its result_type promotion
        return None


def _ufunc_reduce(
    kind, array, axis=0, dtype=None, out=None, keepdims=False, initial=NO_VALUE, where=True
):
    reject(out=out, initial=initial, where=where)
    x = tensor_of(array, dtype)
    if kind in ("any", "all"):
        x = x if x.dtype == torch.bool else x != 0
    return reduce_axes(kind, x, axis, keepdims)


def _ufunc_accumulate(function, array, axis=0, dtype=None, out=None):
    reject(out=out)
    return function(tensor_of(array, dtype), dim=axis)
