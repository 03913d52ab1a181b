"""TracedTensor: a torch.Tensor that records what is done to it.

A :class:`TracedTensor` shares storage with the tensor handed to ``annotate.input_tensors`` (same
``data_ptr()``). Every torch operation on it runs eagerly, exactly as on a plain tensor, and is
also recorded into the ``torch.fx`` graph of the pipeline node that owns it. This module only
hooks the documented ``__torch_function__`` protocol: it hands every call to the function in
:data:`DISPATCH`, which the recorder (:mod:`leapp.trace.tensors.recorder`) registers when it is
imported; importing this package imports the recorder, so a traced tensor never runs without it.
The owner of a traced tensor is a :class:`~leapp.trace.tensors.node_trace.NodeTrace`, known here
only as an :class:`Owner`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:
    from torch.fx import Node

__all__ = ["DISPATCH", "Dispatch", "Owner", "TracedTensor", "adopt", "plain_again", "wrap"]


class Owner(Protocol):
    """What a traced tensor knows of the trace that owns it (a
    :class:`~leapp.trace.tensors.node_trace.NodeTrace`): the name of its node."""

    node: str


def _no_recorder(func: Any, types: tuple, args: tuple, kwargs: dict) -> Any:
    raise RuntimeError(
        f"{getattr(func, '__name__', func)} on a TracedTensor: no recorder is registered. "
        "Import leapp.trace.tensors.recorder (importing leapp.trace.tensors does) before tracing."
    )


@dataclass
class Dispatch:
    """Where :class:`TracedTensor` hands the torch calls on it: ``torch_call(func, types, args,
    kwargs)``, set by :mod:`leapp.trace.tensors.recorder` when it is imported."""

    torch_call: Callable[[Any, tuple, tuple, dict], Any] = _no_recorder


DISPATCH = Dispatch()


class TracedTensor(torch.Tensor):
    """A tensor owned by one run of one pipeline node.

    ``_leapp_trace`` is the :class:`~leapp.trace.tensors.node_trace.NodeTrace` that records
    operations on it and ``_leapp_node`` the ``torch.fx`` node that produced its current value.
    """

    _leapp_trace: Owner | None
    _leapp_node: Node | None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return DISPATCH.torch_call(func, types, args, kwargs or {})

    @property
    def tensor(self) -> torch.Tensor:
        """The plain ``torch.Tensor`` holding the current value (same storage, not traced).

        Operations on it are not recorded; use it to hand the value to code outside the
        pipeline (logging, plotting), not to compute node outputs.
        """
        with torch._C.DisableTorchFunctionSubclass():
            return self.as_subclass(torch.Tensor)

    def __repr__(self, *, tensor_contents=None) -> str:
        with torch._C.DisableTorchFunctionSubclass():
            text = torch.Tensor.__repr__(self)
        trace = getattr(self, "_leapp_trace", None)
        owner = f", node={trace.node!r}" if trace is not None else ""
        return f"TracedTensor({text}{owner})"


def wrap(value: torch.Tensor, trace: Owner, node: Node) -> TracedTensor:
    """Return a TracedTensor sharing ``value``'s storage, recorded as ``node`` of ``trace``."""
    with torch._C.DisableTorchFunctionSubclass():
        traced = value.as_subclass(TracedTensor)
    traced._leapp_trace = trace
    traced._leapp_node = node
    return traced


def adopt(value: torch.Tensor, trace: Owner, node: Node) -> TracedTensor:
    """Turn a plain tensor object into a TracedTensor in place (same Python object).

    Used when traced values are written into a tensor that was created inside the node without
    tracing (``buf = torch.zeros(9); buf[:6] = state``): every later use of ``buf`` must see the
    recorded value, so the object itself starts recording.
    """
    value.__class__ = TracedTensor
    value._leapp_trace = trace
    value._leapp_node = node
    return value  # type: ignore[return-value]


def plain_again(value: Any) -> None:
    """Make a TracedTensor object a plain ``torch.Tensor`` again, in place (same object).

    At ``leapp.stop()`` the values the session handed out stop recording, as NVIDIA LEAPP's
    do: code after the session (or the next session) sees ordinary tensors.
    """
    if isinstance(value, TracedTensor):
        value.__class__ = torch.Tensor
        for attribute in [name for name in vars(value) if name.startswith("_leapp_")]:
            delattr(value, attribute)
