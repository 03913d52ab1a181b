"""Crossing between NumPy and torch keeps the trace, while a session records.

``torch.from_numpy(a)``, ``torch.as_tensor(a)`` and ``torch.tensor(a)`` on a traced array, and
``np.asarray(t)`` / ``np.array(t)`` / ``np.asanyarray(t)`` / ``np.ascontiguousarray(t)`` on a
traced tensor, array or a list of them (stacked with ``np.stack``), would otherwise read the
raw memory and drop the graph node: the value would silently become a constant.
:func:`activate` (called by ``leapp.start``) replaces those module attributes with wrappers that
return the traced counterpart on the same node; :func:`deactivate` (called by ``leapp.stop``)
puts the originals back. The wrappers hand every call that involves no traced value to the
original function unchanged.

``tensor.numpy()`` needs no patch: it reaches the tracer through ``__torch_function__``.
Code that bound the functions before the session started (``from torch import from_numpy``) is
not covered: call them through their modules.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from leapp.errors import TraceError
from leapp.trace.arrays.array import TracedArray, array_from_tensor, is_live, tensor_view
from leapp.trace.location import user_location
from leapp.trace.tensors.tensor import TracedTensor

__all__ = ["activate", "active", "deactivate"]

_originals: dict[tuple[Any, str], Any] = {}


def active() -> bool:
    """Whether the crossing wrappers are installed."""
    return bool(_originals)


def activate() -> None:
    """Install the wrappers (idempotent)."""
    if _originals:
        return
    for module, name, make in _PATCHES:
        original = getattr(module, name)
        _originals[(module, name)] = original
        setattr(module, name, functools.wraps(original)(make(original)))


def deactivate() -> None:
    """Restore the original functions (idempotent)."""
    for (module, name), original in _originals.items():
        setattr(module, name, original)
    _originals.clear()


def _check_no_nested(what: str, data: Any, fix: str) -> None:
    """A list holding traced values would be read element by element without the graph."""
    if isinstance(data, (list, tuple)) and any(map(is_live, pytree.tree_leaves(data))):
        raise TraceError(
            f"{what} at {user_location()} builds one value from a sequence of traced values, "
            f"which leapp cannot follow; use {fix} instead."
        )


def _to_tensor(original: Any, copy: bool):
    def convert(data, *args, dtype=None, device=None, **kwargs):
        if not is_live(data):
            _check_no_nested(f"torch.{original.__name__}", data, "torch.stack([...])")
            return original(data, *args, dtype=dtype, device=device, **kwargs)
        tensor = tensor_view(data) if isinstance(data, TracedArray) else data
        if copy:
            tensor = torch.clone(tensor)
        if dtype is not None or device is not None:
            tensor = tensor.to(device=device, dtype=dtype)
        return tensor

    return convert


def _from_numpy(original: Any):
    def from_numpy(ndarray):
        if isinstance(ndarray, TracedArray) and is_live(ndarray):
            original(ndarray.view(np.ndarray))  # raise torch's own error if it would
            return tensor_view(ndarray)
        return original(ndarray)

    return from_numpy


_UNSET = object()


def _to_array(original: Any, copies: bool):
    def convert(a, dtype=None, *args, copy=_UNSET, **kwargs):
        options = kwargs if copy is _UNSET else {**kwargs, "copy": copy}
        if isinstance(a, (list, tuple)) and any(map(is_live, pytree.tree_leaves(a))):
            stacked = _stack(a)
            return stacked if dtype is None else stacked.astype(dtype)
        if not is_live(a):
            return original(a, dtype, *args, **options)
        if isinstance(a, TracedTensor):
            a = array_from_tensor(torch.Tensor.numpy, (a,), {})
        plain = original(a.view(np.ndarray), dtype, *args, **options)
        copied = copies if copy is _UNSET or copy is None else copy
        if dtype is not None and np.dtype(dtype) != a.dtype:
            result = a.astype(dtype)
        elif copied or not np.shares_memory(plain, a.view(np.ndarray), max_work=100):
            result = np.copy(a)
        else:
            result = a
        if result.shape != plain.shape:  # ndmin=, or ascontiguousarray of a 0-d array
            result = np.reshape(result, plain.shape)
        return result

    return convert


def _stack(sequence: Any) -> Any:
    """``np.asarray([a, b, ...])`` with traced items: ``np.stack`` of the items, recursively."""

    def item(value):
        if isinstance(value, (list, tuple)):
            return _stack(value)
        if isinstance(value, TracedTensor) and is_live(value):
            return array_from_tensor(torch.Tensor.numpy, (value,), {})
        return value

    return np.stack([item(v) for v in sequence])


_PATCHES = [
    (torch, "from_numpy", _from_numpy),
    (torch, "as_tensor", lambda original: _to_tensor(original, copy=False)),
    (torch, "tensor", lambda original: _to_tensor(original, copy=True)),
    (np, "asarray", lambda original: _to_array(original, copies=False)),
    (np, "asanyarray", lambda original: _to_array(original, copies=False)),
    (np, "array", lambda original: _to_array(original, copies=True)),
    (np, "ascontiguousarray", lambda original: _to_array(original, copies=False)),
]
