"""Small TorchScript graphs run as straight-line NumPy, where that gives exactly their results.

A ROS node keeps its values as NumPy arrays. A TorchScript node of a few elementwise and
shape operations (an observation normalization: subtract, divide, clamp, concatenate) costs
little when warm, but on a robot's data path it runs once per message, after the middleware
and the executor have taken the CPU's caches: then the dispatcher and the runtime behind
``torch.from_numpy`` -> TorchScript -> ``Tensor.numpy`` cost several times what the same few
NumPy calls cost (figures: docs, explanation, performance).

:func:`numpy_program` reads the frozen graph (``torch.jit.freeze(..., optimize_numerics=False)``:
the module's tensors become constants, no pass that may change a result) and, when every
operation in it is one of :data:`~leapp.run.numpy_source.OPERATIONS`, writes it out as one
Python function of NumPy calls (:mod:`leapp.run.numpy_source`). It hands the function out only
when, at load, it returns exactly what the graph executor returns: the same dtypes and shapes,
and the same bits (NaN where NaN, whatever its payload; a zero where a zero, whatever its sign,
which ATen itself does not keep the same across tensor lengths) on the traced example when
given, zeros, seeded random values at three scales, and values holding NaN, infinities and
-0.0. Anything else (another operation, an ``alpha``, a rounding mode, a result that differs in
one bit) keeps the TorchScript runtime, with a debug line saying why.

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

from leapp.run.numpy_source import NAMESPACE, RefusedError, program_source

__all__ = ["Program", "numpy_program"]

logger = logging.getLogger(__name__)

Program = Callable[[Sequence[np.ndarray]], list[np.ndarray]]


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
        namespace = {**NAMESPACE, **constants}
        exec(compile(source, f"<numpy program of {node}>", "exec"), namespace)
        positional = namespace["program"]
        problem = _disagreement(positional, forward, _samples(ports, inputs))
    except RefusedError as e:
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
