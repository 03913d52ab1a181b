"""Buffers of a node run: annotate.register_buffer's, and a module's (annotate.module).

A buffer is memory the node writes into and reads back within one run: a preallocated NumPy
``obs`` filled by slice writes every tick, a torch scratch tensor, or the registered buffers of
an ``nn.Module`` (a GRU's hidden state kept as ``self.h``).

- :func:`register` (``annotate.register_buffer``): the buffer's value at registration becomes a
  constant of the node's graph, and what the node writes into it afterwards is recorded, so
  ``obs[:3] = omega * 0.25; torch.from_numpy(obs)`` exports a graph computing ``obs`` from the
  node's inputs. A torch tensor is traced in place (the same object, given back its plain class
  when the run ends); a NumPy array cannot change class, so the traced array that shares its
  memory is returned and the writes must go through it.
- :func:`module_buffers`, :func:`inject`, :func:`collect` (``annotate.module``): the module's
  buffers are declared as states of the node; when the node closes, a buffer the forward pass
  reassigned (``self.h = h_new``) or wrote in place (``self.h.copy_(h_new)``) is a state whose
  next value is the new one, any other buffer is baked back into a constant. The module gets
  its buffers back (plain tensors, current values) when the run ends, also on errors.

Declaring a buffer as an input of the node that wrote into it is refused by
:mod:`leapp.trace.pipeline.sources`, which finds registered buffers in ``NodeTrace.registered``.
"""

from __future__ import annotations

import logging
import re
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from leapp.errors import GraphError, TraceError
from leapp.numpy.operands import shared_tensor
from leapp.trace.arrays.array import is_live, wrap_array
from leapp.trace.location import user_location
from leapp.trace.tensors.tensor import TracedTensor, wrap

if TYPE_CHECKING:
    import torch.fx as fx

    from leapp.trace.tensors.node_trace import NodeTrace

__all__ = [
    "TrackedBuffer",
    "collect",
    "inject",
    "module_buffers",
    "register",
]

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------ annotate.register_buffer
def register(trace: NodeTrace, name: str, value: Any) -> Any:
    """Trace ``value`` as buffer ``name`` of the open ``trace`` and return the traced value."""
    where = f"node {trace.node!r}: buffer {name!r} at {user_location()}"
    if not isinstance(value, (torch.Tensor, np.ndarray)):
        raise TraceError(
            f"{where} is a {type(value).__name__}; register a torch.Tensor or an np.ndarray."
        )
    _check_plain(trace, where, value)
    if name in trace.registered:
        raise GraphError(f"{where}: the node already has a buffer named {name!r}; rename one.")
    if isinstance(value, np.ndarray):
        plain = value.view(np.ndarray)
        tensor, shared = shared_tensor(plain)
        start = _start(trace, name, tensor)
        traced = wrap_array(plain, trace, start, wrap(tensor, trace, start) if shared else None)
    elif type(value) is torch.Tensor:
        trace.adopt_mutated(value)  # the same object records from now on
        value._leapp_node.meta["leapp_buffer"] = name
        traced = value
    else:  # a Parameter, or a value left traced by an earlier run: a traced view of it
        traced = wrap(value, trace, _start(trace, name, value))
    trace.registered[name] = traced
    return traced


def _start(trace: NodeTrace, name: str, tensor: torch.Tensor) -> fx.Node:
    """A copy of ``tensor``'s current value, frozen in the graph: the buffer's first value."""
    node = trace.graph.call_function(torch.clone, (trace.constant(tensor),))
    node.meta["example_value"] = (tuple(tensor.shape), tensor.dtype)
    node.meta["leapp_buffer"] = name
    return node


def _check_plain(trace: NodeTrace, where: str, value: Any) -> None:
    """Refuse a value of an open node and another node's published output."""
    if not is_live(value):
        return
    owner = value._leapp_trace
    if not owner.closed:
        raise TraceError(
            f"{where} is already a traced value of node {owner.node!r}. Register the plain "
            "buffer before anything traced is written into it (right after "
            f"annotate.input_tensors({trace.node!r}, ...))."
        )
    node = value._leapp_node
    published = [
        port
        for port, out in owner.outputs.items()
        if out is node or owner.output_values.get(port) is value
    ]
    if published and owner.node != trace.node:
        raise TraceError(
            f"{where} is the output {published[0]!r} of node {owner.node!r}; a registered "
            "buffer is a constant of the node, so that edge would be lost. Pass it with "
            f"annotate.input_tensors({trace.node!r}, {{...}}) instead."
        )


# --------------------------------------------------------------------- annotate.module
@dataclass
class TrackedBuffer:
    """One module buffer declared as a state of a node run by ``annotate.module``."""

    name: str  # dotted, as model.named_buffers() names it
    port: str  # the state port
    owner: torch.nn.Module  # the (sub)module holding it
    attr: str
    original: torch.Tensor  # the buffer before the run
    injected: TracedTensor  # what the module holds during the run
    version: int  # injected._version when injected: an in-place write changes it


def module_buffers(trace: NodeTrace, model: Any, names: Any) -> dict[str, tuple]:
    """``{port: (dotted name, owning module, attribute, buffer)}`` to track for ``model``."""
    where = f"annotate.module({trace.node!r}, ...) at {user_location()}"
    if not isinstance(model, torch.nn.Module):
        raise TraceError(f"{where}: model must be a torch.nn.Module, got {type(model).__name__}.")
    found = dict(model.named_buffers())
    if names is not None:
        wanted = [names] if isinstance(names, str) else list(names)
        unknown = [n for n in wanted if n not in found]
        if unknown:
            raise TraceError(
                f"{where}: buffer_names {unknown} are not buffers of the model; its buffers "
                f"are {list(found)} (dotted names, as model.named_buffers() gives them)."
            )
        found = {n: b for n, b in found.items() if n in wanted}
    tracked = {}
    for name, buffer in found.items():
        if isinstance(buffer, TracedTensor) and buffer._leapp_trace is trace:
            logger.debug("node %r: buffer %r is already tracked", trace.node, name)
            continue
        path, _, attr = name.rpartition(".")
        owner = model.get_submodule(path) if path else model
        tracked[_port_name(name)] = (name, owner, attr, buffer)
    return tracked


def _port_name(name: str) -> str:
    """``encoder.running_mean`` -> ``encoder_running_mean``; ``_h`` -> ``h``."""
    port = re.sub(r"[^A-Za-z0-9_]", "_", name.replace(".", "_")).lstrip("_")
    return port if port[:1].isalpha() else f"buffer_{port}"


def inject(trace: NodeTrace, tracked: dict[str, tuple], traced: tuple) -> None:
    """Put the traced states into the module; they are handed back when the run ends."""
    entries = []
    for (port, (name, owner, attr, buffer)), value in zip(tracked.items(), traced, strict=True):
        setattr(owner, attr, value)
        entries.append(TrackedBuffer(name, port, owner, attr, buffer, value, value._version))
    trace.tracked_buffers.extend(entries)
    trace.releases.append(lambda: _restore(entries))
    logger.debug("node %r: tracking buffers %s", trace.node, [e.name for e in entries])


def collect(trace: NodeTrace) -> dict[str, Any]:
    """``{state port: next value}`` of the tracked buffers the run changed; the others are
    baked back into constants (their ports removed)."""
    changed = {}
    for entry in trace.tracked_buffers:
        current = getattr(entry.owner, entry.attr, None)
        if current is not entry.injected:
            changed[entry.port] = current  # reassigned: self.h = h_new
        elif entry.injected._version != entry.version:
            changed[entry.port] = current  # written in place: self.h.copy_(h_new)
        else:
            _bake(trace, entry)
    if changed:
        logger.debug("node %r: buffers changed by the run, now states: %s", trace.node, changed)
    trace.tracked_buffers.clear()
    return changed


def _bake(trace: NodeTrace, entry: TrackedBuffer) -> None:
    """Turn the state input of an unchanged buffer back into a constant of the graph."""
    graph = trace.graph
    placeholder = trace.inputs.pop(entry.port)
    tables = (trace.input_examples, trace.input_sources, trace.input_semantics)
    for table in (*tables, trace.external_inputs):
        table.pop(entry.port, None)
    trace.state_ports.remove(entry.port)
    first = next((n for n in graph.nodes if n.op != "placeholder"), None)
    with graph.inserting_before(first) if first is not None else nullcontext():
        constant = trace.constant(entry.original)
    placeholder.replace_all_uses_with(constant)
    graph.erase_node(placeholder)
    entry.injected._leapp_node = constant


def _restore(entries: list[TrackedBuffer]) -> None:
    """Give the module its buffers back as plain tensors holding their current values."""
    for entry in entries:
        current = getattr(entry.owner, entry.attr, None)
        if current is entry.injected or not isinstance(current, torch.Tensor):
            value = entry.original  # shares the injected value's memory: same values
        else:
            with torch._C.DisableTorchFunctionSubclass():
                value = current.as_subclass(torch.Tensor)
        setattr(entry.owner, entry.attr, value)
