"""The NumPy source of a small frozen TorchScript graph: one Python function, one local per value.

:func:`program_source` writes each operation of the graph with its writer in
:data:`OPERATIONS` (the functional forms of exact arithmetic, comparisons and moves of values)
as one line of NumPy calls, into one function over the graph's inputs and constants, with no
lookup on the way (as :mod:`leapp.run.step_code` does for a step); its names are those of
:data:`NAMESPACE`. Anything else in the graph (another operation, an ``alpha``, a rounding
mode) raises :class:`RefusedError`. Whether the function computes exactly what the graph does
is checked by :mod:`leapp.run.numpy_program`. The function never writes into its inputs, and its
results own their memory (a result that would be a view of an input or of a constant is
copied).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__ = ["NAMESPACE", "OPERATIONS", "RefusedError", "program_source"]


class RefusedError(Exception):
    """The graph holds something this module does not write as NumPy."""


class _TensorArgument:
    """A placeholder for an argument known only at run time (a tensor)."""

    def __repr__(self) -> str:
        return "<tensor>"


_Tensor = _TensorArgument()


def _binary(function: str) -> Callable[[list[str], list[Any]], str]:
    def write(args: list[str], values: list[Any]) -> str:
        if len(args) == 3 and values[2] is not _Tensor and values[2] == 1:
            pass  # add/sub's alpha, at its default
        elif len(args) != 2:
            raise RefusedError(f"{function} with arguments {values[2:]!r} (alpha)")
        return f"{function}({args[0]}, {args[1]})"

    return write


def _unary(function: str) -> Callable[[list[str], list[Any]], str]:
    def write(args: list[str], values: list[Any]) -> str:
        if len(args) != 1:
            raise RefusedError("extra arguments")
        return f"{function}({args[0]})"

    return write


def _div(args: list[str], values: list[Any]) -> str:
    if len(args) == 3 and values[2] is not None:
        raise RefusedError(f"rounding_mode={values[2]!r}")
    return f"true_divide({args[0]}, {args[1]})"


def _clamp(args: list[str], values: list[Any]) -> str:
    low, high = values[1], values[2]
    text = args[0]
    if low is not None:
        text = f"maximum({text}, {args[1]})"
    if high is not None:
        text = f"minimum({text}, {args[2]})"
    return text if text != args[0] else f"copy({text})"


def _cat(args: list[str], values: list[Any]) -> str:
    return f"concatenate({args[0]}, axis={int(values[1])})"


def _stack(args: list[str], values: list[Any]) -> str:
    return f"stack({args[0]}, axis={int(values[1])})"


def _unsqueeze(args: list[str], values: list[Any]) -> str:
    return f"expand_dims({args[0]}, {int(values[1])})"


def _squeeze(args: list[str], values: list[Any]) -> str:
    if len(args) == 1:
        return f"squeeze({args[0]})"
    if not isinstance(values[1], int):
        raise RefusedError("squeeze over several dimensions")
    return f"squeeze_dim({args[0]}, {int(values[1])})"


def _reshape(args: list[str], values: list[Any]) -> str:
    return f"reshape({args[0]}, {args[1]})"


def _select(args: list[str], values: list[Any]) -> str:
    dim, index = int(values[1]), int(values[2])
    if dim < 0:
        raise RefusedError("select along a negative dimension")
    return f"{args[0]}[{'(slice(None),) * ' + str(dim) + ' + ' if dim else ''}({index},)]"


def _slice(args: list[str], values: list[Any]) -> str:
    dim, start, end, step = values[1:5]
    if int(dim) < 0:
        raise RefusedError("slice along a negative dimension")
    bounds = ":".join("" if v is None else str(int(v)) for v in (start, end, step))
    lead = ":, " * int(dim)
    return f"{args[0]}[{lead}{bounds}]"


def _identity(args: list[str], values: list[Any]) -> str:
    return args[0]


OPERATIONS: dict[str, Callable[[list[str], list[Any]], str]] = {
    "aten::add": _binary("add"),
    "aten::sub": _binary("subtract"),
    "aten::mul": _binary("multiply"),
    "aten::div": _div,
    "aten::maximum": _binary("maximum"),
    "aten::minimum": _binary("minimum"),
    "aten::neg": _unary("negative"),
    "aten::abs": _unary("absolute"),
    "aten::clamp": _clamp,
    "aten::clamp_min": lambda a, v: f"maximum({a[0]}, {a[1]})",
    "aten::clamp_max": lambda a, v: f"minimum({a[0]}, {a[1]})",
    "aten::cat": _cat,
    "aten::concat": _cat,
    "aten::stack": _stack,
    "aten::unsqueeze": _unsqueeze,
    "aten::squeeze": _squeeze,
    "aten::reshape": _reshape,
    "aten::view": _reshape,
    "aten::select": _select,
    "aten::slice": _slice,
    "aten::clone": lambda a, v: f"copy({a[0]})",
    "aten::contiguous": _identity,
    "aten::detach": _identity,
}
"""The operations a graph may hold (their functional forms; in-place ones are refused): exact
arithmetic (IEEE rounds each to the nearest value, in NumPy as in ATen), comparisons and
moves of values. Functions that libraries approximate differently stay out even where a
check could pass by chance: ATen's vectorized ``tanh`` and even ``sqrt`` differ from NumPy's
in the last bit for a part of all inputs."""


def _squeeze_dim(value: np.ndarray, dim: int) -> np.ndarray:
    """``Tensor.squeeze(dim)``: a dimension of size 1 goes, any other stays."""
    if value.ndim and value.shape[dim] == 1:
        return np.squeeze(value, dim)
    return value


def _owned(value: Any, borrowed: tuple[Any, ...]) -> np.ndarray:
    """``value`` as an array owning its memory (a copy where it is a view, a scalar, an input
    or a constant)."""
    if value.__class__ is np.ndarray and value.base is None:
        for other in borrowed:  # (a loop, not any(): no generator frame per run)
            if value is other:
                break
        else:
            return value
    return np.array(value)


# The names the written source calls, and what they are.
NAMESPACE = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "true_divide": np.true_divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "negative": np.negative,
    "absolute": np.absolute,
    "copy": np.copy,
    "concatenate": np.concatenate,
    "stack": np.stack,
    "expand_dims": np.expand_dims,
    "squeeze": np.squeeze,
    "squeeze_dim": _squeeze_dim,
    "reshape": np.reshape,
    "owned": _owned,
}


def program_source(graph: Any, inputs: int) -> tuple[str, dict[str, Any]]:
    """The Python source of ``graph`` (a frozen TorchScript graph with ``inputs`` tensor
    inputs after ``self``) as NumPy calls, and the constants it reads.

    Raises:
        RefusedError: an operation or an argument this module does not write.
    """
    graph_inputs = list(graph.inputs())
    if len(graph_inputs) != inputs + 1:
        raise RefusedError(f"{len(graph_inputs) - 1} graph inputs for {inputs} ports")
    names: dict[Any, str] = {}  # torch Value -> its expression (a local or a literal)
    known: dict[Any, Any] = {}  # torch Value -> its Python value, for non-tensor constants
    constants: dict[str, Any] = {}
    tuples: dict[Any, list[str]] = {}  # torch Value -> its members' expressions
    lines: list[str] = []
    arguments = [f"v{n}" for n in range(inputs)]
    for value, name in zip(graph_inputs[1:], arguments, strict=True):
        names[value] = name
    for node in graph.nodes():
        kind = node.kind()
        outputs = list(node.outputs())
        args = list(node.inputs())
        if any(arg not in names for arg in args):
            raise RefusedError(f"{kind} reads a value this program does not have")
        if kind == "prim::Constant":
            (output,) = outputs
            value = output.toIValue()
            if isinstance(value, torch.Tensor):
                name = f"c{len(constants)}"
                constants[name] = value.detach().cpu().numpy().copy()
                names[output] = name
            elif value is None or isinstance(value, (bool, int, float)):
                names[output] = repr(value)
                known[output] = value
            elif isinstance(value, (list, tuple)) and all(
                isinstance(item, (bool, int, float)) for item in value
            ):
                names[output] = repr(list(value))
                known[output] = list(value)
            else:
                raise RefusedError(f"a constant of type {type(value).__name__}")
            continue
        if kind == "prim::ListConstruct":
            (output,) = outputs
            names[output] = "[" + "".join(f"{names[arg]}, " for arg in args) + "]"
            if all(arg in known for arg in args):
                known[output] = [known[arg] for arg in args]
            continue
        if kind == "prim::TupleConstruct":  # the results (checked at the return below)
            (output,) = outputs
            tuples[output] = [names[arg] for arg in args]
            names[output] = "(" + "".join(f"{names[arg]}, " for arg in args) + ")"
            continue
        write = OPERATIONS.get(kind)
        if write is None or len(outputs) != 1:
            raise RefusedError(f"operation {kind}")
        if outputs[0].type().kind() != "TensorType":  # aten::add of two int lists, say
            raise RefusedError(f"operation {kind} on {outputs[0].type()}")
        if not str(node.schema()).startswith(kind) or "(a!)" in str(node.schema()):
            raise RefusedError(f"operation {node.schema()}")
        texts = [names[arg] for arg in args]
        values = [known.get(arg, _Tensor) for arg in args]
        local = f"t{len(lines)}"
        lines.append(f"    {local} = {write(texts, values)}")
        names[outputs[0]] = local
    (returned,) = list(graph.return_node().inputs())
    if returned in tuples:
        results = tuples[returned]
    elif returned in names and returned.type().kind() == "TensorType":
        results = [names[returned]]
    else:
        raise RefusedError("the graph returns something other than tensors")
    borrowed = ", ".join([*arguments, *constants])
    lines.append(f"    borrowed = ({borrowed},)")
    lines.append("    return [" + ", ".join(f"owned({r}, borrowed)" for r in results) + "]")
    head = f"def program({', '.join(arguments)}):"
    return "\n".join([head, *lines]), constants
