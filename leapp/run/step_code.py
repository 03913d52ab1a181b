"""The body of :meth:`leapp.run.pipeline.Pipeline.step`, written out for one pipeline.

A step of a given export always does the same thing: check each external input, call the nodes
in order with values at fixed places, collect the outputs, carry the feedback values. Like
``torch.fx`` turning a graph into Python source, :func:`compile_step` writes that sequence as
straight-line Python (one local variable per value, one call per node, no loop and no lookup
on the data path) and compiles it once at load. ``Pipeline.step_source`` shows it.

Gradients are off around the node calls, unless every node is ``grad_free``: its run records
no autograd history whatever the grad mode, given inputs that do not require gradients (the
static runtime runs in inference mode, an ONNX node copies values into its own buffers). Such
a step skips the two grad-mode switches and detaches instead the inputs that require gradients
(a slow path: the same values, no history), which gives the same results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from leapp.errors import PipelineError

__all__ = ["NodeCall", "compile_step"]


@dataclass(frozen=True)
class NodeCall:
    """One node in a step: ``call`` takes the values at ``reads`` and returns ``outputs``
    values, which go to the slots ``first``, ``first + 1``, ... (a slot is a value of the
    step: an external input, a node output, or, from ``feedback_base`` on, a feedback input).
    ``single``, for a node of one output, is the same run taking the values positionally and
    returning the one value: the step calls it instead, with no list, tuple or count check.
    ``grad_free``: the run records no autograd history in any grad mode (see the module
    docstring)."""

    name: str
    call: Callable[[Sequence[torch.Tensor]], Sequence[torch.Tensor]]
    reads: tuple[int, ...]
    first: int
    outputs: int
    single: Callable[..., torch.Tensor] | None = None
    grad_free: bool = False


def compile_step(
    *,
    inputs: Sequence[tuple[int, str, torch.dtype, tuple[int, ...]]],
    nodes: Sequence[NodeCall],
    output_keys: Sequence[tuple[int, str]],
    feedback_base: int,
    feedback_moves: Sequence[tuple[int, int]],
    feedback: list[Any],
    input_keys: frozenset[str],
    key_error: Callable[[Any], Exception],
    check_value: Callable[..., None],
) -> tuple[Callable[[Any], dict[str, torch.Tensor]], str]:
    """The step function and its source.

    Args:
        inputs: ``(slot, key, dtype, shape)`` of every external input.
        nodes: the nodes in execution order.
        output_keys: ``(slot, "node/port")`` of every value the step returns, in order.
        feedback_base: the first feedback slot; feedback slot ``s`` is ``feedback[s - base]``.
        feedback_moves: ``(producer slot, feedback slot)`` pairs carried after each step.
        feedback: the list the feedback values live in (the pipeline keeps and resets it).
        input_keys: the keys a step takes, exactly.
        key_error: builds the error for a mapping with other keys.
        check_value: raises the error for a value of the wrong type, dtype or shape.
    """
    constants: dict[str, Any] = {
        "Tensor": torch.Tensor,
        "key_error": key_error,
        "check_value": check_value,
        "is_grad_enabled": torch.is_grad_enabled,
        "set_grad_enabled": torch._C._set_grad_enabled,
        "feedback": feedback,
        "count_error": _count_error,
    }

    def value(slot: int) -> str:
        return f"feedback[{slot - feedback_base}]" if slot >= feedback_base else f"v{slot}"

    grad_free = all(node.grad_free for node in nodes)
    # As many keys as the step takes, each of them found: exactly the keys it takes.
    lines = [
        "def step(inputs):",
        f"    if len(inputs) != {len(input_keys)}:",
        "        raise key_error(inputs)",
    ]
    if inputs:
        lines.append("    try:")
        lines += [f"        v{slot} = inputs[{key!r}]" for slot, key, _, _ in inputs]
        lines += ["    except KeyError:", "        raise key_error(inputs) from None"]
    for slot, key, dtype, shape in inputs:
        constants[f"dtype{slot}"], constants[f"shape{slot}"] = dtype, torch.Size(shape)
        v, d, s = f"v{slot}", f"dtype{slot}", f"shape{slot}"
        wrong = f"type({v}) is not Tensor or {v}.dtype is not {d} or {v}.shape != {s}"
        lines += [
            f"    if {wrong}{f' or {v}.requires_grad' if grad_free else ''}:",
            f"        check_value({key!r}, {v}, {d}, {s})",
        ]
        if grad_free:
            lines.append(f"        {v} = {v}.detach()")
    indent = "    " if grad_free else "        "
    if not grad_free:
        lines += ["    grad = is_grad_enabled()", "    set_grad_enabled(False)", "    try:"]
    for n, node in enumerate(nodes):
        arguments = ", ".join(value(slot) for slot in node.reads)
        if node.single is not None and node.outputs == 1:
            constants[f"call{n}"] = node.single
            lines.append(f"{indent}v{node.first} = call{n}({arguments})  # node {node.name}")
            continue
        constants[f"call{n}"], constants[f"node{n}"] = node.call, node.name
        targets = "".join(f"v{node.first + i}, " for i in range(node.outputs))
        lines += [
            f"{indent}results = call{n}([{arguments}])  # node {node.name}",
            f"{indent}if len(results) != {node.outputs}:",
            f"{indent}    raise count_error(node{n}, results, {node.outputs})",
        ]
        if node.outputs:
            lines.append(f"{indent}{targets}= results")
    if not grad_free:
        lines += ["    finally:", "        set_grad_enabled(grad)"]
    for producer, consumer in feedback_moves:
        lines.append(f"    {value(consumer)} = {value(producer)}")
    returned = ", ".join(f"{key!r}: {value(slot)}" for slot, key in output_keys)
    lines.append(f"    return {{{returned}}}")
    source = "\n".join(lines) + "\n"
    namespace = dict(constants)
    exec(
        compile(source, "<leapp step>", "exec"), namespace
    )  # our own source, from the spec's names
    return namespace["step"], source


def _count_error(node: str, results: Sequence[Any], expected: int) -> PipelineError:
    return PipelineError(
        f"node {node!r} returned {len(results)} outputs, its spec lists {expected}; re-export "
        "the node"
    )
