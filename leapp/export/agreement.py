"""Agreement: whether a written ONNX file computes what the node's graph computes.

The TorchScript-based exporter sometimes writes a model that ONNX Runtime refuses to load
(``diag``: a Transpose with a negative axis) or that computes other values (``any`` of a float
tensor, ``index_fill`` with a 0-d index) without raising. :func:`onnx_disagreement` runs the file
once in ONNX Runtime on the traced example inputs and compares it with the graph run eagerly,
so the ONNX backend can try its lowered graph instead. It costs one ONNX Runtime session
(milliseconds for a policy-sized model). The tolerance is validation's default; validation
still checks the final artifact with the tolerance the user chose. The session also tells which
inputs the written model has (:attr:`Agreement.inputs`), so the backend need not parse the file
to find an input the exporter dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.fx

__all__ = ["Agreement", "onnx_agreement"]

logger = logging.getLogger(__name__)

RTOL, ATOL = 1e-3, 1e-5


@dataclass(frozen=True)
class Agreement:
    """What :func:`onnx_agreement` found: ``problem`` is None when the model reproduces the
    graph, else what differs, in words; ``inputs`` are the model's input names as ONNX Runtime
    lists them (None when no session could be made)."""

    problem: str | None
    inputs: tuple[str, ...] | None = None


def onnx_agreement(
    path: Path,
    module: torch.fx.GraphModule,
    example_inputs: Sequence[torch.Tensor],
    input_names: Sequence[str],
) -> Agreement:
    """Whether ``path`` run by ONNX Runtime on ``example_inputs`` (fed to ``input_names``)
    reproduces ``module(*example_inputs)``."""
    import onnxruntime

    try:
        with torch.no_grad():
            expected = module(*[example.clone() for example in example_inputs])
    except Exception as e:
        return Agreement(f"the graph itself cannot run eagerly: {' '.join(str(e).split())[:200]}")
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    expected = [torch.view_as_real(e) if e.is_complex() else e for e in expected]  # real pairs
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    present = None
    try:
        session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
        present = tuple(value.name for value in session.get_inputs())
        feed = {
            name: example.detach().contiguous().numpy()
            for name, example in zip(input_names, example_inputs, strict=True)
            if name in present
        }
        results = session.run(None, feed)
    except Exception as e:
        return Agreement(f"ONNX Runtime cannot run it: {' '.join(str(e).split())[:300]}", present)
    if len(results) != len(expected):
        return Agreement(f"{len(results)} outputs instead of {len(expected)}", present)
    for index, (got, want) in enumerate(zip(results, expected, strict=True)):
        problem = _difference(torch.from_numpy(got), want)
        if problem:
            return Agreement(f"output {index}: {problem}", present)
    return Agreement(None, present)


def _difference(got: torch.Tensor, want: torch.Tensor) -> str | None:
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype} {list(got.shape)} instead of {want.dtype} {list(want.shape)}"
    if got.numel() == 0:
        return None
    if not (want.dtype.is_floating_point or want.dtype.is_complex):
        return None if torch.equal(got, want) else "values differ"
    same = (got == want) | (torch.isnan(got) & torch.isnan(want))
    close = (got.double() - want.double()).abs() <= ATOL + RTOL * want.double().abs()
    bad = ~(same | close)
    if bad.any():
        return f"{int(bad.sum())} of {want.numel()} values differ"
    return None
