"""NumPy calls on published outputs between nodes, and ``annotate.mirror_leapp_tags``.

NumPy outputs (:class:`~leapp.trace.arrays.array.TracedArray`) follow the rules of torch ones
(:mod:`leapp.trace.tensors.handover`): outside any node, ``.copy()``, ``np.array(out)``,
``np.asarray(out)``, ``out.astype(<same dtype>)``, ``np.ravel`` / ``np.reshape`` /
``np.squeeze`` to the same shape keep standing for the output (:func:`arrays_outside_nodes`);
other NumPy calls give derived arrays, and a write into the output (``out[:] = 0``,
``np.copyto``, ``out=``) marks it derived (:func:`written_outside`).

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
from leapp.trace.arrays.array import TracedArray, is_live, tensor_view, wrap_array
from leapp.trace.location import user_location
from leapp.trace.tensors.handover import derived_from, stand_in
from leapp.trace.tensors.tensor import TracedTensor

if TYPE_CHECKING:
    from leapp.trace.tensors.node_trace import NodeTrace

__all__ = ["arrays_outside_nodes", "mirror", "written_outside"]

# NumPy calls (as leapp.trace.arrays.numpy_recorder names them) that keep values, dtype and shape.
_IDENTITY_LIKE_NUMPY = frozenset(
    "numpy.copy ndarray.astype numpy.ravel numpy.reshape numpy.squeeze numpy.positive".split()
)


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
    if not is_live(source):  # plain: the target stays plain, but must equal it all the same
        if isinstance(source, (torch.Tensor, np.ndarray)):
            _check_equal(source, target)
        return target
    if isinstance(source, TracedArray) and derived_from(source) is None:
        tensor_view(source)  # raises when the array's graph value is unknown
    _check_equal(source, target)
    trace, node = source._leapp_trace, source._leapp_node
    if isinstance(target, np.ndarray):
        target = wrap_array(target, trace, node)
    elif type(target) in (torch.Tensor, TracedTensor):
        target.__class__ = TracedTensor  # the caller's object, as LEAPP marks it
        target._leapp_trace, target._leapp_node = trace, node
    else:
        target = stand_in(target, source)
    target._leapp_derived = derived_from(source)
    return target


def _check_equal(source: Any, target: Any) -> None:
    if not isinstance(target, (torch.Tensor, np.ndarray)):
        _check_same(source, target, False, "a torch.Tensor or np.ndarray as target")
    a, b = _plain_tensor(source), _plain_tensor(target)
    same = a.shape == b.shape and a.dtype == b.dtype and a.device == b.device
    _check_same(source, target, same and torch.equal(a, b), "equal shape, dtype and values")


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
