"""TracedArray: a NumPy array that records what is done to it as torch operations.

Arrays handed to ``annotate.input_tensors`` come back as :class:`TracedArray`, an ``np.ndarray``
subclass that shares memory with the array passed in. NumPy calls on it run eagerly with NumPy's
own semantics and are also recorded, as their torch equivalents from :mod:`leapp.numpy`, into the
node's ``torch.fx`` graph, so every exported artifact is a torch graph::

    state = annotate.input_tensors("prep", {"state": np.zeros(6, np.float32)})
    obs = np.clip((state - MEAN) / STD, -5, 5)[::-1]        # recorded as torch.sub, torch.div,
    annotate.output_tensors("prep", {"obs": obs})          # torch.clamp, torch.flip

Interception uses NumPy's documented protocols: ``__array_ufunc__`` (ufuncs and operators),
``__array_function__`` (``np.concatenate``, ``np.sum``...), plus the ndarray methods, indexing
and item assignment defined here. Each of them hands the call to the function in the array's
dispatch table (:mod:`leapp.trace.arrays.array_calls`), which the recorders register when they
are imported:
:mod:`leapp.trace.arrays.numpy_recorder` for calls, :mod:`leapp.trace.arrays.writes` for
writes; importing this package imports both, so a traced array never exists without them.

Crossing to torch keeps the trace: ``torch.from_numpy(a)`` / ``torch.as_tensor(a)`` return a
:class:`~leapp.trace.tensors.tensor.TracedTensor` on the same graph node (see
:mod:`leapp.trace.arrays.crossing`), and ``tensor.numpy()`` / ``np.asarray(tensor)`` return a
TracedArray.

What cannot be seen: NumPy writing a traced array into a *plain* array (``buf = np.zeros(9);
buf[:6] = state``) copies the values without any hook, so ``buf`` would be a frozen constant.
Register the buffer (``buf = annotate.register_buffer(node, {"buf": buf})``, see
:mod:`leapp.trace.pipeline.buffers`) and write into the array it returns, create it from traced
values (``np.zeros_like(...)``), or use ``np.concatenate``.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from leapp.errors import TraceError
from leapp.numpy.operands import constant_tensor, shared_tensor
from leapp.trace.arrays.array_calls import ARRAY_CALLS
from leapp.trace.location import user_location
from leapp.trace.tensors.extensions import EXTENSIONS
from leapp.trace.tensors.tensor import TracedTensor, wrap

if TYPE_CHECKING:
    from torch.fx import Node

    from leapp.trace.tensors.node_trace import NodeTrace

__all__ = [
    "TracedArray",
    "array_from_tensor",
    "check_usable",
    "port_tensor",
    "port_tensors",
    "tensor_view",
    "traced_input",
    "wrap_array",
]


class TracedArray(np.ndarray):
    """An array owned by one run of one pipeline node.

    ``_leapp_trace`` is the :class:`~leapp.trace.tensors.node_trace.NodeTrace` recording it and
    ``_leapp_node`` the fx node that computes its current value. An array NumPy derived from a
    traced one without leapp seeing it (an ndarray method outside leapp's table) has
    ``_leapp_node`` None: using it inside the node raises instead of exporting a wrong graph.
    """

    _leapp_trace: NodeTrace | None = None
    _leapp_node: Node | None = None
    _leapp_twin: TracedTensor | None = None  # the torch view of this array on the same node
    _leapp_twin_shared: bool = False  # whether the twin shares this array's memory
    _leapp_stale: str | None = None  # where a write made this array's graph value outdated
    _leapp_derived: str | None = None  # computed outside any node (leapp.trace.tensors.handover)

    def __array_finalize__(self, obj: Any) -> None:
        self._leapp_trace = getattr(obj, "_leapp_trace", None)
        self._leapp_node = None
        self._leapp_twin = None
        self._leapp_stale = None
        self._leapp_derived = getattr(obj, "_leapp_derived", None)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if "out" in kwargs:  # NumPy passes out= only when it names an array
            return ARRAY_CALLS.ufunc_out(ufunc, method, inputs, kwargs)
        return ARRAY_CALLS.ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if func is np.copyto:
            return ARRAY_CALLS.copyto(*args, **kwargs)
        return ARRAY_CALLS.function(func, args, kwargs)

    # ------------------------------------------------------------- indexing and writes
    def __getitem__(self, key):
        return ARRAY_CALLS.getitem(self, key)

    def __setitem__(self, key, value) -> None:
        ARRAY_CALLS.assign(self, key, value, "item assignment")

    def fill(self, value) -> None:
        ARRAY_CALLS.assign(self, Ellipsis, value, "ndarray.fill")

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self)))

    # ----------------------------------------------------------------- shape methods
    def reshape(self, *shape, order="C", copy=None):
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        options = {} if copy is None else {"copy": copy}  # NumPy < 2.1 has no copy=
        return np.reshape(self, shape, order=order, **options)

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes
        return np.transpose(self, axes or None)

    @property
    def T(self):  # noqa: N802 - NumPy's name
        return np.transpose(self)

    @property
    def mT(self):  # noqa: N802 - NumPy's name
        return np.swapaxes(self, -1, -2)

    def flatten(self, order="C"):
        return np.copy(np.ravel(self, order))

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        return ARRAY_CALLS.astype(self, dtype, order=order, casting=casting, copy=copy)

    @property
    def shape(self):
        return np.ndarray.shape.__get__(self)

    @shape.setter
    def shape(self, value) -> None:
        ARRAY_CALLS.set_shape(self, value)

    # ------------------------------------------------------- values leaving the graph
    def __bool__(self) -> bool:
        return ARRAY_CALLS.python_value(self, "bool()/if/while on a traced array", bool)

    def __float__(self) -> float:
        return ARRAY_CALLS.python_value(self, "float()", float)

    def __int__(self) -> int:
        return ARRAY_CALLS.python_value(self, "int()", int)

    def __complex__(self) -> complex:
        return ARRAY_CALLS.python_value(self, "complex()", complex)

    def __index__(self) -> int:
        return ARRAY_CALLS.python_value(
            self, "using a traced array as a Python index", lambda a: a.__index__()
        )

    def __contains__(self, value) -> bool:
        return ARRAY_CALLS.python_value(
            self, "'in' on a traced array", lambda a: a.__contains__(value)
        )

    def item(self, *args):
        return ARRAY_CALLS.python_value(self, ".item()", lambda a: a.item(*args))

    def tolist(self):
        return ARRAY_CALLS.python_value(self, ".tolist()", lambda a: a.tolist())

    def tobytes(self, order="C"):
        return ARRAY_CALLS.python_value(self, ".tobytes()", lambda a: a.tobytes(order))

    # ----------------------------------------------------------------- plain helpers
    def __repr__(self) -> str:
        owner = f", node={self._leapp_trace.node!r}" if self._leapp_trace is not None else ""
        return f"TracedArray({np.ndarray.__repr__(self.view(np.ndarray))}{owner})"

    def __str__(self) -> str:
        return str(self.view(np.ndarray))

    def __format__(self, spec: str) -> str:
        return format(self.view(np.ndarray), spec)

    def __copy__(self):
        return np.copy(self)

    def __deepcopy__(self, memo):
        return np.copy(self)

    def __reduce__(self):
        return self.view(np.ndarray).__reduce__()


def _forward(function: Any, name: str):
    def method(self, *args, **kwargs):
        return function(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = (
        f"``ndarray.{name}``, traced as ``{function.__module__}.{function.__name__}``."
    )
    return method


def _in_place(name: str, hint: str):
    def method(self, *args, **kwargs):
        ARRAY_CALLS.refuse(self, f"ndarray.{name} (in place)", hint)
        return getattr(self.view(np.ndarray), name)(*args, **kwargs)

    method.__name__ = method.__qualname__ = name
    return method


# ndarray methods that are the NumPy function of the same meaning, traced through it.
for _name, _function in {
    "sum": np.sum, "prod": np.prod, "mean": np.mean, "std": np.std, "var": np.var,
    "max": np.max, "min": np.min, "argmax": np.argmax, "argmin": np.argmin, "any": np.any,
    "all": np.all, "cumsum": np.cumsum, "cumprod": np.cumprod, "clip": np.clip,
    "round": np.round, "squeeze": np.squeeze, "swapaxes": np.swapaxes, "repeat": np.repeat,
    "dot": np.dot, "copy": np.copy, "ravel": np.ravel, "nonzero": np.nonzero,
    "argsort": np.argsort, "take": np.take, "diagonal": np.diagonal, "trace": np.trace,
    "conj": np.conjugate, "conjugate": np.conjugate, "ptp": np.ptp, "compress": np.compress,
    "searchsorted": np.searchsorted, "choose": np.choose,
}.items():  # fmt: skip
    setattr(TracedArray, _name, _forward(_function, _name))
for _name in ("sort", "partition", "put", "resize", "itemset", "setfield", "byteswap"):
    setattr(TracedArray, _name, _in_place(_name, "use the NumPy function that returns a copy"))


# -------------------------------------------------------------------- traced values
_LIVE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # trace -> [weakref(array)]


def wrap_array(
    value: np.ndarray, trace: NodeTrace, node: Node, twin: TracedTensor | None = None
) -> TracedArray:
    """Return a TracedArray viewing ``value``'s memory, recorded as ``node`` of ``trace``."""
    traced = np.asarray(value).view(np.ndarray).view(TracedArray)
    traced._leapp_trace = trace
    traced._leapp_node = node
    if twin is not None:
        traced._leapp_twin = twin
        traced._leapp_twin_shared = _shares(traced, twin)
    live = _LIVE.setdefault(trace, [])
    if len(live) > 64 and len(live) % 64 == 0:
        live[:] = [ref for ref in live if ref() is not None]
    live.append(weakref.ref(traced))
    return traced


def _shares(array: np.ndarray, tensor: torch.Tensor) -> bool:
    with torch._C.DisableTorchFunctionSubclass():
        plain = tensor.detach().as_subclass(torch.Tensor)
        if plain.numel() == 0:
            return False
        return plain.data_ptr() == array.view(np.ndarray).__array_interface__["data"][0]


def live_arrays(trace: NodeTrace) -> list[TracedArray]:
    """The TracedArrays of ``trace`` that are still referenced somewhere."""
    return [a for a in (ref() for ref in _LIVE.get(trace, ())) if a is not None]


def tensor_view(array: TracedArray) -> TracedTensor:
    """The TracedTensor on the same graph node as ``array`` (sharing its memory if it can)."""
    if array._leapp_derived is not None:  # computed outside any node: a derived tensor
        traced = wrap(shared_tensor(array.view(np.ndarray))[0], array._leapp_trace, None)
        traced._leapp_derived = array._leapp_derived
        return traced
    check_usable(array)
    twin = array._leapp_twin
    if twin is not None and twin._leapp_node is array._leapp_node:
        return twin
    tensor, shared = shared_tensor(array.view(np.ndarray))
    twin = wrap(tensor, array._leapp_trace, array._leapp_node)
    array._leapp_twin, array._leapp_twin_shared = twin, shared
    return twin


def check_usable(array: TracedArray) -> None:
    """Raise if ``array``'s graph value is unknown (untraced derivative) or outdated (stale)."""
    trace = array._leapp_trace
    if trace is None or not trace.recording.active:
        return
    if array._leapp_stale is not None:
        raise TraceError(
            f"node {trace.node!r}: an array used at {user_location()} shares memory with an "
            f"array written at {array._leapp_stale}; NumPy changed both, the graph follows only "
            "the written one. Take the view after the write, or copy it (.copy()) before."
        )
    if array._leapp_node is None:
        raise TraceError(
            f"node {trace.node!r}: the array used at {user_location()} was derived from a "
            "traced array by an ndarray method or attribute leapp does not trace. Use the NumPy "
            "function form (np.sum(a), np.transpose(a)...) or torch on torch.from_numpy(a)."
        )


def rebind(array: TracedArray, node: Node) -> None:
    """``array`` now holds the value of ``node`` (after a write); keep its twin in step."""
    array._leapp_node = node
    twin = array._leapp_twin
    if twin is not None and array._leapp_twin_shared and twin.shape == array.shape:
        twin._leapp_node = node
    else:
        array._leapp_twin = None


def traced_input(trace: NodeTrace, name: str, value: np.ndarray, source: Any) -> TracedArray:
    """Declare input ``name`` of ``trace`` from an array; the result shares its memory."""
    plain = value.view(np.ndarray)
    tensor, shared = shared_tensor(plain)
    twin = trace.add_input(name, tensor, source)
    return wrap_array(plain, trace, twin._leapp_node, twin if shared else None)


def array_from_tensor(func: Any, args: tuple, kwargs: dict) -> np.ndarray:
    """``tensor.numpy()`` on a TracedTensor: a TracedArray on the same node, same memory."""
    tensor = args[0]
    with torch._C.DisableTorchFunctionSubclass():
        plain = func(tensor.as_subclass(torch.Tensor), *args[1:], **kwargs)
    trace = getattr(tensor, "_leapp_trace", None)
    if trace is None or not trace.recording.active:
        return plain
    return wrap_array(plain, trace, tensor._leapp_node, twin=tensor)


def is_live(value: Any) -> bool:
    """Whether ``value`` is a TracedArray/TracedTensor of a session that is recording."""
    trace = getattr(value, "_leapp_trace", None)
    traced = isinstance(value, (TracedArray, TracedTensor))
    return traced and trace is not None and trace.recording.active


def port_tensor(value: Any) -> Any:
    """What a node port holds, as torch: the TracedTensor of a live TracedArray, else ``value``."""
    if isinstance(value, TracedArray) and is_live(value):
        return tensor_view(value)
    if isinstance(value, np.ndarray):
        return constant_tensor(value)
    return value


def port_tensors(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with every array turned into the torch value that stands for it."""
    return {name: port_tensor(value) for name, value in values.items()}


# The torch recorder hands this package NumPy arrays in torch calls, and ``tensor.numpy()``.
EXTENSIONS.array_to_tensor = port_tensor
EXTENSIONS.tensor_to_array = array_from_tensor
