"""Complex ports written as real pairs: what the spec says of them, and how to read them back.

ONNX Runtime computes no complex numbers, so the ONNX artifact of a node with a complex output
returns it as real pairs: a last axis of 2 holding (real, imaginary), ``torch.view_as_real``'s
layout. The spec describes what the artifact returns, so a reader of the spec and the model
agree: such a port is declared with the real dtype and the pairs' shape, plus ``as_complex``,
the complex dtype it stands for (a key NVIDIA LEAPP's reader ignores)::

    - name: spectrum          # torch.view_as_complex(x) of shape [3], complex64
      dtype: float32
      shape: [3, 2]
      type: tensor
      as_complex: complex64   # torch.view_as_complex(value) is the complex64 [3] output

:func:`as_pairs` writes a complex port so; :func:`as_complex` gives the complex port back
(``leapp.Pipeline`` hands out complex values through it). :func:`complex_view` applies it to
a whole model. Ports without ``as_complex`` are left as they are, so exports from before this
rule (a complex64 port whose ONNX model returns pairs) still read as they did.
"""

from __future__ import annotations

from dataclasses import replace

from leapp.spec.schema import ModelSpec, TensorSpec

__all__ = ["PAIRS_KEY", "as_complex", "as_pairs", "complex_view"]

PAIRS_KEY = "as_complex"
_PART = {"complex64": "float32", "complex128": "float64", "complex32": "float16"}
_PAIR_NAMES = ("real", "imag")  # element names of the pair axis, when the port names its axes


def as_pairs(port: TensorSpec) -> TensorSpec:
    """``port`` as its real pairs when it is complex (else unchanged)."""
    part = _PART.get(port.dtype)
    if part is None:
        return port
    names = port.element_names
    return replace(
        port,
        dtype=part,
        shape=(*port.shape, 2),
        element_names=None if names is None else (*names, _PAIR_NAMES),
        extra={**port.extra, PAIRS_KEY: port.dtype},
    )


def as_complex(port: TensorSpec) -> TensorSpec:
    """The complex port a pairs port stands for (a port without ``as_complex`` unchanged)."""
    dtype = port.extra.get(PAIRS_KEY)
    if dtype is None or not port.shape or port.shape[-1] != 2:
        return port
    extra = {key: value for key, value in port.extra.items() if key != PAIRS_KEY}
    names = port.element_names
    if names is not None:
        names = tuple(names[:-1]) or None
    return replace(
        port, dtype=str(dtype), shape=tuple(port.shape[:-1]), element_names=names, extra=extra
    )


def complex_view(model: ModelSpec) -> ModelSpec:
    """``model`` with every pairs port read as the complex port it stands for."""
    if not any(PAIRS_KEY in port.extra for port in (*model.inputs, *model.outputs)):
        return model
    return replace(
        model,
        inputs=tuple(map(as_complex, model.inputs)),
        outputs=tuple(map(as_complex, model.outputs)),
    )
