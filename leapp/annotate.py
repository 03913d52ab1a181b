"""The annotations that mark pipeline nodes in user code.

Each ``input_tensors`` / ``output_tensors`` pair marks one node::

    state, velocity = annotate.input_tensors("preprocess", {"state": s, "velocity": v})
    obs = torch.cat([state, velocity])
    annotate.output_tensors("preprocess", {"obs": obs}, export_with="jit")

or one decorated function is one node (NVIDIA LEAPP's decorator)::

    @annotate.method(export_with="jit")
    def preprocess(state, velocity):
        obs = torch.cat([state, velocity])
        return obs

Outside a session (before ``leapp.start`` or after ``leapp.stop``) the annotations return the
values they were given, unchanged, and record nothing (a decorated function is simply called):
annotated code runs in production untouched. The decorator is :mod:`leapp.decorated_node`'s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from leapp.compilation import compile_graph as compile_session_graph
from leapp.decorated_node import method
from leapp.errors import SessionError, TraceError
from leapp.semantics import TensorSemantics
from leapp.session import active_session
from leapp.session import start as start_session
from leapp.session import stop as stop_session
from leapp.trace.arrays.handover import mirror
from leapp.trace.location import user_location
from leapp.trace.payload import read_payload
from leapp.trace.segments import warp_calls

__all__ = [
    "compile_graph",
    "input_tensors",
    "method",
    "mirror_leapp_tags",
    "module",
    "output_tensors",
    "register_buffer",
    "start",
    "state_tensors",
    "stop",
    "update_state",
    "warp_op",
]

_method = method  # NVIDIA LEAPP's legacy spelling of the decorator (annotate._method)


def input_tensors(node: str, tensors: Any) -> Any:
    """Declare inputs of ``node`` and return their traced values.

    ``tensors`` is a dict ``{name: tensor}``, a :class:`~leapp.TensorSemantics` or a list of
    them (the port's ``kind``, ``element_names``, ... go into the spec). A value may be a dict,
    list or tuple of tensors, nested as deep as you like: each tensor is one port named by its
    path (``{"group": {"x": a}}`` is ``group_x``, ``{"batch": [a, b]}`` is ``batch_0`` and
    ``batch_1``), and comes back in the same structure.

    Returns one entry's value when ``tensors`` has one entry (a traced tensor, or the rebuilt
    dict/list/tuple), else a tuple of them in order. May be called several times for a node
    before ``output_tensors`` closes it. A value published by another node's
    ``output_tensors`` becomes an edge between the two nodes.
    """
    payload = read_payload("input_tensors", node, tensors)
    session = active_session()
    if session is None:
        return payload.given()
    _outside_decorated_call("input_tensors", node, session)
    traced = session.input_tensors(node, payload.ports, semantics=payload.semantics)
    return payload.restructured(traced)


def state_tensors(node: str, tensors: Any) -> Any:
    """Declare recurrent state of ``node`` (a GRU/LSTM hidden state, a filter memory).

    Pass the current value: the initial value on the first tick, then what the previous tick
    handed to :func:`update_state`. Returns the traced values like :func:`input_tensors`. Each
    state given a next value with :func:`update_state` is an input and an output of the node,
    wired as a ``feedback_flow`` edge from the node to itself; its first value is saved as the
    initial value (``<name>_initial_values``). A state never given one is a regular input of
    the node, fed by the caller every tick, as in NVIDIA LEAPP (warned). Each
    state is one named tensor (a dict, a TensorSemantics or a list of them); a nested
    container is refused.
    """
    payload = read_payload("state_tensors", node, tensors, nested=False)
    session = active_session()
    if session is None:
        return payload.given()
    _outside_decorated_call("state_tensors", node, session)
    traced = session.input_tensors(node, payload.ports, state=True, semantics=payload.semantics)
    return payload.restructured(traced)


def _outside_decorated_call(api: str, node: str, session: Any) -> None:
    """Refuse annotating another node inside a decorated call: that call is one node."""
    running = session.running_method
    if running is not None and running != node:
        raise TraceError(
            f"annotate.{api}({node!r}) at {user_location()} runs inside the decorated call of "
            f"node {running!r}: the whole call is that one node, so no other node can be "
            'annotated in it (NVIDIA LEAPP: "Mixing active contexts is not allowed"). '
            f"Annotate {node!r} before or after the call."
        )


def update_state(node: str, tensors: Any) -> Any:
    """Give every state of ``node`` its next value; call before :func:`output_tensors`.

    Returns the values given (one, or a tuple in dict order), to pass to
    :func:`state_tensors` on the next tick.
    """
    payload = read_payload("update_state", node, tensors, nested=False)
    session = active_session()
    if session is not None:
        session.update_state(node, payload.ports, payload.semantics)
    return payload.given()


def output_tensors(
    node: str,
    tensors: Any,
    export_with: Any = "jit",
    static_outputs: Any = None,
) -> Any:
    """Declare the outputs of ``node``, close it, and return the values given (one or a tuple).

    ``tensors`` takes the forms :func:`input_tensors` takes (nested containers are flattened
    into one port per tensor the same way). ``export_with`` picks the artifact: ``"jit"``
    (TorchScript ``<node>.pt``), ``"onnx"``, ``"pt2"`` (``torch.export``), ``None`` (record the
    node, export nothing) or the path of an artifact you built yourself. ``static_outputs``
    declares outputs that do not depend on the inputs (gains, limits): a mapping ``{name:
    tensor}`` (or TensorSemantics) of extra constant outputs, or the names of entries of
    ``tensors`` that are constants.
    """
    payload = read_payload("output_tensors", node, tensors)
    session = active_session()
    if session is not None:
        semantics = dict(payload.semantics)
        if _holds_tensors(static_outputs):
            constants = read_payload("output_tensors static_outputs", node, static_outputs)
            static_outputs, semantics = constants.ports, {**semantics, **constants.semantics}
        session.output_tensors(
            node, payload.ports, export_with, static_outputs, semantics=semantics
        )
    return payload.given()


def _holds_tensors(static_outputs: Any) -> bool:
    """Whether ``static_outputs`` gives constant tensors (not the names of outputs)."""
    if isinstance(static_outputs, (Mapping, TensorSemantics)):
        return True
    return isinstance(static_outputs, (list, tuple)) and any(
        isinstance(item, TensorSemantics) for item in static_outputs
    )


def register_buffer(node: str, tensors: Any) -> Any:
    """Trace buffers of ``node``: memory the node writes into, then reads (NVIDIA LEAPP's API).

    ::

        omega, qj = annotate.input_tensors("policy", {"omega": omega, "qj": qj})
        obs = annotate.register_buffer("policy", {"obs": obs})  # a preallocated np.zeros(47)
        obs[:3] = omega * 0.25
        obs[9:21] = qj - DEFAULT_ANGLES
        action = policy(torch.from_numpy(obs).unsqueeze(0))

    ``tensors`` is a dict ``{name: tensor}`` (values may nest dicts, lists and tuples, named
    and handed back as :func:`input_tensors` does), one tensor or a list of them (named
    ``buffer_0``, ``buffer_1``, ... in registration order); tensors and NumPy arrays. Call it
    while the node is open (after :func:`input_tensors`). Each buffer's value now is frozen
    into the node's artifact as a constant, and what the node writes into it afterwards
    (slice assignments, ``copy_``, ``out=``) is recorded, so the export computes the buffer
    from the node's inputs. Returns the traced values (one, or a tuple in order): a torch
    tensor is traced in place (the same object, plain again once the node closes); a NumPy
    array comes back as a traced array sharing its memory, so write into the returned
    array. A buffer that still holds last tick's values where the node does not overwrite
    them is exported with its values at registration (use :func:`state_tensors` for real
    state). Outside a session the values are returned unchanged.
    """
    if _holds_tensors(tensors):  # named (a dict, TensorSemantics), maybe nested
        payload = read_payload("register_buffer", node, tensors)
        session = active_session()
        if session is None:
            return payload.given()
        return payload.restructured(session.register_buffer(node, payload.ports))
    if not isinstance(node, str):
        raise TraceError(f"annotate.register_buffer: the node name must be a str, got {node!r}.")
    values = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
    if not values:
        raise TraceError(
            f"annotate.register_buffer({node!r}, ...): pass a tensor, a list of tensors or a "
            "non-empty dict {name: tensor}."
        )
    session = active_session()
    if session is not None:
        values = list(session.register_buffer(node, values))
    return values[0] if len(values) == 1 else tuple(values)


def module(node: str, model: Any, buffer_names: Any = None) -> None:
    """Track the registered buffers of ``model`` (an ``nn.Module``) for this run of ``node``.

    ::

        obs = annotate.input_tensors("policy", {"obs": obs})
        annotate.module("policy", gru_policy)  # its forward does self.h = self.gru(obs, self.h)
        action = gru_policy(obs)
        annotate.output_tensors("policy", {"action": action})

    Call it after :func:`input_tensors` and before the forward pass, on every tick. The
    buffers (``model.named_buffers()``, or only the dotted names in ``buffer_names``) are
    declared as states of the node, named with dots as underscores (``encoder.h`` is
    ``encoder_h``). When ``output_tensors`` closes the node, a buffer the forward pass
    reassigned (``self.h = h_new``) or wrote in place (``self.h.copy_(h_new)``) is a state:
    an input and an output fed back to itself, starting from its value on the first tick. Every
    other buffer (a normalizer's mean) is frozen into the artifact as a constant. The model
    gets its buffers back as plain tensors holding their current values when the node closes
    (also when its code raises, and at ``leapp.stop()``). Outside a session nothing happens.
    """
    session = active_session()
    if session is not None:
        session.track_module(node, model, buffer_names)


def warp_op(node: str, inputs: Any = None, outputs: Any = None, **params: Any) -> Any:
    """Context manager: the Warp calls in the block are one Warp segment of ``node``.

    ::

        state = annotate.input_tensors("physics", {"state": state})
        with annotate.warp_op("physics"):
            q = wp.from_torch(state, dtype=wp.quat)
            wp.launch(gravity_in_body, dim=1, inputs=[q], outputs=[g_body])
        g = wp.to_torch(g_body)

    Warp calls on a node's values are recorded without it (each run of Warp calls between
    torch operations is one segment); the block also records calls that touch none of the
    node's arrays (a kernel filling a scratch array), and starts and ends a segment where it
    starts and ends. Call it after ``input_tensors`` opened the node. ``inputs``, ``outputs``
    and other keywords are NVIDIA LEAPP's; leapp finds a segment's inputs and outputs itself
    and ignores them. Outside a session the block runs unrecorded.
    """
    session = active_session()
    if session is None or getattr(session, "dry_run", False):
        return contextlib.nullcontext()  # a dry run records no Warp segments either
    del inputs, outputs, params
    trace = session.open.get(node)
    if trace is None:
        raise SessionError(
            f"annotate.warp_op({node!r}) at {user_location()}: node {node!r} has no open run. "
            f"Call annotate.input_tensors({node!r}, {{...}}) first."
        )
    return warp_calls.explicit_segment(trace)


def mirror_leapp_tags(source: Any, target: Any) -> Any:
    """Return ``target`` carrying ``source``'s tracing identity (NVIDIA LEAPP's API).

    For a value that went through code leapp cannot see but came out equal, e.g. a published
    output copied into a preallocated message buffer: ``target`` must equal ``source`` exactly
    (shape, dtype, device, values; dicts, lists and tuples element by element), else a
    :class:`~leapp.TraceError` is raised. A torch ``target`` is marked in place and returned;
    a NumPy ``target`` comes back as a traced array sharing its memory. Handing the result to
    another node's :func:`input_tensors` then records the edge ``source`` would have. A plain
    ``source`` leaves ``target`` plain (it must still equal it). Outside a session ``target`` is
    returned unchanged.
    """
    session = active_session()
    if session is None:
        return target
    if getattr(session, "dry_run", False):
        return session.mirror(source, target)
    return mirror(source, target)


# NVIDIA LEAPP's earlier spelling, still in its guides and user code: the session calls on
# ``annotate`` (``annotate.start(name=...)``, ``annotate.stop()``, ``annotate.compile_graph()``).
def start(*args: Any, **kwargs: Any) -> Any:
    """:func:`leapp.start` (LEAPP's earlier ``annotate.start``)."""
    return start_session(*args, **kwargs)


def stop() -> None:
    """:func:`leapp.stop` (LEAPP's earlier ``annotate.stop``)."""
    stop_session()


def compile_graph(*args: Any, **kwargs: Any) -> Any:
    """:func:`leapp.compile_graph` (LEAPP's earlier ``annotate.compile_graph``)."""
    return compile_session_graph(*args, **kwargs)
