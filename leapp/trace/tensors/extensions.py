"""What the torch recorder hands to the tracers above it: NumPy and TorchScript.

The recorder (:mod:`leapp.trace.tensors.recorder`) sees every torch call on a traced tensor,
but knows nothing of the packages that trace NumPy arrays (:mod:`leapp.trace.arrays`) and
TorchScript calls (:mod:`leapp.trace.scripts`): they sit above it, and each sets its entries of
:data:`EXTENSIONS` when it is imported. An entry nobody set leaves the call to torch, as if that
tracer did not exist:

- ``array_to_tensor``: a NumPy array among a torch call's arguments (``torch.add(t, a)``),
  as the torch value standing for it (a traced array's TracedTensor, else a constant);
- ``tensor_to_array``: ``tensor.numpy()`` on a traced tensor, as a traced array;
- ``script_call``: a TorchScript method called on a node's values, recorded inline.

Warp segments (:mod:`leapp.trace.segments`) take part where a node freezes a constant
(:data:`leapp.trace.tensors.node_trace.CONSTANT_HOOKS`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from leapp.trace.tensors.node_trace import NodeTrace

__all__ = ["EXTENSIONS", "Extensions"]


@dataclass
class Extensions:
    """The functions the torch recorder calls on behalf of the tracers above it."""

    array_to_tensor: Callable[[Any], Any] | None = None
    tensor_to_array: Callable[[Any, tuple, dict], Any] | None = None
    script_call: Callable[[NodeTrace, Any, tuple, dict], Any] | None = None


EXTENSIONS = Extensions()
