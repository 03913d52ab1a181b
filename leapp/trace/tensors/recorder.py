"""The torch recorder: every torch call on a TracedTensor, run eagerly and recorded.

:func:`dispatch` is what :class:`~leapp.trace.tensors.tensor.TracedTensor` hands every torch
call to (this module registers it in the tensor's dispatch table when imported): it runs the
call eagerly and records it, under its own torch name, into the
:class:`~leapp.trace.tensors.node_trace.NodeTrace` that owns the traced arguments
(:func:`owning_trace`: values of two open nodes in one call are refused). Turning traced data
into a Python value is refused, or frozen when the session allows it
(:class:`FrozenValueWarning`). Calls on published outputs between nodes go to
:mod:`leapp.trace.tensors.handover`; NumPy arrays and TorchScript calls to the tracers above
this package, through :mod:`leapp.trace.tensors.extensions`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from leapp.errors import TraceError
from leapp.trace.location import user_location
from leapp.trace.tensors.extensions import EXTENSIONS
from leapp.trace.tensors.handover import outside_nodes
from leapp.trace.tensors.node_trace import NodeTrace, example_of, trace_of
from leapp.trace.tensors.operation import (
    NUMBER_HINT,
    Operation,
    describe,
    is_script_call,
    script_name,
)
from leapp.trace.tensors.tensor import DISPATCH, TracedTensor

__all__ = [
    "VALUES_OF_TWO_NODES",
    "FrozenValueWarning",
    "Refusals",
    "dispatch",
    "owning_trace",
    "python_value_of",
]


class FrozenValueWarning(UserWarning):
    """A traced value was turned into a Python constant because the session allows it."""


def dispatch(func: Any, types: tuple, args: tuple, kwargs: dict) -> Any:
    """Run one torch call eagerly and record it into the open node that owns its arguments."""
    leaves = pytree.tree_leaves((args, kwargs))
    to_tensor = EXTENSIONS.array_to_tensor  # NumPy arrays in a torch call: traced or constants
    if to_tensor is not None and any(isinstance(leaf, np.ndarray) for leaf in leaves):
        args, kwargs = pytree.tree_map_only(np.ndarray, to_tensor, (args, kwargs))
        leaves = pytree.tree_leaves((args, kwargs))
    traces = {id(t): t for t in map(trace_of, leaves) if t}
    trace = owning_trace(func, list(traces.values()))
    script_call = EXTENSIONS.script_call
    if trace is not None and script_call is not None and is_script_call(func):
        return script_call(trace, func, args, kwargs)  # inlined as its ATen operations
    op = describe(func, args, kwargs)
    if trace is not None and not trace.recording.numpy_crossing and _reads_into_numpy(func):
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)  # leapp.start(global_patching=False): plain NumPy
    if op.kind == "to_numpy" and EXTENSIONS.tensor_to_array is not None:
        return EXTENSIONS.tensor_to_array(func, args, kwargs)
    if trace is None and op.kind not in ("metadata", "to_numpy"):
        closed = [t for t in traces.values() if t.recording.active]
        if closed:  # published outputs between nodes
            return outside_nodes(func, op, args, kwargs, closed[0])
    if trace is None or op.kind in ("metadata", "to_numpy"):
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)
    if op.kind == "python_value":
        return python_value_of(trace, op, func, args, kwargs)
    if op.kind == "unsupported":
        raise TraceError(
            f"node {trace.node!r}: {op.name} at {user_location()} cannot be recorded: {op.hint}"
        )
    target = args[0] if args else None
    if op.mutates and isinstance(target, torch.Tensor) and not isinstance(target, TracedTensor):
        trace.adopt_mutated(target)
    record_args = op.rewrite_args(args) if op.rewrite_args else args
    with torch._C.DisableTorchFunctionSubclass():
        result = func(*args, **kwargs)
    if isinstance(result, (bool, int, float, complex)):
        data = Operation("python_value", func, f"{op.name}()", hint=NUMBER_HINT)
        return python_value_of(trace, data, func, args, kwargs, result)
    node = trace.record(op, record_args, kwargs)
    node.meta["example_value"] = example_of(result)
    return trace.wrap_result(result, node, args)


@dataclass(frozen=True)
class Refusals:
    """The messages refusing a call on values of two node runs: ``two_open`` when both runs are
    open, ``closed_inside`` when a closed run's value is used inside an open one. Fields:
    ``{what}`` (the call), ``{where}`` (the user's line), ``{a}``, ``{b}`` (the two nodes)."""

    two_open: str
    closed_inside: str


VALUES_OF_TWO_NODES = Refusals(
    two_open=(
        "{what} at {where} mixes values of the open nodes {a!r} and {b!r}. Values cross nodes "
        "only as published outputs: close {a!r} with annotate.output_tensors and pass the "
        "value to annotate.input_tensors({b!r}, ...)."
    ),
    closed_inside=(
        "{what} at {where} uses a value of node {a!r} (already closed) inside node {b!r} "
        "without declaring it: pass it through annotate.input_tensors({b!r}, {{...}}) so the "
        "edge is recorded (a buffer the node writes into on every run: "
        "annotate.register_buffer({b!r}, {{...}}) on every run)."
    ),
)


def owning_trace(
    what: Any,
    traces: list[NodeTrace],
    refusals: Refusals = VALUES_OF_TWO_NODES,
    *,
    also_open: NodeTrace | None = None,
) -> NodeTrace | None:
    """The single open trace among ``traces`` (the owners of the values call ``what`` uses,
    and ``also_open`` when given: the node of an ``annotate.warp_op`` block); None when nothing
    is being recorded. Values of two open runs, or of a closed run inside an open one, are
    refused with the messages of ``refusals``."""
    live = [t for t in traces if t.recording.active]
    open_traces = [t for t in live if not t.closed]
    if also_open is not None and not any(t is also_open for t in open_traces):
        open_traces.append(also_open)
    closed = [t for t in live if t.closed]
    if len(open_traces) > 1:
        a, b = open_traces[0].node, open_traces[1].node
        message = refusals.two_open
    elif open_traces and closed:
        a, b = closed[0].node, open_traces[0].node
        message = refusals.closed_inside
    else:
        return open_traces[0] if open_traces else None
    raise TraceError(message.format(what=_call_name(what), where=user_location(), a=a, b=b))


def _call_name(func: Any) -> str:
    if isinstance(func, str):
        return func
    if is_script_call(func):
        return f"TorchScript {script_name(func)}"
    return getattr(func, "__name__", repr(func))


def _reads_into_numpy(func: Any) -> bool:
    return getattr(func, "__name__", None) in ("numpy", "__array__")


def python_value_of(trace, op, func, args, kwargs, result=None):
    """``.item()``, ``bool()``, ``float()``... on traced data: refuse, or freeze when allowed."""
    where = user_location()
    if not trace.recording.freeze_python_values:
        raise TraceError(
            f"node {trace.node!r}: {op.name} at {where} turns a traced tensor into a Python "
            "value, which the exported graph cannot follow (the branch or number taken now "
            f"would be baked in). {op.hint} To freeze the current value on purpose, start the "
            "session with leapp.start(..., freeze_python_values=True)."
        )
    if result is None:
        with torch._C.DisableTorchFunctionSubclass():
            result = func(*args, **kwargs)
    warnings.warn(
        f"node {trace.node!r}: {op.name} at {where} froze a traced value as the constant "
        f"{result!r}; the export will always use it.",
        FrozenValueWarning,
        stacklevel=2,
    )
    return result


# TracedTensor.__torch_function__ hands every torch call on a traced tensor to dispatch.
DISPATCH.torch_call = dispatch
