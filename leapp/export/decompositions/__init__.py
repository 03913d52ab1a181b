"""Decompositions for ONNX: ATen operations the TorchScript-based exporter cannot translate,
or translates wrongly for some arguments, written with operations it translates well.

:data:`ONNX_DECOMPOSITIONS` maps an ATen operation (overload packet) to a function with the
operation's signature; :mod:`leapp.export.lowering` traces it in place of the operation. Each
one computes the operation's values on every input, up to float rounding, including the edge
cases eager PyTorch defines. None calls the operation it replaces (``make_fx`` would apply it
again, without end). Torch's own decompositions are used for the operations not listed here;
these exist where torch's end in ``prims`` operations (which no exporter knows) or are missing.

One module per family: :mod:`.elementwise`, :mod:`.reductions`, :mod:`.indexing`,
:mod:`.layers` (pooling, normalization, activations, losses), :mod:`.linalg`,
:mod:`.orthogonal`,
:mod:`.special`, :mod:`.bessel`, :mod:`.polynomials`, :mod:`.spectral`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from leapp.export.decompositions import (
    bessel,
    elementwise,
    indexing,
    layers,
    linalg,
    orthogonal,
    polynomials,
    reductions,
    special,
    spectral,
)

__all__ = ["ONNX_DECOMPOSITIONS"]

ONNX_DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    **elementwise.DECOMPOSITIONS,
    **reductions.DECOMPOSITIONS,
    **indexing.DECOMPOSITIONS,
    **layers.DECOMPOSITIONS,
    **linalg.DECOMPOSITIONS,
    **orthogonal.DECOMPOSITIONS,
    **special.DECOMPOSITIONS,
    **bessel.DECOMPOSITIONS,
    **polynomials.DECOMPOSITIONS,
    **spectral.DECOMPOSITIONS,
}
