"""Torch calls on published outputs between nodes, outside any open node.

A node's published output stays a :class:`~leapp.trace.tensor.TracedTensor` after the node is
closed, so that handing it to another node's ``annotate.input_tensors`` records an edge
(``data_flow``, or ``feedback_flow`` on a later tick). Code between nodes often passes it on
through an identity-like call — ``.detach()``, ``.clone()``, ``.contiguous()``, ``.cpu()``,
``.to(<same dtype>)``, ``.float()`` on float32, ``.view_as(<same shape>)``,
``torch.as_tensor`` — whose result holds the same values: it still stands for the published
output, so the edge survives.

Any other computation on a published output outside a node (``out * 2``, ``out.double()``,
``torch.cat([out, x])``, an in-place ``out.mul_(2)``) is not part of any node, so no exported
artifact would compute it. Its result is marked as derived; handing it to a node's
``input_tensors`` raises a :class:`~leapp.errors.TraceError` naming the call and the user's
line. Using it otherwise (logging, a simulator step, a Python number) is fine.

NumPy outputs (:class:`~leapp.trace.array.TracedArray`) follow the same rules
(:func:`arrays_outside_nodes`): ``.copy()``, ``np.array(out)``, ``np.asarray(out)``,
``out.astype(<same dtype>)``, ``np.ravel`` / ``np.reshape`` / ``np.squeeze`` to the same shape
keep standing for the output; other NumPy calls give derived arrays, and a write into the
output (``out[:] = 0``, ``np.copyto``, ``out=``) marks it derived.

:func:`mirror` is ``annotate.mirror_leapp_tags``: an explicit handover of a value that went
through code leapp cannot see and came out equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from leapp.errors import TraceError
from leapp.numpy.operands import shared_tensor
from leapp.trace.array import TracedArray, is_live, tensor_view, wrap_array
from leapp.trace.location import user_location
from leapp.trace.tensor import TracedTensor

if TYPE_CHECKING:
    from leapp.trace.operation import Operation
    from leapp.trace.recorder import NodeTrace

__all__ = ["arrays_outside_nodes", "derived_from", "mirror", "outside_nodes", "written_outside"]

# Calls that return their first argument's values unchanged when dtype and shape stay the same.
_IDENTITY_LIKE = frozenset(
    "alias as_tensor bfloat16 clone contiguous cpu cuda detach detach_ double float half "
    "requires_grad_ reshape_as to type view_as".split()
)
# NumPy calls (as leapp.trace.numpy_recorder names them) that keep values, dtype and shape.
_IDENTITY_LIKE_NUMPY = frozenset(
    "numpy.copy ndarray.astype numpy.ravel numpy.reshape numpy.squeeze numpy.positive".split()
)


def outside_nodes(func: Any, op: Operation, args: tuple, kwargs: dict, owner: NodeTrace) -> Any:
    """Run ``func`` eagerly on values of ``owner`` (a closed node of an active recording):
    identity-like results keep standing for the published output, other tensor results are
    marked as derived (see the module documentation)."""
    with torch._C.DisableTorchFunctionSubclass():
        result = func(*args, **kwargs)
    source = args[0] if args else None
    name = getattr(func, "__name__", "")
    if isinstance(result, torch.Tensor) and _keeps_values(name, source, result):
        return _stand_in(result, source)
    what = f"{op.name} at {user_location()}"
    if op.mutates and isinstance(source, torch.Tensor):
        _mark(source, owner, what)  # the object itself now holds values computed here
        return result
    if isinstance(result, torch.Tensor):
        return _derived(result, owner, what)
    if isinstance(result, (tuple, list)):
        items = [_derived(r, owner, what) if isinstance(r, torch.Tensor) else r for r in result]
        return items if isinstance(result, list) else type(result)(items)
    return result


def derived_from(value: Any) -> str | None:
    """``"<call> at <file:line>"`` when ``value`` was computed from a published output outside
    any node, else None."""
    traced = isinstance(value, (TracedTensor, TracedArray))
    return getattr(value, "_leapp_derived", None) if traced else None


def arrays_outside_nodes(what: str, args: Any, result: Any) -> Any:
    """``result`` of NumPy call ``what`` on ``args`` outside any node: standing for the same
    published output when the call is identity-like, marked derived when ``args`` held a value
    of the recording, else unchanged."""
    live = [leaf for leaf in pytree.tree_leaves(args) if _of_recording(leaf)]
    if not live:
        return result
    source = args[0] if isinstance(args, tuple) and args else None
    if (
        what in _IDENTITY_LIKE_NUMPY
        and isinstance(source, TracedArray)
        and source._leapp_node is not None
        and derived_from(source) is None
        and isinstance(result, np.ndarray)
        and result.shape == source.shape
        and result.dtype == source.dtype
    ):
        return wrap_array(result, source._leapp_trace, source._leapp_node)
    return _derived_arrays(result, live[0]._leapp_trace, f"{what} at {user_location()}")


def written_outside(target: Any, what: str) -> None:
    """``target`` was written outside any node: if it stands for a value of the recording,
    it is derived from now on."""
    if isinstance(target, TracedArray) and _of_recording(target):
        target._leapp_derived = f"{what} at {user_location()}"


def mirror(source: Any, target: Any) -> Any:
    """``target`` standing for the same traced value as ``source`` (which it must equal)."""
    if isinstance(source, Mapping) and isinstance(target, Mapping):
        _check_same(source, target, set(source) == set(target), "the same keys")
        return type(target)((key, mirror(value, target[key])) for key, value in source.items())
    if isinstance(source, (list, tuple)) and isinstance(target, (list, tuple)):
        _check_same(source, target, len(source) == len(target), "the same length")
        return type(target)(mirror(s, t) for s, t in zip(source, target, strict=True))
    if not is_live(source):
        return target
    if isinstance(source, TracedArray) and derived_from(source) is None:
        tensor_view(source)  # raises when the array's graph value is unknown
    if not isinstance(target, (torch.Tensor, np.ndarray)):
        _check_same(source, target, False, "a torch.Tensor or np.ndarray as target")
    a, b = _plain_tensor(source), _plain_tensor(target)
    same = a.shape == b.shape and a.dtype == b.dtype and a.device == b.device
    _check_same(source, target, same and torch.equal(a, b), "equal shape, dtype and values")
    trace, node = source._leapp_trace, source._leapp_node
    if isinstance(target, np.ndarray):
        target = wrap_array(target, trace, node)
    elif type(target) in (torch.Tensor, TracedTensor):
        target.__class__ = TracedTensor  # the caller's object, as LEAPP marks it
        target._leapp_trace, target._leapp_node = trace, node
    else:
        target = _stand_in(target, source)
    target._leapp_derived = derived_from(source)
    return target


def _check_same(source: Any, target: Any, same: bool, what: str) -> None:
    if not same:
        raise TraceError(
            f"annotate.mirror_leapp_tags at {user_location()}: target must equal source "
            f"({what}); got source {_summary(source)} and target {_summary(target)}. Mirror "
            "only a value that holds exactly the traced one."
        )


def _summary(value: Any) -> str:
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return f"{type(value).__name__} {list(value.shape)} {value.dtype}"
    return type(value).__name__


def _plain_tensor(value: Any) -> torch.Tensor:
    if isinstance(value, np.ndarray):
        return shared_tensor(value.view(np.ndarray))[0]
    with torch._C.DisableTorchFunctionSubclass():
        return value.detach().as_subclass(torch.Tensor)


def _of_recording(value: Any) -> bool:
    return is_live(value) and value._leapp_trace.closed


def _derived_arrays(result: Any, owner: NodeTrace, what: str) -> Any:
    if isinstance(result, (tuple, list)):
        items = [_derived_arrays(item, owner, what) for item in result]
        return items if isinstance(result, list) else type(result)(items)
    if not isinstance(result, np.ndarray):
        return result  # NumPy scalars and Python values leave the graph anyway
    derived = result.view(np.ndarray).view(TracedArray)
    derived._leapp_trace, derived._leapp_node, derived._leapp_derived = owner, None, what
    return derived


def _keeps_values(name: str, source: Any, result: torch.Tensor) -> bool:
    return (
        name in _IDENTITY_LIKE
        and isinstance(source, TracedTensor)
        and derived_from(source) is None
        and result.dtype == source.dtype
        and result.shape == source.shape
    )


def _stand_in(result: torch.Tensor, source: TracedTensor) -> TracedTensor:
    """``result`` as the same published output as ``source``."""
    if result is source:
        return source
    with torch._C.DisableTorchFunctionSubclass():
        traced = result.as_subclass(TracedTensor)
    traced._leapp_trace = source._leapp_trace
    traced._leapp_node = source._leapp_node
    return traced


def _derived(result: torch.Tensor, owner: NodeTrace, what: str) -> TracedTensor:
    with torch._C.DisableTorchFunctionSubclass():
        traced = result.as_subclass(TracedTensor)
    return _mark(traced, owner, what)


def _mark(value: torch.Tensor, owner: NodeTrace, what: str) -> TracedTensor:
    """Mark ``value`` (this very object) as derived; a plain tensor becomes a TracedTensor."""
    if not isinstance(value, TracedTensor):
        value.__class__ = TracedTensor
    value._leapp_trace = owner  # type: ignore[attr-defined]
    value._leapp_node = None  # type: ignore[attr-defined]
    value._leapp_derived = what  # type: ignore[attr-defined]
    return value  # type: ignore[return-value]
