"""Where each input a node declares comes from, and what it may not be.

:func:`source_of` is asked for every port ``annotate.input_tensors`` / ``state_tensors``
declare:

- a published output of a closed node (or a value standing for it after an identity-like
  handover, :mod:`leapp.trace.tensors.handover`) is the
  :class:`~leapp.trace.tensors.node_trace.PortSource` of an edge; a value computed from one
  outside any node, a value of a node still open, or a value a closed node computed but did not
  publish are refused;
- a value the node computed itself (composable functions annotated with the same node) becomes
  a fresh input, with a warning, as NVIDIA LEAPP does: the computation before it is not part of
  the node's graph, the exported node takes that port as input. Refused instead, because the
  export would silently have two independent ports for one value: an input declared again
  under another name, and a buffer the node wrote its inputs into (``b.copy_(x)``,
  ``b[:] = x``, a registered buffer);
- a torch buffer the producing node traced in place (registered, or written with traced
  values) and published is a plain tensor again once that node closes
  (:meth:`~leapp.trace.tensors.node_trace.NodeTrace.release_adopted`); :func:`remember_outputs`
  keeps it so that it is still the edge it stands for, unless it was written since (outside any
  node);
- anything else is an external input; two external inputs of one node must not share memory
  (``{"a": buf, "b": buf[:3]}``, or one tensor twice), which would also be two ports for one
  buffer.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from leapp.errors import GraphError, TraceError
from leapp.trace.arrays.array import TracedArray, rebind
from leapp.trace.location import user_location
from leapp.trace.tensors.handover import derived_from
from leapp.trace.tensors.node_trace import PortSource
from leapp.trace.tensors.tensor import TracedTensor

if TYPE_CHECKING:
    from leapp.trace.tensors.node_trace import NodeTrace

__all__ = ["in_place_outputs", "rebind_own", "remember_outputs", "source_of"]

logger = logging.getLogger(__name__)


def source_of(trace: NodeTrace, port: str, value: Any, plain: Any) -> PortSource | None:
    """The published output feeding input ``port`` of ``trace``, or None for a port fed from
    outside; ``plain`` is ``value`` as torch (a traced array's TracedTensor)."""
    if isinstance(plain, TracedTensor) and plain._leapp_trace is trace:
        _own_value(trace, port, value, plain)
        source = None
    else:
        source = _published(trace, port, plain) or _plain_output(trace, port, plain)
    if source is None:
        _check_alias(trace, port, value)
    return source


def rebind_own(trace: NodeTrace, original: Any, traced: Any) -> None:
    """After a node's own value became a fresh input: the object the caller passed stands for
    the fresh input too (as in LEAPP, which rebinds the caller's object)."""
    if original is traced or getattr(original, "_leapp_trace", None) is not trace:
        return
    if isinstance(original, TracedArray):
        rebind(original, traced._leapp_node)
    elif isinstance(original, TracedTensor):
        original._leapp_node = traced._leapp_node


def in_place_outputs(trace: NodeTrace, values: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(port, value)`` of the outputs about to be published that are tensors traced in place
    (the run gives them their plain class back when it closes)."""
    adopted = trace._adopted
    return [(p, v) for p, v in values.items() if any(v is a for a in adopted)]


def remember_outputs(trace: NodeTrace, outputs: list[tuple[str, Any]]) -> None:
    """After ``trace`` closed: its published plain-again buffers, for :func:`_plain_output`."""
    table = trace.recording.plain_outputs
    for port, value in outputs:
        source = PortSource(trace.node, port, trace.run)
        table[id(value)] = (weakref.ref(value), source, value._version)


def _plain_output(trace: NodeTrace, port: str, value: Any) -> PortSource | None:
    """The edge a published, plain-again buffer stands for, if ``value`` is one."""
    if type(value) is not torch.Tensor:
        return None
    entry = trace.recording.plain_outputs.get(id(value))
    if entry is None or entry[0]() is not value:
        return None
    _, source, version = entry
    if value._version != version:
        raise TraceError(
            f"node {trace.node!r}: input {port!r} at {user_location()} is the buffer node "
            f"{source.node!r} published as {source.port!r}, written since outside any node, so "
            "no exported artifact computes its value. Do that write inside a node, or hand "
            "over the published buffer unchanged."
        )
    return source


def _published(trace: NodeTrace, port: str, value: Any) -> PortSource | None:
    """The published output ``value`` came from, or None for an external input."""
    owner = getattr(value, "_leapp_trace", None) if isinstance(value, TracedTensor) else None
    if owner is None or owner.recording is not trace.recording:
        return None
    where = user_location()
    derived = derived_from(value)
    if derived is not None:
        raise TraceError(
            f"node {trace.node!r}: input {port!r} at {where} was computed from an output "
            f"of node {owner.node!r} outside any node ({derived}), so no exported artifact "
            "computes it. Do that computation inside a node (after "
            "annotate.input_tensors), or hand over the published output itself: "
            "identity-like calls (.detach(), .clone(), .cpu(), .to(same dtype), .copy(), "
            "np.asarray) keep the edge."
        )
    if not owner.closed:
        raise TraceError(
            f"node {trace.node!r}: input {port!r} at {where} is a value of node "
            f"{owner.node!r}, which is still open. Close it with "
            f"annotate.output_tensors({owner.node!r}, ...) and pass the published output."
        )
    node = value._leapp_node
    for name, published in owner.output_values.items():
        # the published object, a stand-in for it (an identity-like handover, a mirrored
        # copy), or the graph value the output was cloned from (an input passed through)
        if published is value or node in (owner.outputs[name], _node_of(published)):
            return PortSource(owner.node, name, owner.run)
    for name, (state_node, _) in owner.state_updates.items():  # a state output's own value
        if state_node is node:
            return PortSource(owner.node, name, owner.run)
    for name, placeholder in owner.inputs.items():  # an input of the owner, handed on as it is
        if placeholder is node:  # fed as that input was: by an output, or from outside (None)
            return owner.input_sources.get(name)
    raise TraceError(
        f"node {trace.node!r}: input {port!r} at {where} was computed inside node "
        f"{owner.node!r} but is not one of its published outputs; add it to "
        f"annotate.output_tensors({owner.node!r}, {{...}})."
    )


def _node_of(value: Any) -> Any:
    return getattr(value, "_leapp_node", None) if isinstance(value, TracedTensor) else None


def _check_alias(trace: NodeTrace, port: str, value: Any) -> None:
    """Refuse an external input sharing memory with another external input of the node."""
    memory = _memory(value)
    if memory is None:
        return
    for other, other_memory in trace.external_inputs.items():
        if _overlap(memory, other_memory):
            raise GraphError(
                f"node {trace.node!r}: inputs {other!r} and {port!r} (at {user_location()}) "
                "are the same memory (one buffer, or views of it), so the exported node would "
                "take two independent ports for it. Declare the buffer once and take its parts "
                "inside the node (after annotate.input_tensors)."
            )
    trace.external_inputs[port] = memory


def _memory(value: Any) -> Any:
    """``value``'s memory as a plain ndarray view, or a (device, start, end) byte range."""
    if isinstance(value, np.ndarray):
        plain = value.view(np.ndarray)
        return plain if plain.size else None
    with torch._C.DisableTorchFunctionSubclass():
        tensor = value.detach().as_subclass(torch.Tensor)
    if tensor.numel() == 0:
        return None
    if tensor.device.type == "cpu":
        try:
            return tensor.numpy()
        except (TypeError, RuntimeError):  # bfloat16 and friends: compare byte ranges
            pass
    strides = zip(tensor.shape, tensor.stride(), strict=True)
    span = sum((size - 1) * stride for size, stride in strides)
    start = tensor.data_ptr()
    return (str(tensor.device), start, start + (span + 1) * tensor.element_size())


def _overlap(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        try:
            return bool(np.shares_memory(a, b, max_work=10_000))
        except np.exceptions.TooHardError:
            return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = (_byte_range(x) if isinstance(x, np.ndarray) else x for x in (a, b))
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def _byte_range(array: np.ndarray) -> tuple[str, int, int]:
    low, high = np.lib.array_utils.byte_bounds(array)
    return ("cpu", low, high)


def _own_value(trace: NodeTrace, port: str, original: Any, value: TracedTensor) -> None:
    """``value``, computed by ``trace`` itself, is declared as its input ``port``: refuse a
    buffer written from the node's inputs or an input declared again; otherwise it becomes a
    fresh input (NVIDIA LEAPP's behaviour) and the caller's object stands for it from now on."""
    where = user_location()
    node = value._leapp_node
    if node is not None and node.op == "placeholder":
        raise GraphError(
            f"node {trace.node!r}: input {port!r} at {where} is the value of its input "
            f"{node.meta.get('leapp_port', node.target)!r}; one value cannot be two ports. Use "
            "the value annotate.input_tensors returned."
        )
    buffers = [*trace.registered.values(), *trace._adopted]
    if any(original is b or value is b for b in buffers):
        sources, written = _written_from(node)
        held = f"values written from its input(s) {sources}" if sources else "written values"
        raise TraceError(
            f"node {trace.node!r}: input {port!r} at {where} is a buffer holding {held} "
            f"(written at {written}); as another input it would be a second, independent "
            "port fed separately. Use the input itself, or declare the buffer as an input "
            "before writing into it."
        )
    logger.warning(
        "node %r: input %r at %s is a value the node computed itself; it becomes a fresh input "
        "and the computation before it is not part of the node's graph",
        trace.node,
        port,
        where,
    )


def _written_from(node: Any) -> tuple[list[str], str]:
    """The input ports a buffer's value was computed or written from, and where the first
    write happened (in-place writes are users of the buffer's node, functional ones its
    ancestors)."""
    users = list(node.users) if node is not None else []
    seen, todo, ports = set(), [node, *users] if node is not None else [], []
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.op == "placeholder":
            ports.append(current.meta.get("leapp_port", current.target))
        todo.extend(current.all_input_nodes)
    located = [n.meta["leapp_location"] for n in [node, *users] if "leapp_location" in n.meta]
    return sorted(ports), located[0] if located else "in the node"
