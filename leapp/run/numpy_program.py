"""Small TorchScript graphs run as straight-line NumPy, where that gives exactly their results.

A ROS node keeps its values as NumPy arrays. A TorchScript node of a few elementwise and
shape operations (an observation normalization: subtract, divide, clamp, concatenate) costs
little when warm, but on a robot's data path it runs once per message, after the middleware
and the executor have taken the CPU's caches: then the dispatcher and the runtime behind
``torch.from_numpy`` -> TorchScript -> ``Tensor.numpy`` cost about 30 us on this project's
2-core CPU (the seed's ``preprocess`` in a tick of bench/ros_latency.py's fused mode), where
the same four NumPy calls cost about 8 us.

:func:`numpy_program` reads the frozen graph (``torch.jit.freeze(..., optimize_numerics=False)``:
the module's tensors become constants, no pass that may change a result) and, when every
operation in it is one of :data:`OPERATIONS`, writes it out as one Python function of NumPy
calls (one local per value, no lookup on the way, as :mod:`leapp.run.step_code` does for a
step). It hands the function out only when, at load, it returns exactly what the graph
executor returns: the same dtypes and shapes, and the same bits (NaN where NaN, whatever its
payload; a zero where a zero, whatever its sign, which ATen itself does not keep the same
across tensor lengths) on the traced example when given, zeros, seeded random values at three
scales, and values holding NaN, infinities and -0.0. Anything else (another operation, an
``alpha``, a rounding mode, a result that differs in one bit) keeps the TorchScript runtime,
with a debug line saying why.

The function never writes into its inputs, and its results own their memory (a result that
would be a view of an input or of a constant is copied), so a node may hand it read-only views
of a message's payload and keep its results as long as it likes.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["OPERATIONS", "numpy_program"]

logger = logging.getLogger(__name__)

Program = Callable[[Sequence[np.ndarray]], list[np.ndarray]]


class _RefusedError(Exception):
    """The graph holds something this module does not write as NumPy."""


def _binary(function: str) -> Callable[[list[str], list[Any]], str]:
    def write(args: list[str], values: list[Any]) -> str:
        if len(args) == 3 and values[2] is not _Tensor and values[2] == 1:
            pass  # add/sub's alpha, at its default
        elif len(args) != 2:
            raise _RefusedError(f"{function} with arguments {values[2:]!r} (alpha)")
        return f"{function}({args[0]}, {args[1]})"

    return write


def _unary(function: str) -> Callable[[list[str], list[Any]], str]:
    def write(args: list[str], values: list[Any]) -> str:
        if len(args) != 1:
            raise _RefusedError("extra arguments")
        return f"{function}({args[0]})"

    return write


def _div(args: list[str], values: list[Any]) -> str:
    if len(args) == 3 and values[2] is not None:
        raise _RefusedError(f"rounding_mode={values[2]!r}")
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
        raise _RefusedError("squeeze over several dimensions")
    return f"squeeze_dim({args[0]}, {int(values[1])})"


def _reshape(args: list[str], values: list[Any]) -> str:
    return f"reshape({args[0]}, {args[1]})"


def _select(args: list[str], values: list[Any]) -> str:
    dim, index = int(values[1]), int(values[2])
    if dim < 0:
        raise _RefusedError("select along a negative dimension")
    return f"{args[0]}[{'(slice(None),) * ' + str(dim) + ' + ' if dim else ''}({index},)]"


def _slice(args: list[str], values: list[Any]) -> str:
    dim, start, end, step = values[1:5]
    if int(dim) < 0:
        raise _RefusedError("slice along a negative dimension")
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


_NAMESPACE = {
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
        _RefusedError: an operation or an argument this module does not write.
    """
    graph_inputs = list(graph.inputs())
    if len(graph_inputs) != inputs + 1:
        raise _RefusedError(f"{len(graph_inputs) - 1} graph inputs for {inputs} ports")
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
            raise _RefusedError(f"{kind} reads a value this program does not have")
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
                raise _RefusedError(f"a constant of type {type(value).__name__}")
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
            raise _RefusedError(f"operation {kind}")
        if outputs[0].type().kind() != "TensorType":  # aten::add of two int lists, say
            raise _RefusedError(f"operation {kind} on {outputs[0].type()}")
        if not str(node.schema()).startswith(kind) or "(a!)" in str(node.schema()):
            raise _RefusedError(f"operation {node.schema()}")
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
        raise _RefusedError("the graph returns something other than tensors")
    borrowed = ", ".join([*arguments, *constants])
    lines.append(f"    borrowed = ({borrowed},)")
    lines.append("    return [" + ", ".join(f"owned({r}, borrowed)" for r in results) + "]")
    head = f"def program({', '.join(arguments)}):"
    return "\n".join([head, *lines]), constants


class _TensorArgument:
    """A placeholder for an argument known only at run time (a tensor)."""

    def __repr__(self) -> str:
        return "<tensor>"


_Tensor = _TensorArgument()


def numpy_program(
    module: torch.jit.ScriptModule,
    forward: Callable[..., Any],
    ports: Sequence[tuple[torch.dtype, tuple[int, ...]]],
    inputs: Sequence[torch.Tensor] | None,
    *,
    node: str,
) -> Program | None:
    """``module``'s forward as NumPy (a list of arrays in, one array per output out), or None
    where its graph holds anything else or the NumPy results differ from ``forward``'s (the
    graph executor's method) on the checks of the module documentation. ``ports`` are the
    input ports' dtypes and shapes, ``inputs`` a valid input (or None)."""
    if any(dtype not in _NUMPY_DTYPES for dtype, _ in ports):
        return None
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*torch.jit.freeze. is deprecated")
            frozen = torch.jit.freeze(module.eval(), optimize_numerics=False)
        source, constants = program_source(frozen.graph, len(ports))
        namespace = {**_NAMESPACE, **constants}
        exec(compile(source, f"<numpy program of {node}>", "exec"), namespace)
        positional = namespace["program"]
        problem = _disagreement(positional, forward, _samples(ports, inputs))
    except _RefusedError as e:
        problem = str(e)
    except Exception as e:  # a graph this module misread: TorchScript stays
        problem = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
    if problem is not None:
        logger.debug("node %s: not run as NumPy: %s", node, problem)
        return None
    logger.debug("node %s: runs as NumPy:\n%s", node, source)
    return lambda values: positional(*values)


_NUMPY_DTYPES = {
    torch.float16,
    torch.float32,
    torch.float64,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
}


def _samples(
    ports: Sequence[tuple[torch.dtype, tuple[int, ...]]], inputs: Sequence[torch.Tensor] | None
) -> list[list[torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1e-40, -7.5])

    def sample(dtype: torch.dtype, shape: tuple[int, ...], kind: str) -> torch.Tensor:
        if kind == "zeros":
            return torch.zeros(shape, dtype=dtype)
        if dtype is torch.bool:
            return torch.randint(0, 2, shape, generator=generator).to(dtype)
        if not dtype.is_floating_point:
            return torch.randint(-100, 100, shape, generator=generator).to(dtype)
        if kind == "special":
            count = max(1, int(torch.Size(shape).numel()))
            return special.repeat(count // len(special) + 1)[:count].reshape(shape).to(dtype)
        scale = {"small": 1e-3, "unit": 1.0, "large": 1e4}[kind]
        return (torch.randn(shape, generator=generator, dtype=torch.float64) * scale).to(dtype)

    given = [] if inputs is None else [[value.clone() for value in inputs]]
    kinds = ("zeros", "unit", "small", "large", "special")
    return [*given, *([sample(d, s, kind) for d, s in ports] for kind in kinds)]


def _disagreement(
    program: Callable[..., list[np.ndarray]],
    forward: Callable[..., Any],
    samples: list[list[torch.Tensor]],
) -> str | None:
    """None when ``program`` returns what ``forward`` returns on every sample, else why not."""
    for index, sample in enumerate(samples):
        arrays = [value.numpy() for value in sample]
        for array in arrays:
            array.flags.writeable = False  # a program writing into an input would raise
        try:
            got: Any = program(*arrays)
        except Exception as e:
            got = e
        try:
            with torch.no_grad():
                want: Any = forward(*sample)
            want = [want] if isinstance(want, torch.Tensor) else list(want)
        except Exception as e:
            want = e
        if isinstance(got, Exception) or isinstance(want, Exception):
            if isinstance(got, Exception) and isinstance(want, Exception):
                continue  # both refuse this sample
            return f"sample {index}: one runtime raised, the other did not"
        if len(got) != len(want) or not all(isinstance(w, torch.Tensor) for w in want):
            return f"sample {index}: the outputs are not the same tensors"
        for out, (a, b) in enumerate(zip(got, want, strict=True)):
            if not _same(a, b.detach().numpy()):
                return f"sample {index}, output {out}: dtype, shape or values differ"
    return None


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """The same dtype, shape and bits; NaN where NaN, whatever its payload, and a zero where a
    zero, whatever its sign (``maximum(0.0, -0.0)``: ATen's own vectorized and scalar paths
    answer with different signs, by the length of the tensor)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind in "fc":
        nan = np.isnan(a)
        if not np.array_equal(nan, np.isnan(b)):
            return False
        a, b = a[~nan], b[~nan]
        zeros = (a == 0) & (b == 0)
        a, b = a[~zeros], b[~zeros]
    return a.tobytes() == b.tobytes()
