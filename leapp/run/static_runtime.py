"""TorchScript artifacts run by TorchScript's static runtime, where it gives exactly what the
graph executor gives.

``ScriptModule.forward`` goes through the graph executor: a cost on entry and per operation.
The static runtime (``torch._C._jit_to_static_module``, the runtime PyTorch serves
TorchScript inference with) runs the same ATen kernels through their ``out=`` forms, with the
intermediate tensors planned once, which costs less per call for the small nodes of a policy
pipeline (figures: docs, explanation, performance). It runs a frozen copy of
the module (``torch.jit.freeze(..., optimize_numerics=False)``: no pass that may change a
result; the file and the loaded module stay as they are).

:func:`static_forward` hands it out only when, at load, it returns exactly what the graph
executor returns (the same dtypes, shapes, strides, bits, and the same sharing of memory with
the inputs) on the given inputs (the traced example), on zeros, and on seeded random values in
the floating inputs, run one after the other so that a result handed out twice would show;
otherwise the graph executor stays, with a debug line saying why. Its Python binding holds the
GIL for a whole call, so calls from several threads are serialized as the graph executor's
Python entry is.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["static_forward"]

logger = logging.getLogger(__name__)

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def static_forward(
    module: torch.jit.ScriptModule,
    forward: Callable[..., Any],
    ports: Sequence[tuple[torch.dtype, tuple[int, ...]]],
    inputs: Sequence[torch.Tensor] | None,
    *,
    node: str,
) -> Callable[..., Any] | None:
    """``module``'s forward through the static runtime (called like ``forward``: one tensor
    per input, positionally), or None where it cannot be made or does not agree with
    ``forward`` (the graph executor's method) on the checks of the module docstring.
    ``ports`` are the input ports' dtypes and shapes, ``inputs`` a valid input (or None)."""
    to_static = getattr(torch._C, "_jit_to_static_module", None)
    if to_static is None:
        return None
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # TorchScript is deprecated upstream, freeze with it; the artifact is TorchScript.
            warnings.filterwarnings("ignore", message=".*torch.jit.freeze. is deprecated")
            frozen = torch.jit.freeze(module.eval(), optimize_numerics=False)
            static = to_static(frozen._c)
            problem = _disagreement(static, forward, _samples(ports, inputs))
    except Exception as e:  # a graph the static runtime does not take: the executor stays
        problem = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
    if problem is not None:
        logger.debug("node %s: TorchScript's static runtime not used: %s", node, problem)
        return None
    return static


def _samples(
    ports: Sequence[tuple[torch.dtype, tuple[int, ...]]], inputs: Sequence[torch.Tensor] | None
) -> list[list[torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    zeros = [torch.zeros(shape, dtype=dtype) for dtype, shape in ports]
    mixed = [
        torch.randn(shape, generator=generator, dtype=dtype)
        if dtype.is_floating_point or dtype.is_complex
        else torch.zeros(shape, dtype=dtype)  # an index or a mask must stay valid
        for dtype, shape in ports
    ]
    given = [] if inputs is None else [[value.clone() for value in inputs]]
    return [*given, zeros, mixed]


def _disagreement(
    static: Callable[..., Any], forward: Callable[..., Any], samples: list[list[torch.Tensor]]
) -> str | None:
    """None when ``static`` returns what ``forward`` returns on every sample, else why not.
    All static runs come first: a later run must leave the earlier results intact."""
    ran = []
    for sample in samples:
        try:
            ran.append((sample, _outputs(static(*sample))))
        except Exception as e:
            ran.append((sample, e))
    for index, (sample, got) in enumerate(ran):
        try:
            want: Any = _outputs(forward(*sample))
        except Exception as e:
            want = e
        if isinstance(got, Exception) or isinstance(want, Exception):
            if isinstance(got, Exception) and isinstance(want, Exception):
                continue  # both refuse this sample (zeros may be no valid input)
            return f"sample {index}: one runtime raised, the other did not"
        if got is None or want is None or len(got) != len(want):
            return f"sample {index}: the outputs are not the same tensors"
        for out, (a, b) in enumerate(zip(got, want, strict=True)):
            if not _same(a, b) or _shared(a, sample) != _shared(b, sample):
                return f"sample {index}, output {out}: values or layout differ"
    return None


def _outputs(result: Any) -> tuple[torch.Tensor, ...] | None:
    values = (result,) if isinstance(result, torch.Tensor) else result
    if not isinstance(values, (tuple, list)):
        return None
    if not all(isinstance(value, torch.Tensor) for value in values):
        return None
    return tuple(values)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit: the same dtype, shape, strides and bytes (NaN payloads and -0.0 too)."""
    if a.dtype != b.dtype or a.shape != b.shape or a.stride() != b.stride():
        return False
    if a.requires_grad != b.requires_grad or a.device != b.device:
        return False
    if a.dtype.is_complex:
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    bits = _BITS.get(a.element_size())
    if bits is None:
        return False
    return torch.equal(a.contiguous().view(bits), b.contiguous().view(bits))


def _shared(output: torch.Tensor, inputs: Sequence[torch.Tensor]) -> set[int]:
    """The positions of the inputs whose memory ``output`` shares."""
    where = output.untyped_storage().data_ptr()
    return {n for n, value in enumerate(inputs) if value.untyped_storage().data_ptr() == where}
