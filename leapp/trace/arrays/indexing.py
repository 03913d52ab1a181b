"""Indexing and item assignment of traced arrays, as torch operations.

- :func:`normalize_key` rewrites a NumPy index into an equivalent one with fewer forms (lists and
  boolean arrays become integer arrays, NumPy integers Python ints);
- :func:`index` records ``x[key]``: slices and integers stay one indexing node, and since torch
  has no negative slice steps those dimensions are flipped (``torch.flip``) and sliced forward;
  constant integer arrays select positions known at trace time with one ``index_select``;
- :func:`assign` computes the array after ``x[key] = value`` without changing ``x``: with a
  constant index the written positions are known now and the result is a gather plus a
  ``torch.where``, which every backend exports.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import torch

from leapp.numpy.operands import (
    UnsupportedFormError,
    cast,
    constant_tensor,
    numpy_dtype,
    tensor_of,
)
from leapp.trace.arrays.array import TracedArray

__all__ = ["assign", "index", "normalize_key", "propagate"]


def normalize_key(key: Any) -> tuple:
    """An index with NumPy's meaning kept: lists and boolean arrays become integer arrays."""
    items = key if isinstance(key, tuple) else (key,)
    normalized: list[Any] = []
    for item in items:
        if item is None or item is Ellipsis or isinstance(item, (TracedArray, torch.Tensor)):
            normalized.append(item)
        elif isinstance(item, slice):
            parts = (item.start, item.stop, item.step)
            normalized.append(slice(*(None if p is None else operator.index(p) for p in parts)))
        elif isinstance(item, (bool, np.bool_)):
            normalized.append(item)
        elif isinstance(item, (int, np.integer)):
            normalized.append(operator.index(item))
        else:
            array = np.asarray(item)
            if array.dtype == bool and array.ndim > 0:
                normalized.extend(np.nonzero(array))
            elif array.dtype.kind in "iu":
                normalized.append(array.astype(np.intp))
            else:
                normalized.append(item)  # NumPy raises its own IndexError
    return tuple(normalized)


def _torch_key(shape: tuple[int, ...], key: tuple) -> tuple[list[int], tuple]:
    """The torch index for a normalized NumPy ``key``, and the dims to flip before using it."""
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    dim, flips, converted = 0, [], []
    for item in key:
        if item is Ellipsis:
            dim += len(shape) - consumed
        elif item is None:
            converted.append(item)
            continue
        elif isinstance(item, (bool, np.bool_)):
            raise UnsupportedFormError("indexing with a Python bool is not supported")
        elif isinstance(item, torch.Tensor):
            if item.dtype == torch.bool:
                raise UnsupportedFormError(
                    "a boolean mask computed from traced values selects a data-dependent number "
                    "of elements; use np.where(mask, x, fill) to keep the shape"
                )
            item = item if item.dtype == torch.int64 else item.to(torch.int64)
        elif isinstance(item, slice) and item.step is not None and item.step < 0:
            positions = range(shape[dim])[item]
            flips.append(dim)
            last = shape[dim] - 1
            item = (
                slice(last - positions[0], last - positions[-1] + 1, -positions.step)
                if len(positions)
                else slice(0, 0)
            )
        converted.append(item)
        dim += 0 if item is Ellipsis else 1
    return flips, tuple(converted)


def index(x: torch.Tensor, key: tuple, torch_key: tuple) -> torch.Tensor:
    """``x[key]`` in torch for the normalized NumPy ``key`` (``torch_key``: its torch values).

    Slices and integers stay an indexing node (negative steps: ``torch.flip`` and a forward
    slice). Constant integer arrays select positions known now: one ``index_select`` of them,
    which every backend exports (ONNX cannot mix slices and index tensors).
    """
    if any(isinstance(k, np.ndarray) for k in key) and not _traced(key):
        shape = tuple(x.shape)
        positions = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)[key]
        flat = torch.index_select(torch.reshape(x, (-1,)), 0, constant_tensor(positions.ravel()))
        return torch.reshape(flat, positions.shape)
    flips, converted = _torch_key(tuple(x.shape), torch_key)
    if flips:
        x = torch.flip(x, flips)
    return x[converted]


def _traced(key: tuple) -> list[Any]:
    return [k for k in key if isinstance(k, (TracedArray, torch.Tensor))]


def assign(base: torch.Tensor, key: tuple, torch_key: tuple, value: Any) -> torch.Tensor:
    """A new tensor equal to ``base`` after NumPy's ``base[key] = value`` (base is unchanged).

    ``key`` is the normalized NumPy index, ``torch_key`` the same with torch values. With a
    constant index the written positions are known now: the result is a gather and a
    ``torch.where`` with constant positions, which every backend exports.
    """
    whole = len(key) == 1 and key[0] is Ellipsis
    if whole and isinstance(value, torch.Tensor) and tuple(value.shape) == tuple(base.shape):
        return cast(value, numpy_dtype(base.dtype))
    if not _traced(key):
        shape = tuple(base.shape)
        positions = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)[key]
        return _write_positions(base, np.asarray(positions), value)
    mask = torch_key[0]
    if len(key) == 1 and isinstance(mask, torch.Tensor) and mask.dtype == torch.bool:
        return _masked_fill(base, mask, value)
    flips, converted = _torch_key(tuple(base.shape), torch_key)
    work = torch.flip(base, flips) if flips else torch.clone(base)
    work[converted] = value
    return torch.flip(work, flips) if flips else work


def _write_positions(base: torch.Tensor, positions: np.ndarray, value: Any) -> torch.Tensor:
    """``base`` with ``value`` (broadcast to ``positions.shape``) written at flat ``positions``."""
    shape, size = tuple(base.shape), int(np.prod(tuple(base.shape)))
    source = np.full(size, -1, dtype=np.int64)
    source[positions.reshape(-1)] = np.arange(positions.size)  # repeated positions: last wins
    inside = constant_tensor((source >= 0).reshape(shape))
    if isinstance(value, (bool, int, float, complex)):
        return torch.where(inside, np.asarray(value).astype(numpy_dtype(base.dtype)).item(), base)
    values = cast(tensor_of(value), numpy_dtype(base.dtype))
    while values.ndim > positions.ndim and values.shape[0] == 1:
        values = torch.reshape(values, tuple(values.shape[1:]))  # NumPy drops leading 1s
    flat = torch.reshape(torch.broadcast_to(values, positions.shape), (-1,))
    gathered = torch.index_select(flat, 0, constant_tensor(np.maximum(source, 0)))
    return torch.where(inside, torch.reshape(gathered, shape), base)


def _masked_fill(base: torch.Tensor, mask: torch.Tensor, value: Any) -> torch.Tensor:
    size = value.numel() if isinstance(value, torch.Tensor) else np.size(value)
    if tuple(mask.shape) != tuple(base.shape) or size != 1:
        raise UnsupportedFormError(
            "writing through a traced boolean mask is supported for a mask of the array's "
            "shape and a single value; use np.where(mask, value, x)"
        )
    if isinstance(value, torch.Tensor):
        fill = torch.reshape(cast(value, numpy_dtype(base.dtype)), ())
    else:
        fill = np.asarray(value).astype(numpy_dtype(base.dtype)).item()
    return torch.where(mask, fill, base)


def propagate(
    old: torch.Tensor, array: np.ndarray, target: np.ndarray, target_new: torch.Tensor
) -> torch.Tensor | None:
    """``array``'s value after a write into ``target``, which shares memory with it.

    ``old`` is ``array``'s current torch value and ``target_new`` the target's value after the
    write. Elements are matched by memory address; None when they cannot be (different dtypes
    or misaligned views), in which case the caller marks ``array`` as unusable.
    """
    if array.dtype != target.dtype:
        return None
    mine, theirs = _addresses(array).ravel(), _addresses(target).ravel()
    if ((mine - theirs[0]) % array.dtype.itemsize).any():
        return None
    order = np.argsort(theirs, kind="stable")
    found_at = np.minimum(np.searchsorted(theirs[order], mine), len(theirs) - 1)
    found = theirs[order][found_at] == mine
    if not found.any():
        return old
    source = np.where(found, order[found_at], 0)
    flat = torch.reshape(target_new, (-1,))
    gathered = torch.reshape(torch.index_select(flat, 0, constant_tensor(source)), array.shape)
    return torch.where(constant_tensor(found.reshape(array.shape)), gathered, old)


def _addresses(array: np.ndarray) -> np.ndarray:
    """The memory address of every element of ``array``, in its shape."""
    plain = array.view(np.ndarray)
    start = plain.__array_interface__["data"][0]
    if plain.ndim == 0:
        return np.asarray(start, dtype=np.int64)
    grid = np.indices(plain.shape, dtype=np.int64)
    return start + sum(axis * stride for axis, stride in zip(grid, plain.strides, strict=True))
