"""The annotations that mark pipeline nodes in user code.

Each ``input_tensors`` / ``output_tensors`` pair marks one node::

    state, velocity = annotate.input_tensors("preprocess", {"state": s, "velocity": v})
    obs = torch.cat([state, velocity])
    annotate.output_tensors("preprocess", {"obs": obs}, export_with="jit")

Outside a session (before ``leapp.start`` or after ``leapp.stop``) both return the values they
were given, unchanged, and record nothing: annotated code runs in production untouched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from leapp.errors import TraceError
from leapp.session import active_session

__all__ = ["input_tensors", "output_tensors", "state_tensors", "update_state"]


def input_tensors(node: str, tensors: Mapping[str, torch.Tensor]) -> Any:
    """Declare inputs of ``node`` and return their traced values.

    Returns one value when ``tensors`` has one entry, else a tuple in dict order. May be called
    several times for a node before ``output_tensors`` closes it. A value published by another
    node's ``output_tensors`` becomes an edge between the two nodes.
    """
    values = _check_mapping("input_tensors", node, tensors)
    session = active_session()
    if session is not None:
        values = session.input_tensors(node, tensors)
    return values[0] if len(values) == 1 else values


def state_tensors(node: str, tensors: Mapping[str, torch.Tensor]) -> Any:
    """Declare recurrent state of ``node`` (a GRU/LSTM hidden state, a filter memory).

    Pass the current value: the initial value on the first tick, then what the previous tick
    handed to :func:`update_state`. Returns the traced values like :func:`input_tensors`. Each
    state is an input and an output of the node, wired as a ``feedback_flow`` edge from the node
    to itself; its first value is saved as the initial value (``<name>_initial_values``).
    """
    values = _check_mapping("state_tensors", node, tensors)
    session = active_session()
    if session is not None:
        values = session.input_tensors(node, tensors, state=True)
    return values[0] if len(values) == 1 else values


def update_state(node: str, tensors: Mapping[str, torch.Tensor]) -> Any:
    """Give every state of ``node`` its next value; call before :func:`output_tensors`.

    Returns the values given (one, or a tuple in dict order), to pass to
    :func:`state_tensors` on the next tick.
    """
    values = _check_mapping("update_state", node, tensors)
    session = active_session()
    if session is not None:
        session.update_state(node, tensors)
    return values[0] if len(values) == 1 else values


def output_tensors(
    node: str,
    tensors: Mapping[str, torch.Tensor],
    export_with: Any = "jit",
    static_outputs: Mapping[str, torch.Tensor] | Iterable[str] | None = None,
) -> Any:
    """Declare the outputs of ``node``, close it, and return the values given (one or a tuple).

    ``export_with`` picks the artifact: ``"jit"`` (TorchScript ``<node>.pt``), ``"onnx"``,
    ``"pt2"`` (``torch.export``), ``None`` (record the node, export nothing) or the path of an
    artifact you built yourself. ``static_outputs`` declares outputs that do not depend on the
    inputs (gains, limits): a mapping ``{name: tensor}`` of extra constant outputs, or the names
    of entries of ``tensors`` that are constants.
    """
    values = _check_mapping("output_tensors", node, tensors)
    session = active_session()
    if session is not None:
        session.output_tensors(node, tensors, export_with, static_outputs)
    return values[0] if len(values) == 1 else values


def _check_mapping(where: str, node: Any, tensors: Any) -> tuple[Any, ...]:
    if not isinstance(node, str):
        raise TraceError(f"annotate.{where}: the node name must be a str, got {node!r}.")
    if not isinstance(tensors, Mapping) or not tensors:
        raise TraceError(
            f"annotate.{where}({node!r}, ...): pass a non-empty dict {{name: tensor}}, got "
            f"{type(tensors).__name__}."
        )
    return tuple(tensors.values())
