"""Reductions of the NumPy -> torch table: ``np.sum``, ``np.mean``, ``np.max``, ``np.std``,
``np.argmax``, ``np.cumsum``, ``np.linalg.norm`` and their kin.

Each entry of :data:`REDUCTIONS` takes NumPy's signature and reduces over NumPy's ``axis``
(None for all, an int or a tuple) with NumPy's ``keepdims``; :func:`reduce_axes` is shared with
``ufunc.reduce`` (:mod:`leapp.numpy.ufuncs`). Integer means, deviations and norms are computed
in float64, as NumPy does.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import torch

from leapp.numpy.operands import NO_VALUE, UnsupportedFormError, reject, tensor_of

__all__ = ["REDUCTIONS", "dims_of", "reduce_axes"]

_REDUCTIONS = {
    "sum": torch.sum,
    "max": torch.amax,
    "min": torch.amin,
    "mean": torch.mean,
    "any": torch.any,
    "all": torch.all,
}


def _as_floating(x: torch.Tensor) -> torch.Tensor:
    """``x``, or ``x`` in float64 when it holds integers or booleans."""
    return x if x.is_floating_point() or x.is_complex() else x.to(torch.float64)


def _keep_dims(keepdims: Any) -> bool:
    """NumPy's ``keepdims`` (unset: False)."""
    return False if keepdims is NO_VALUE else bool(keepdims)


def dims_of(x: torch.Tensor, axis: Any) -> tuple[int, ...]:
    """The dimensions of ``x`` NumPy's ``axis`` names (None: all), non-negative."""
    if axis is None:
        return tuple(range(x.ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return tuple(operator.index(a) % max(x.ndim, 1) for a in axes)


def reduce_axes(kind: str, x: torch.Tensor, axis: Any, keepdims: Any) -> torch.Tensor:
    """``x`` reduced over ``axis`` (NumPy's: None for all, an int or a tuple) by ``kind`` (a key
    of :data:`_REDUCTIONS`, or ``"prod"``), its dimensions kept when ``keepdims`` says so."""
    dims, keep = dims_of(x, axis), _keep_dims(keepdims)
    if not dims:
        return torch.clone(x)
    if kind == "prod":
        for dim in sorted(dims, reverse=True):
            x = torch.prod(x, dim, keepdim=keep)
        return x
    return _REDUCTIONS[kind](x, dim=dims, keepdim=keep)


def _reduction(kind: str, floating: bool = False, typed: bool = True):
    def translate(
        a, axis=None, dtype=None, out=None, keepdims=NO_VALUE, initial=NO_VALUE, where=NO_VALUE
    ):
        reject(out=out, initial=initial, where=where)
        x = tensor_of(a, dtype if typed else None)
        return reduce_axes(kind, _as_floating(x) if floating else x, axis, keepdims)

    return translate


def _untyped(kind: str):
    def translate(a, axis=None, out=None, keepdims=NO_VALUE, initial=NO_VALUE, where=NO_VALUE):
        reject(out=out, initial=initial, where=where)
        return reduce_axes(kind, tensor_of(a), axis, keepdims)

    return translate


def _deviation(square: bool):
    def translate(
        a,
        axis=None,
        dtype=None,
        out=None,
        ddof=0,
        keepdims=NO_VALUE,
        *,
        where=NO_VALUE,
        mean=NO_VALUE,
        correction=NO_VALUE,
    ):
        reject(out=out, where=where, mean=mean)
        x = _as_floating(tensor_of(a, dtype))
        correction = ddof if correction is NO_VALUE else correction
        function = torch.var if square else torch.std
        return function(
            x, dim=dims_of(x, axis), correction=correction, keepdim=_keep_dims(keepdims)
        )

    return translate


def _arg(function):
    def translate(a, axis=None, out=None, *, keepdims=NO_VALUE):
        reject(out=out)
        x = tensor_of(a)
        x = x.to(torch.uint8) if x.dtype == torch.bool else x
        if axis is None:
            flat = function(torch.reshape(x, (-1,)), 0)
            return torch.reshape(flat, (1,) * x.ndim) if _keep_dims(keepdims) else flat
        return function(x, dim=axis, keepdim=_keep_dims(keepdims))

    return translate


def _cumulative(function):
    def translate(a, axis=None, dtype=None, out=None):
        reject(out=out)
        x = tensor_of(a, dtype)
        if axis is None:
            x, axis = torch.reshape(x, (-1,)), 0
        return function(x, dim=axis)

    return translate


def _norm(x, ord=None, axis=None, keepdims=False):
    x = _as_floating(tensor_of(x))
    dims = None if axis is None else dims_of(x, axis)
    if ord is not None and not ((dims is None and x.ndim == 1) or (dims and len(dims) == 1)):
        raise UnsupportedFormError("matrix norms (ord= over two axes) are not supported")
    return torch.linalg.vector_norm(x, 2 if ord is None else ord, dim=dims, keepdim=keepdims)


REDUCTIONS: dict[Any, Any] = {
    np.sum: _reduction("sum"),
    np.prod: _reduction("prod"),
    np.mean: _reduction("mean", floating=True),
    np.max: _untyped("max"),
    np.amax: _untyped("max"),
    np.min: _untyped("min"),
    np.amin: _untyped("min"),
    np.any: _untyped("any"),
    np.all: _untyped("all"),
    np.std: _deviation(False),
    np.var: _deviation(True),
    np.argmax: _arg(torch.argmax),
    np.argmin: _arg(torch.argmin),
    np.cumsum: _cumulative(torch.cumsum),
    np.cumprod: _cumulative(torch.cumprod),
    np.linalg.norm: _norm,
}
