"""Writes into TracedArrays: ``a[i] = v``, ``a.fill(v)``, ``a += 1`` (``out=``), ``np.copyto``.

Writes are recorded functionally: the written array is rebound to a new node, and so is every
other traced array of the node that shares its memory (a view NumPy updates as well), so views
behave exactly as in NumPy. A view whose elements cannot be matched to the written ones is
marked stale: using it raises. The values come from the recorder
(:mod:`leapp.trace.arrays.numpy_recorder`), which runs each call with NumPy and records its torch
equivalent; :class:`~leapp.trace.arrays.array.TracedArray` dispatches its writes here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from leapp.errors import TraceError
from leapp.numpy import ufuncs
from leapp.trace.arrays import indexing
from leapp.trace.arrays.array import TracedArray, live_arrays, rebind, tensor_view
from leapp.trace.arrays.array_calls import ARRAY_CALLS
from leapp.trace.arrays.handover import written_outside
from leapp.trace.arrays.numpy_recorder import (
    owner,
    plain,
    refuse,
    result_node,
    run,
    to_torch,
    translated,
    ufunc_name,
)
from leapp.trace.location import user_location

__all__ = ["assign", "call_ufunc_out", "copyto"]

_WRITE_HINT = "Write into a traced array (np.zeros_like(traced)) or compute out of place."


def assign(target: Any, key: Any, value: Any, what: str) -> None:
    """``target[key] = value``, recorded out of place: ``target`` is rebound to a new node.

    Every other traced array of the node that shares memory with ``target`` (a view NumPy
    updates as well) is rebound too, to its old value with the written elements gathered from
    ``target``'s new one; the elements are matched by their memory addresses.
    """
    trace = owner(what, (target, key, value))
    if trace is None:
        plain_target, plain_key, plain_value = plain((target, key, value))
        plain_target[plain_key] = plain_value
        written_outside(target, what)
        return
    if not isinstance(target, TracedArray) or target._leapp_trace is not trace:
        raise TraceError(
            f"node {trace.node!r}: {what} at {user_location()} writes traced values into an "
            f"array that is not traced, which NumPy gives leapp no way to follow. Register it "
            f"with annotate.register_buffer({trace.node!r}, {{'name': array}}) and write into "
            f"the array it returns. {_WRITE_HINT}"
        )
    key = indexing.normalize_key(key)
    base, torch_key, torch_value = to_torch((target, key, value))
    new = translated(trace, what, indexing.assign, base, key, torch_key, torch_value)
    views = [
        (other, translated(trace, what, _propagated, other, target, new))
        for other in live_arrays(trace)
        if other is not target
        and other._leapp_node is not None
        and other._leapp_stale is None
        and _overlap(other, target)
    ]  # computed before NumPy writes: the torch views still hold the old values
    plain_target, plain_key, plain_value = plain((target, key, value))
    plain_target[plain_key] = plain_value  # NumPy's own write, after torch read the inputs
    rebind(target, result_node(trace, what, plain_target, new))
    for other, updated in views:
        if updated is None:
            other._leapp_stale = user_location()
        else:
            rebind(other, result_node(trace, what, other.view(np.ndarray), updated))


def _propagated(other: TracedArray, target: TracedArray, new: torch.Tensor) -> Any:
    return indexing.propagate(tensor_view(other), other, target, new)


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    try:
        return np.shares_memory(a.view(np.ndarray), b.view(np.ndarray), max_work=10_000)
    except Exception:  # TooHardError: assume they overlap
        return True


def copyto(dst, src, casting="same_kind", where=True) -> None:
    """``np.copyto(dst, src)``: an assignment of all of ``dst``."""
    if where is not True:
        refuse(dst, "numpy.copyto(where=...)", "use np.where(mask, src, dst)")
    assign(dst, Ellipsis, src, "numpy.copyto")


def call_ufunc_out(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """``__array_ufunc__`` with ``out=`` (``a += 1`` too): the results assigned to ``out``."""
    what = ufunc_name(ufunc, method)
    out = kwargs.pop("out")
    numpy_call = getattr(ufunc, method)
    translate = ufuncs.ufunc_translation(ufunc, method, inputs, kwargs)
    out = out if isinstance(out, tuple) else (out,)
    if owner(what, (inputs, kwargs, out)) is None:
        plain_inputs, plain_kwargs, plain_out = plain((inputs, kwargs, out))
        numpy_call(*plain_inputs, out=plain_out, **plain_kwargs)
        for target in out:
            written_outside(target, f"{what}(out=...)")
        return out[0] if len(out) == 1 else out
    results = run(what, numpy_call, translate, inputs, kwargs)
    results = results if isinstance(results, tuple) else (results,)
    for target, result in zip(out, results, strict=True):
        if target is None:
            continue
        if not np.can_cast(result.dtype, target.dtype, "same_kind"):
            plain_inputs, plain_kwargs = plain((inputs, kwargs))  # NumPy raises its own error
            numpy_call(*plain_inputs, out=tuple(np.empty_like(o) for o in out), **plain_kwargs)
        assign(target, Ellipsis, result, f"{what}(out=...)")
    return out[0] if len(out) == 1 else out


# TracedArray hands its writes here.
ARRAY_CALLS.ufunc_out = call_ufunc_out
ARRAY_CALLS.copyto = copyto
ARRAY_CALLS.assign = assign
