"""Rules for the states of a node run (``annotate.state_tensors`` / ``update_state``).

A state is an input of the node and an output of the same name, wired as a ``feedback_flow``
edge from the node to itself. :func:`check_update` refuses a next value that cannot replace the
state (another shape or dtype); :func:`pass_through` gives a state the run never updated its own
input as next value (NVIDIA LEAPP's ``update_state`` is optional: the state keeps its value),
and refuses it when the recorded runs show that the value did change between ticks: then it
is an input, not a state.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import torch

from leapp.errors import GraphError

if TYPE_CHECKING:
    from leapp.trace.tensors.recorder import NodeTrace

__all__ = ["check_update", "pass_through"]

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


def pass_through(trace: NodeTrace, previous: list[NodeTrace]) -> None:
    """Every state of ``trace`` not updated keeps its input value as its next value."""
    for port in trace.state_ports:
        if port in trace.state_updates:
            continue
        example = trace.input_examples[port]
        last = previous[-1].input_examples.get(port) if previous else None
        if last is not None and not torch.equal(last, example):
            raise GraphError(
                f"node {trace.node!r}: state {port!r} is never given a next value with "
                f"annotate.update_state, so the export keeps it unchanged, but run "
                f"{trace.run} (at {trace.location}) declared it with another value than run "
                f"{previous[-1].run}. Call annotate.update_state({trace.node!r}, {{{port!r}: "
                "next}}) before annotate.output_tensors, or declare it with "
                "annotate.input_tensors if it comes from outside the node."
            )
        logger.debug(
            "node %r: state %r is not updated; it passes through unchanged", trace.node, port
        )
        trace.state_updates[port] = (trace.inputs[port], example)


def _describe(value: torch.Tensor) -> str:
    return f"{list(value.shape)} {str(value.dtype).removeprefix('torch.')}"
