"""The function half of the NumPy -> torch table: ``__array_function__`` calls.

Each entry of :data:`FUNCTIONS` is a small function with NumPy's signature that computes the same
result with torch operations (``np.sum``, ``np.concatenate``, ``np.einsum``...). It receives the
call's arguments as torch values (the TracedTensors of traced arrays, constant tensors for plain
arrays, Python scalars as they are) and its torch calls are recorded into the node's graph.
:mod:`leapp.trace.arrays.numpy_recorder` checks every result against NumPy's (dtype and values), so
an entry only has to get the semantics right, not the bookkeeping.

The reductions (:data:`leapp.numpy.reductions.REDUCTIONS`) and the shape functions
(:data:`leapp.numpy.shapes.SHAPES`) are in :data:`FUNCTIONS` too; the elementwise functions and
linear algebra are here. The other parts of the table are :data:`leapp.numpy.ufuncs.UFUNCS`
(ufuncs, operators, ``ufunc.reduce``) and :mod:`leapp.trace.arrays.indexing` (indexing and item
assignment); all of
them use the helpers of :mod:`leapp.numpy.operands` (:func:`~leapp.numpy.operands.tensor_of`,
:func:`~leapp.numpy.operands.promote`, :func:`~leapp.numpy.operands.operand`...). :data:`METADATA`
functions read only structure and run unrecorded; :data:`PYTHON_VALUES` functions turn traced data
into one Python value and are refused like ``bool()``.

A NumPy call missing here raises a TraceError naming it; add an entry to support it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from leapp.numpy.operands import (
    NO_VALUE,
    UnsupportedFormError,
    numpy_dtype,
    on_tensor,
    operand,
    promote,
    reject,
    tensor_of,
    torch_dtype,
)
from leapp.numpy.reductions import REDUCTIONS
from leapp.numpy.shapes import SHAPES, joined

__all__ = ["FUNCTIONS", "METADATA", "PYTHON_VALUES"]


# ----------------------------------------------------------------------- elementwise
def _clip(a, a_min=NO_VALUE, a_max=NO_VALUE, out=None, *, min=NO_VALUE, max=NO_VALUE, **kwargs):
    reject(out=out, **kwargs)
    low = None if a_min is NO_VALUE and min is NO_VALUE else (min if a_min is NO_VALUE else a_min)
    high = None if a_max is NO_VALUE and max is NO_VALUE else (max if a_max is NO_VALUE else a_max)
    dtype = promote(a, low, high)
    x = operand(a, dtype)
    bounds = [b for b in (low, high) if b is not None]
    tensors = any(isinstance(b, torch.Tensor) or np.ndim(b) > 0 for b in bounds)
    low, high = (None if b is None else operand(b, dtype, not tensors) for b in (low, high))
    return torch.clamp(x, low, high)


def _where(condition, x=NO_VALUE, y=NO_VALUE):
    if x is NO_VALUE or y is NO_VALUE:
        raise UnsupportedFormError(
            "np.where(condition) returns indices whose number depends on the data; use "
            "np.where(condition, a, b) to keep the shape"
        )
    mask = tensor_of(condition)
    mask = mask if mask.dtype == torch.bool else mask != 0
    dtype = promote(x, y)
    return torch.where(mask, operand(x, dtype, False), operand(y, dtype, False))


def _round(a, decimals=0, out=None):
    reject(out=out)
    x = tensor_of(a)
    if not x.is_floating_point():
        if decimals < 0:
            raise UnsupportedFormError("rounding integers to negative decimals is not supported")
        return torch.clone(x)
    return torch.round(x, decimals=decimals) if decimals else torch.round(x)


def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    x = tensor_of(x)
    if not x.is_floating_point():
        return torch.clone(x)
    return torch.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


def _isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    dtype = promote(a, b)
    x, y = tensor_of(a, dtype), tensor_of(b, dtype)
    close = torch.abs(x - y) <= atol + rtol * torch.abs(y)  # NumPy's formula; ONNX lacks isclose
    close = torch.logical_or(close, x == y)  # equal infinities
    return torch.logical_or(close, torch.isnan(x) & torch.isnan(y)) if equal_nan else close


def _like(fill: Any):
    """``np.zeros_like`` & co.: only the shape of ``a`` matters, so the result is a constant
    (plus the fill value when that is traced)."""

    def translate(a, *args, dtype=None, order="K", subok=True, shape=None, device=None):
        value = fill if fill is not None else args[0]
        dtype = args[1] if len(args) > 1 else dtype
        reject(shape=shape)
        x = tensor_of(a)
        target = x.dtype if dtype is None else torch_dtype(dtype)
        if isinstance(value, torch.Tensor) or np.ndim(value) > 0:
            return torch.zeros(tuple(x.shape), dtype=target) + tensor_of(value).to(target)
        scalar = np.asarray(value, dtype=numpy_dtype(target)).item()
        return torch.full(tuple(x.shape), scalar, dtype=target)

    return translate


# ------------------------------------------------------------------- linear algebra
def _dot(a, b, out=None):
    reject(out=out)
    dtype = promote(a, b)
    x, y = tensor_of(a, dtype), tensor_of(b, dtype)
    if x.ndim == 0 or y.ndim == 0:
        return torch.mul(x, y)
    if x.ndim > 2 or y.ndim > 2:
        raise UnsupportedFormError(
            "np.dot of arrays with more than 2 dimensions; use np.matmul/einsum"
        )
    return torch.matmul(x, y)


def _einsum(*operands, out=None, optimize=False, dtype=None, casting="safe", order="K"):
    reject(out=out)
    if not isinstance(operands[0], str):
        raise UnsupportedFormError("the interleaved operand form; pass the subscripts as a string")
    tensors = joined(operands[1:], dtype)
    return torch.einsum(operands[0], *tensors)


def _outer(a, b, out=None):
    reject(out=out)
    x, y = joined((a, b), None)
    return torch.outer(torch.reshape(x, (-1,)), torch.reshape(y, (-1,)))


# --------------------------------------------------------------------------- functions
FUNCTIONS: dict[Any, Any] = {
    **REDUCTIONS,
    **SHAPES,
    np.clip: _clip,
    np.where: _where,
    np.round: _round,
    np.around: _round,
    np.nan_to_num: _nan_to_num,
    np.isclose: _isclose,
    np.zeros_like: _like(0),
    np.ones_like: _like(1),
    np.empty_like: _like(0),
    np.full_like: _like(None),
    np.copy: on_tensor(torch.clone),
    np.triu: on_tensor(torch.triu),
    np.tril: on_tensor(torch.tril),
    np.dot: _dot,
    np.einsum: _einsum,
    np.outer: _outer,
}

# Functions about structure, not values: run on plain arrays, nothing recorded.
METADATA = {
    getattr(np, name)
    for name in (
        "shape ndim size iscomplexobj isrealobj may_share_memory shares_memory array_repr "
        "array_str array2string result_type can_cast min_scalar_type isfortran"
    ).split()
    if hasattr(np, name)
}
# Functions that turn traced data into one Python value.
PYTHON_VALUES = {np.allclose, np.array_equal, np.array_equiv}
