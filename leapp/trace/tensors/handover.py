"""Torch calls on published outputs between nodes, outside any open node.

A node's published output stays a :class:`~leapp.trace.tensors.tensor.TracedTensor` after the
node is closed, so that handing it to another node's ``annotate.input_tensors`` records an edge
(``data_flow``, or ``feedback_flow`` on a later tick). Code between nodes often passes it on
through an identity-like call — ``.detach()``, ``.clone()``, ``.contiguous()``, ``.cpu()``,
``.to(<same dtype>)``, ``.float()`` on float32, ``.view_as(<same shape>)``,
``torch.as_tensor`` — whose result holds the same values: it still stands for the published
output, so the edge survives.

Any other computation on a published output outside a node (``out * 2``, ``out.double()``,
``torch.cat([out, x])``, an in-place ``out.mul_(2)``) is not part of any node, so no exported
artifact would compute it. Its result is marked as derived (:func:`derived_from`); handing it to
a node's ``input_tensors`` raises a :class:`~leapp.errors.TraceError` naming the call and the
user's line. Using it otherwise (logging, a simulator step, a Python number) is fine.

NumPy outputs follow the same rules (:mod:`leapp.trace.arrays.handover`, which also holds
``annotate.mirror_leapp_tags``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from leapp.trace.location import user_location
from leapp.trace.tensors.tensor import TracedTensor

if TYPE_CHECKING:
    from leapp.trace.tensors.node_trace import NodeTrace
    from leapp.trace.tensors.operation import Operation

__all__ = ["derived_from", "outside_nodes", "stand_in"]

# Calls that return their first argument's values unchanged when dtype and shape stay the same.
_IDENTITY_LIKE = frozenset(
    "alias as_tensor bfloat16 clone contiguous cpu cuda detach detach_ double float half "
    "requires_grad_ reshape_as to type view_as".split()
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
        return stand_in(result, source)
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
    traced = isinstance(value, (TracedTensor, np.ndarray))  # a TracedArray's mark, too
    return getattr(value, "_leapp_derived", None) if traced else None


def _keeps_values(name: str, source: Any, result: torch.Tensor) -> bool:
    return (
        name in _IDENTITY_LIKE
        and isinstance(source, TracedTensor)
        and derived_from(source) is None
        and result.dtype == source.dtype
        and result.shape == source.shape
    )


def stand_in(result: torch.Tensor, source: TracedTensor) -> TracedTensor:
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
