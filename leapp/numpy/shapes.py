"""Shapes and arrangement in the NumPy -> torch table: ``np.reshape``, ``np.transpose``,
``np.concatenate``, ``np.stack``, ``np.split``, ``np.tile``, ``np.flip``, ``np.roll``, ``np.sort``
and their kin.

Each entry of :data:`SHAPES` takes NumPy's signature and moves values without computing new
ones; arrays joined into one are cast to the dtype NumPy promotes them to first.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any

import numpy as np
import torch

from leapp.numpy.operands import (
    UnsupportedFormError,
    cast,
    on_tensor,
    promote,
    reject,
    tensor_of,
)
from leapp.numpy.reductions import dims_of

__all__ = ["SHAPES", "joined"]


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
    dims = [d for d, size in enumerate(x.shape) if size == 1] if axis is None else dims_of(x, axis)
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


def joined(arrays, dtype):
    tensors = [tensor_of(a) for a in arrays]
    dtype = promote(*tensors) if dtype is None else np.dtype(dtype)
    return [cast(t, dtype) for t in tensors]


def _concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    reject(out=out)
    tensors = joined(arrays, dtype)
    if axis is None:
        tensors, axis = [torch.reshape(t, (-1,)) for t in tensors], 0
    return torch.cat(tensors, dim=axis)


def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    reject(out=out)
    return torch.stack(joined(arrays, dtype), dim=axis)


def _hstack(tup, *, dtype=None, casting="same_kind"):
    tensors = [_atleast(1)(t) for t in joined(tup, dtype)]
    return torch.cat(tensors, dim=0 if all(t.ndim == 1 for t in tensors) else 1)


def _vstack(tup, *, dtype=None, casting="same_kind"):
    return torch.cat([_atleast(2)(t) for t in joined(tup, dtype)], dim=0)


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
    return torch.flip(x, dims_of(x, axis))


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


def _transpose(a, axes=None):
    order = tuple(reversed(range(np.ndim(a)))) if axes is None else tuple(axes)
    return torch.permute(tensor_of(a), order)


def _broadcast_to(array, shape, subok=False):
    return torch.broadcast_to(tensor_of(array), _shape_of(shape))


SHAPES: dict[Any, Any] = {
    np.reshape: _reshape,
    np.ravel: _ravel,
    np.transpose: _transpose,
    np.swapaxes: on_tensor(torch.transpose),
    np.moveaxis: on_tensor(torch.movedim),
    np.expand_dims: _expand_dims,
    np.squeeze: _squeeze,
    np.atleast_1d: _atleast(1),
    np.atleast_2d: _atleast(2),
    np.atleast_3d: _atleast(3),
    np.concatenate: _concatenate,
    np.stack: _stack,
    np.hstack: _hstack,
    np.vstack: _vstack,
    np.broadcast_to: _broadcast_to,
    np.tile: _tile,
    np.repeat: _repeat,
    np.flip: _flip,
    np.fliplr: lambda m: torch.flip(tensor_of(m), (1,)),
    np.flipud: lambda m: torch.flip(tensor_of(m), (0,)),
    np.roll: _roll,
    np.split: _split(False),
    np.array_split: _split(True),
    np.sort: _sort,
}
if hasattr(np, "matrix_transpose"):  # NumPy >= 2.0
    SHAPES[np.matrix_transpose] = lambda x: torch.transpose(tensor_of(x), -2, -1)
