"""The function half of the NumPy -> torch table: ``__array_function__`` calls.

Each entry of :data:`FUNCTIONS` is a small function with NumPy's signature that computes the same
result with torch operations (``np.sum``, ``np.concatenate``, ``np.einsum``...). It receives the
call's arguments as torch values (the TracedTensors of traced arrays, constant tensors for plain
arrays, Python scalars as they are) and its torch calls are recorded into the node's graph.
:mod:`leapp.trace.arrays.numpy_recorder` checks every result against NumPy's (dtype and values), so
an entry only has to get the semantics right, not the bookkeeping.

The other parts of the table are :data:`leapp.numpy.ufuncs.UFUNCS` (ufuncs, operators,
``ufunc.reduce``) and :mod:`leapp.trace.arrays.indexing` (indexing and item assignment); all of
them use the helpers of :mod:`leapp.numpy.operands` (:func:`~leapp.numpy.operands.tensor_of`,
:func:`~leapp.numpy.operands.promote`, :func:`~leapp.numpy.operands.operand`...). :data:`METADATA`
functions read only structure and run unrecorded; :data:`PYTHON_VALUES` functions turn traced data
into one Python value and are refused like ``bool()``.

A NumPy call missing here raises a TraceError naming it; add an entry to support it.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any

import numpy as np
import torch

from leapp.numpy.operands import (
    NO_VALUE,
    UnsupportedFormError,
    cast,
    numpy_dtype,
    operand,
    promote,
    reject,
    tensor_of,
    torch_dtype,
)

__all__ = ["FUNCTIONS", "METADATA", "PYTHON_VALUES", "reduce_axes"]


def _floating(x: torch.Tensor) -> torch.Tensor:
    return x if x.is_floating_point() or x.is_complex() else x.to(torch.float64)


def _keep(keepdims: Any) -> bool:
    return False if keepdims is NO_VALUE else bool(keepdims)


def _dims(x: torch.Tensor, axis: Any) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(x.ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return tuple(operator.index(a) % max(x.ndim, 1) for a in axes)


# ------------------------------------------------------------------------ reductions
def reduce_axes(kind: str, x: torch.Tensor, axis: Any, keepdims: Any) -> torch.Tensor:
    dims, keep = _dims(x, axis), _keep(keepdims)
    if not dims:
        return torch.clone(x)
    if kind == "prod":
        for dim in sorted(dims, reverse=True):
            x = torch.prod(x, dim, keepdim=keep)
        return x
    function = {"sum": torch.sum, "max": torch.amax, "min": torch.amin, "mean": torch.mean,
                "any": torch.any, "all": torch.all}[kind]  # fmt: skip
    return function(x, dim=dims, keepdim=keep)


def _reduction(kind: str, floating: bool = False, typed: bool = True):
    def translate(
        a, axis=None, dtype=None, out=None, keepdims=NO_VALUE, initial=NO_VALUE, where=NO_VALUE
    ):
        reject(out=out, initial=initial, where=where)
        x = tensor_of(a, dtype if typed else None)
        return reduce_axes(kind, _floating(x) if floating else x, axis, keepdims)

    return translate


def _untyped(kind: str):
    def translate(a, axis=None, out=None, keepdims=NO_VALUE, initial=NO_VALUE, where=NO_VALUE):
        reject(out=out, initial=initial, where=where)
        return reduce_axes(kind, tensor_of(a), axis, keepdims)

    return translate


def _deviation(square: bool):
    def translate(a, axis=None, dtype=None, out=None, ddof=0, keepdims=NO_VALUE, *, where=NO_VALUE,
                  mean=NO_VALUE, correction=NO_VALUE):  # fmt: skip
        reject(out=out, where=where, mean=mean)
        x = _floating(tensor_of(a, dtype))
        correction = ddof if correction is NO_VALUE else correction
        function = torch.var if square else torch.std
        return function(x, dim=_dims(x, axis), correction=correction, keepdim=_keep(keepdims))

    return translate


def _arg(function):
    def translate(a, axis=None, out=None, *, keepdims=NO_VALUE):
        reject(out=out)
        x = tensor_of(a)
        x = x.to(torch.uint8) if x.dtype == torch.bool else x
        if axis is None:
            flat = function(torch.reshape(x, (-1,)), 0)
            return torch.reshape(flat, (1,) * x.ndim) if _keep(keepdims) else flat
        return function(x, dim=axis, keepdim=_keep(keepdims))

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
    x = _floating(tensor_of(x))
    dims = None if axis is None else _dims(x, axis)
    if ord is not None and not ((dims is None and x.ndim == 1) or (dims and len(dims) == 1)):
        raise UnsupportedFormError("matrix norms (ord= over two axes) are not supported")
    return torch.linalg.vector_norm(x, 2 if ord is None else ord, dim=dims, keepdim=keepdims)


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


# ---------------------------------------------------------------------------- shapes
def _shape_of(shape: Any) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else shape
    return tuple(operator.index(s) for s in shape)


def _reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    if order not in ("C", "A"):
        raise UnsupportedFormError(f"order={order!r} is not supported (only C order)")
    result = torch.reshape(tensor_of(a), _shape_of(newshape if shape is None else shape))
    return torch.clone(result) if copy else result


def _ravel(a, order="C"):
    return _reshape(a, (-1,), "C" if order in ("C", "A") else order)


def _expand_dims(a, axis):
    x = tensor_of(a)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    shape = list(x.shape)
    for position in sorted(operator.index(p) % (x.ndim + len(axes)) for p in axes):
        shape.insert(position, 1)
    return torch.reshape(x, tuple(shape))


def _squeeze(a, axis=None):
    x = tensor_of(a)
    dims = [d for d, size in enumerate(x.shape) if size == 1] if axis is None else _dims(x, axis)
    return torch.reshape(x, tuple(s for d, s in enumerate(x.shape) if d not in dims))


def _atleast(ndim: int):
    def one(value):
        x = tensor_of(value)
        shape = tuple(x.shape)
        if len(shape) >= ndim:
            return x
        padded = {1: (1,), 2: (1, *shape) if shape else (1, 1)}.get(ndim)
        if ndim == 3:
            padded = {0: (1, 1, 1), 1: (1, *shape, 1), 2: (*shape, 1)}[len(shape)]
        return torch.reshape(x, padded)

    def translate(*arrays):
        results = tuple(one(a) for a in arrays)
        return results[0] if len(results) == 1 else results

    return translate


def _joined(arrays, dtype):
    tensors = [tensor_of(a) for a in arrays]
    dtype = promote(*tensors) if dtype is None else np.dtype(dtype)
    return [cast(t, dtype) for t in tensors]


def _concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    reject(out=out)
    tensors = _joined(arrays, dtype)
    if axis is None:
        tensors, axis = [torch.reshape(t, (-1,)) for t in tensors], 0
    return torch.cat(tensors, dim=axis)


def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    reject(out=out)
    return torch.stack(_joined(arrays, dtype), dim=axis)


def _hstack(tup, *, dtype=None, casting="same_kind"):
    tensors = [_atleast(1)(t) for t in _joined(tup, dtype)]
    return torch.cat(tensors, dim=0 if all(t.ndim == 1 for t in tensors) else 1)


def _vstack(tup, *, dtype=None, casting="same_kind"):
    return torch.cat([_atleast(2)(t) for t in _joined(tup, dtype)], dim=0)


def _split(array_split: bool):
    def translate(ary, indices_or_sections, axis=0):
        x = tensor_of(ary)
        size = x.shape[axis]
        if isinstance(indices_or_sections, (int, np.integer)):
            count, extra = divmod(size, int(indices_or_sections))
            sizes = [count + 1] * extra + [count] * (int(indices_or_sections) - extra)
            bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
        else:
            bounds = [0, *[operator.index(i) for i in indices_or_sections], size]
        prefix = (slice(None),) * (axis % x.ndim)
        return [x[(*prefix, slice(a, b))] for a, b in itertools.pairwise(bounds)]

    return translate


def _tile(A, reps):  # noqa: N803 - NumPy's name
    x, reps = tensor_of(A), _shape_of(reps)
    return x.repeat((1,) * (x.ndim - len(reps)) + reps)  # exports as ONNX Tile; torch.tile not


def _flip(m, axis=None):
    x = tensor_of(m)
    return torch.flip(x, _dims(x, axis))


def _roll(a, shift, axis=None):
    x = tensor_of(a)
    if axis is None:  # NumPy rolls the flattened array
        return torch.reshape(torch.roll(torch.reshape(x, (-1,)), shift, 0), tuple(x.shape))
    return torch.roll(x, shift, axis)


def _repeat(a, repeats, axis=None):
    if not isinstance(repeats, (int, np.integer)):
        raise UnsupportedFormError("repeats must be one integer")
    return torch.repeat_interleave(tensor_of(a), int(repeats), dim=axis)


def _sort(a, axis=-1, kind=None, order=None, *, stable=None):
    reject(order=order)
    x = tensor_of(a)
    if axis is None:
        x, axis = torch.reshape(x, (-1,)), 0
    return torch.sort(x, dim=axis)[0]  # values only: how ties are ordered does not show


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
    tensors = _joined(operands[1:], dtype)
    return torch.einsum(operands[0], *tensors)


def _outer(a, b, out=None):
    reject(out=out)
    x, y = _joined((a, b), None)
    return torch.outer(torch.reshape(x, (-1,)), torch.reshape(y, (-1,)))


def _plain(function):
    return lambda a, *args, **kwargs: function(tensor_of(a), *args, **kwargs)


# --------------------------------------------------------------------------- functions
FUNCTIONS: dict[Any, Any] = {
    np.sum: _reduction("sum"), np.prod: _reduction("prod"),
    np.mean: _reduction("mean", floating=True), np.max: _untyped("max"),
    np.amax: _untyped("max"), np.min: _untyped("min"), np.amin: _untyped("min"),
    np.any: _untyped("any"), np.all: _untyped("all"), np.std: _deviation(False),
    np.var: _deviation(True), np.argmax: _arg(torch.argmax), np.argmin: _arg(torch.argmin),
    np.cumsum: _cumulative(torch.cumsum), np.cumprod: _cumulative(torch.cumprod),
    np.linalg.norm: _norm, np.clip: _clip, np.where: _where, np.round: _round,
    np.around: _round, np.nan_to_num: _nan_to_num, np.isclose: _isclose,
    np.zeros_like: _like(0), np.ones_like: _like(1), np.empty_like: _like(0),
    np.full_like: _like(None), np.copy: _plain(torch.clone), np.reshape: _reshape,
    np.ravel: _ravel, np.transpose: lambda a, axes=None: torch.permute(
        tensor_of(a), tuple(reversed(range(np.ndim(a)))) if axes is None else tuple(axes)),
    np.swapaxes: _plain(torch.transpose), np.moveaxis: _plain(torch.movedim),
    np.expand_dims: _expand_dims, np.squeeze: _squeeze, np.atleast_1d: _atleast(1),
    np.atleast_2d: _atleast(2), np.atleast_3d: _atleast(3), np.concatenate: _concatenate,
    np.stack: _stack, np.hstack: _hstack, np.vstack: _vstack,
    np.broadcast_to: lambda array, shape, subok=False: torch.broadcast_to(
        tensor_of(array), _shape_of(shape)),
    np.tile: _tile,
    np.repeat: _repeat, np.flip: _flip, np.fliplr: lambda m: torch.flip(tensor_of(m), (1,)),
    np.flipud: lambda m: torch.flip(tensor_of(m), (0,)),
    np.roll: _roll,
    np.split: _split(False), np.array_split: _split(True), np.triu: _plain(torch.triu),
    np.tril: _plain(torch.tril), np.sort: _sort, np.dot: _dot, np.einsum: _einsum,
    np.outer: _outer,
}  # fmt: skip
if hasattr(np, "matrix_transpose"):
    FUNCTIONS[np.matrix_transpose] = lambda x: torch.transpose(tensor_of(x), -2, -1)

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
