"""Recording NumPy calls on TracedArrays as their torch equivalents.

Every NumPy call that reaches a :class:`~leapp.trace.arrays.array.TracedArray` goes through
:func:`run`:

1. the call runs eagerly with NumPy on plain views of its arguments, so the user's program sees
   exactly what NumPy computes;
2. its torch equivalent from :mod:`leapp.numpy` is applied to the torch views of the same
   arguments (TracedTensors on the same graph nodes), which records it into the node's graph
   through the ordinary torch recorder (:func:`leapp.trace.tensors.recorder.dispatch`);
3. the torch result is checked against NumPy's: a cast node is added when torch's dtype
   promotion differs from NumPy's, and values that disagree raise a :class:`TraceError`;
4. NumPy's result comes back as a TracedArray on the torch result's node.

Writes (``a[i] = v``, ``a += 1``, ``out=``, ``np.copyto``) are recorded by
:mod:`leapp.trace.arrays.writes` on top of these.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from leapp.errors import LeappError, TraceError
from leapp.numpy import functions, ufuncs
from leapp.numpy.operands import UnsupportedFormError, constant_tensor, torch_dtype
from leapp.trace.arrays import indexing
from leapp.trace.arrays.array import (
    TracedArray,
    check_usable,
    rebind,
    tensor_view,
    wrap_array,
)
from leapp.trace.arrays.array_calls import ARRAY_CALLS
from leapp.trace.arrays.handover import arrays_outside_nodes, written_outside
from leapp.trace.location import user_location
from leapp.trace.tensors.node_trace import NodeTrace
from leapp.trace.tensors.operation import NUMBER_HINT, Operation
from leapp.trace.tensors.recorder import FrozenValueWarning, owning_trace, python_value_of
from leapp.trace.tensors.tensor import TracedTensor, wrap

__all__ = ["call_function", "call_ufunc", "getitem", "run", "ufunc_name"]

_BRANCH_HINT = (
    "Express the choice with array operations instead, e.g. np.where(cond, a, b), np.clip, or "
    "masks."
)


def run(what: str, numpy_call: Callable, translate: Callable | None, args: tuple, kwargs=None):
    """Run ``numpy_call`` eagerly and record ``translate`` (its torch equivalent) in the node."""
    kwargs = kwargs or {}
    trace = owner(what, (args, kwargs))
    if trace is None:
        plain_args, plain_kwargs = plain((args, kwargs))
        return arrays_outside_nodes(what, args, numpy_call(*plain_args, **plain_kwargs))
    if translate is None and not trace.recording.freeze_python_values:
        raise TraceError(
            f"node {trace.node!r}: {what} at {user_location()} has no torch equivalent in "
            f"leapp's table, so the exported graph cannot compute it. Compute it with torch "
            f"instead ({_torch_suggestion(what)}) on torch.from_numpy(<array>), which keeps the "
            "trace, or start the session with leapp.start(..., freeze_python_values=True) to "
            "freeze the value it has now as a constant."
        )
    plain_args, plain_kwargs = plain((args, kwargs))
    expected = numpy_call(*plain_args, **plain_kwargs)
    if translate is None:
        return _freeze(trace, what, expected)
    torch_args, torch_kwargs = to_torch((args, kwargs))
    got = translated(trace, what, translate, *torch_args, **torch_kwargs)
    return adopt(trace, what, expected, got)


def owner(what: str, tree: Any) -> NodeTrace | None:
    """The open node whose values ``tree`` uses (None when nothing records them)."""
    traces = {}
    leaves = pytree.tree_leaves(tree)
    for leaf in leaves:
        if isinstance(leaf, (TracedArray, TracedTensor)):
            trace = leaf._leapp_trace
            if trace is not None:
                traces[id(trace)] = trace
    trace = owning_trace(what, list(traces.values()))
    if trace is not None:
        for leaf in leaves:
            if isinstance(leaf, TracedArray) and leaf._leapp_trace is trace:
                check_usable(leaf)
    return trace


def _map(convert: Callable, tree: Any) -> Any:
    if type(tree) in (tuple, list):
        return type(tree)(_map(convert, item) for item in tree)
    if isinstance(tree, dict):
        return {key: _map(convert, item) for key, item in tree.items()}
    return convert(tree)


def plain(tree: Any) -> Any:
    """``tree`` with traced values replaced by plain NumPy views of their memory."""

    def convert(leaf):
        if isinstance(leaf, TracedArray):
            return leaf.view(np.ndarray)
        if isinstance(leaf, TracedTensor):
            with torch._C.DisableTorchFunctionSubclass():
                return leaf.detach().as_subclass(torch.Tensor).numpy()
        return leaf

    return _map(convert, tree)


def to_torch(tree: Any) -> Any:
    """``tree`` with arrays replaced by torch values: traced ones by their TracedTensors."""

    def convert(leaf):
        if isinstance(leaf, TracedArray) and leaf._leapp_node is not None:
            return tensor_view(leaf)
        if isinstance(leaf, np.ndarray):
            return constant_tensor(leaf)
        if isinstance(leaf, np.generic) and leaf.dtype.kind in "biufc":
            return leaf.item()
        return leaf

    return _map(convert, tree)


def translated(trace: NodeTrace, what: str, translate: Callable, *args: Any, **kwargs: Any):
    """``translate(*args, **kwargs)``, its failures as TraceErrors that say what and where."""
    try:
        return translate(*args, **kwargs)
    except LeappError:
        raise
    except UnsupportedFormError as e:
        raise TraceError(
            f"node {trace.node!r}: {what} at {user_location()}: {e}; compute it differently "
            "or with torch on torch.from_numpy(<array>)."
        ) from None
    except Exception as e:
        raise TraceError(
            f"node {trace.node!r}: leapp's torch equivalent of {what} at {user_location()} "
            f"failed on these arguments ({type(e).__name__}: {e}). Compute this step with torch "
            "on torch.from_numpy(<array>) instead."
        ) from e


def adopt(trace: NodeTrace, what: str, expected: Any, got: Any) -> Any:
    """NumPy's ``expected`` result as TracedArray(s) on the nodes of the torch result ``got``."""
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            raise TraceError(
                f"node {trace.node!r}: {what}: the torch equivalent's results do not match "
                "NumPy's; please report this leapp bug."
            )
        items = [adopt(trace, what, e, g) for e, g in zip(expected, got, strict=True)]
        return items if isinstance(expected, list) else tuple(items)
    if isinstance(expected, np.generic):
        expected = np.asarray(expected)
    if not isinstance(expected, np.ndarray):
        return expected
    return wrap_array(expected, trace, result_node(trace, what, expected, got))


def result_node(trace: NodeTrace, what: str, expected: np.ndarray, got: Any) -> Any:
    """The graph node of torch result ``got``, cast and checked to match NumPy's ``expected``."""
    tensor = got if isinstance(got, torch.Tensor) else torch.as_tensor(got)
    if not isinstance(tensor, TracedTensor) or tensor._leapp_trace is not trace:
        tensor = wrap(tensor, trace, trace.constant(tensor))
    if tuple(tensor.shape) != expected.shape:
        raise TraceError(
            f"node {trace.node!r}: {what} at {user_location()}: leapp's torch equivalent has "
            f"shape {list(tensor.shape)}, NumPy's result {list(expected.shape)}; compute this "
            "step with torch instead, and please report this leapp bug."
        )
    want = torch_dtype(expected.dtype)
    if tensor.dtype != want:
        tensor = tensor.to(want)  # NumPy's promotion differs from torch's: record the cast
    _check_values(trace, what, tensor, expected)
    return tensor._leapp_node


def _check_values(trace: NodeTrace, what: str, tensor: torch.Tensor, expected: np.ndarray):
    with torch._C.DisableTorchFunctionSubclass():
        got = tensor.detach().as_subclass(torch.Tensor).numpy()
    if expected.dtype.kind in "fc":
        tolerance = 1e-2 if expected.dtype.itemsize <= 2 else 1e-4
        finite = np.abs(expected[np.isfinite(expected)])
        scale = max(1.0, float(finite.max())) if finite.size else 1.0
        same = np.allclose(got, expected, rtol=tolerance, atol=tolerance * scale, equal_nan=True)
    else:
        same = np.array_equal(got, expected)
    if not same:
        difference = np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64)))
        raise TraceError(
            f"node {trace.node!r}: {what} at {user_location()}: leapp's torch equivalent "
            f"computed values that differ from NumPy's (largest difference {difference:g}), so "
            "the export would not compute what NumPy did. Compute this step with torch on "
            "torch.from_numpy(<array>) instead, and please report it."
        )


def _freeze(trace: NodeTrace, what: str, expected: Any) -> Any:
    warnings.warn(
        f"node {trace.node!r}: {what} at {user_location()} has no torch equivalent; its current "
        "result was frozen as a constant and the export will always use it.",
        FrozenValueWarning,
        stacklevel=3,
    )
    if isinstance(expected, (np.ndarray, np.generic)) and expected.dtype.kind in "biufc":
        value = constant_tensor(np.asarray(expected))
        return wrap_array(np.asarray(expected), trace, trace.constant(value))
    return expected


def _torch_suggestion(what: str) -> str:
    path = what.removeprefix("numpy.").removeprefix("ndarray.").split(".")
    target: Any = torch
    for part in path:
        target = getattr(target, part, None)
    if target is not None and callable(target):
        return f"e.g. torch.{'.'.join(path)}, minding any difference in its semantics"
    return "the torch function that computes the same thing"


def refuse(array: TracedArray, what: str, hint: str) -> None:
    """Raise for an operation that cannot be traced, when ``array`` belongs to an open node."""
    trace = owner(what, (array,))
    if trace is not None:
        raise TraceError(
            f"node {trace.node!r}: {what} at {user_location()} is not traced; {hint}."
        )
    written_outside(array, what)


# ------------------------------------------------------------------- entry points
def call_function(func: Any, args: tuple, kwargs: dict) -> Any:
    """``__array_function__``: a NumPy function called with at least one TracedArray."""
    what = f"{func.__module__}.{func.__name__}"
    if func is np.empty_like:  # its values are unspecified; zeros are what the graph computes
        func = np.zeros_like
    if func in functions.METADATA:
        plain_args, plain_kwargs = plain((args, kwargs))
        return func(*plain_args, **plain_kwargs)
    if func in functions.PYTHON_VALUES:
        return _python_value_call(what, func, args, kwargs)
    return run(what, func, functions.FUNCTIONS.get(func), args, kwargs)


def call_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """``__array_ufunc__``: a ufunc (or operator) applied to at least one TracedArray, with no
    ``out=`` (:func:`leapp.trace.arrays.writes.call_ufunc_out` records those)."""
    what = ufunc_name(ufunc, method)
    translate = ufuncs.ufunc_translation(ufunc, method, inputs, kwargs)
    results = run(what, getattr(ufunc, method), translate, inputs, kwargs)
    if any(isinstance(i, torch.Tensor) for i in inputs):
        return _wrap_as_tensor(results)
    return results


def ufunc_name(ufunc: np.ufunc, method: str) -> str:
    """How messages name a ufunc call: ``numpy.add``, ``numpy.add.reduce``."""
    return f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")


def _wrap_as_tensor(results: Any) -> Any:
    """What ``Tensor.__array_wrap__`` makes of a ufunc result that had a tensor operand
    (``tensor + array`` ends up there): a tensor, with booleans as uint8."""
    if isinstance(results, tuple):
        return tuple(_wrap_as_tensor(r) for r in results)
    if isinstance(results, TracedArray):
        tensor = tensor_view(results)
        return tensor.to(torch.uint8) if tensor.dtype == torch.bool else tensor
    if isinstance(results, np.ndarray):
        return torch.from_numpy(results.astype(np.uint8) if results.dtype == bool else results)
    return results


def getitem(array: TracedArray, key: Any) -> Any:
    """``array[key]``: basic and advanced indexing, negative steps via ``torch.flip``."""
    key = indexing.normalize_key(key)

    def translate(x, torch_key):
        return indexing.index(x, key, torch_key)

    return run("indexing", operator.getitem, translate, (array, key))


def astype(array: TracedArray, dtype: Any, *, order: str, casting: str, copy: bool) -> Any:
    """``array.astype(dtype)``: a cast node, or a clone when the dtype stays the same."""
    if not copy and np.dtype(dtype) == array.dtype:
        return array

    def numpy_call(a):
        return a.astype(dtype, order=order, casting=casting, copy=copy)

    def translate(x):
        target = torch_dtype(dtype)
        return torch.clone(x) if x.dtype == target else x.to(target)

    return run("ndarray.astype", numpy_call, translate, (array,))


def set_shape(array: TracedArray, shape: Any) -> None:
    """``array.shape = ...``: NumPy reshapes the array object in place; rebind it to a reshape."""
    trace = owner("ndarray.shape assignment", (array,))
    reshaped = np.reshape(array, shape) if trace is not None else None
    np.ndarray.shape.__set__(array, shape)
    if reshaped is not None:
        rebind(array, reshaped._leapp_node)


def python_value(array: TracedArray, what: str, convert: Callable) -> Any:
    """``bool(a)``, ``float(a)``, ``a.item()``...: refuse inside a node, or freeze if allowed."""
    trace = owner(what, (array,))
    if trace is None:
        return convert(array.view(np.ndarray))
    hint = _BRANCH_HINT if what.startswith(("bool", "'in'")) else NUMBER_HINT
    op = Operation("python_value", convert, what, hint=hint)
    return python_value_of(trace, op, convert, (array.view(np.ndarray),), {})


def _python_value_call(what: str, func: Any, args: tuple, kwargs: dict) -> Any:
    trace = owner(what, (args, kwargs))
    plain_args, plain_kwargs = plain((args, kwargs))
    if trace is None:
        return func(*plain_args, **plain_kwargs)
    op = Operation("python_value", func, f"{what}()", hint=_BRANCH_HINT)
    return python_value_of(trace, op, func, plain_args, plain_kwargs)


# TracedArray hands its NumPy calls here (its writes to leapp.trace.arrays.writes).
ARRAY_CALLS.ufunc = call_ufunc
ARRAY_CALLS.function = call_function
ARRAY_CALLS.getitem = getitem
ARRAY_CALLS.astype = astype
ARRAY_CALLS.set_shape = set_shape
ARRAY_CALLS.python_value = python_value
ARRAY_CALLS.refuse = refuse
