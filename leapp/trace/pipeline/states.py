"""Rules for the states of a node run (``annotate.state_tensors`` / ``update_state``).

A state is an input of the node and an output of the same name, wired as a ``feedback_flow``
edge from the node to itself. :func:`check_update` refuses a next value that cannot replace the
state (another shape or dtype); :func:`unupdated_as_inputs` makes a state the run never gave a
next value a regular input of the node, as NVIDIA LEAPP does (only states given to
``update_state`` are fed back), with a warning on the node's first run.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import torch

from leapp.errors import GraphError

if TYPE_CHECKING:
    from leapp.trace.tensors.node_trace import NodeTrace

__all__ = ["check_update", "unupdated_as_inputs"]

logger = logging.getLogger(__name__)


def check_update(trace: NodeTrace, port: str, value: Any, where: str) -> None:
    """Refuse a next value of state ``port`` whose shape or dtype is not the state's."""
    example = trace.input_examples.get(port)
    if example is None or not isinstance(value, torch.Tensor):
        return  # not a tensor: refused later with the reason
    if tuple(value.shape) != tuple(example.shape) or value.dtype != example.dtype:
        raise GraphError(
            f"node {trace.node!r}: update_state at {where} gives state {port!r} a "
            f"{_describe(value)} value, but the state is {_describe(example)}; the next value "
            "is fed back as the state's input on the next tick, so it must have the same shape "
            "and dtype."
        )


def unupdated_as_inputs(trace: NodeTrace) -> None:
    """Every state of ``trace`` not given a next value becomes a regular input of the node
    (no feedback edge, no initial value: the caller feeds it every tick)."""
    unupdated = [port for port in trace.state_ports if port not in trace.state_updates]
    if not unupdated:
        return
    if trace.run == 0:
        logger.warning(
            "node %r: state(s) %s never given a next value with annotate.update_state are "
            "regular inputs of the node, fed by the caller every tick, as in NVIDIA LEAPP; "
            "give each its next value with annotate.update_state(%r, {...}) to feed it back",
            trace.node,
            unupdated,
            trace.node,
        )
    for port in unupdated:
        trace.state_ports.remove(port)


def _describe(value: torch.Tensor) -> str:
    return f"{list(value.shape)} {str(value.dtype).removeprefix('torch.')}"
