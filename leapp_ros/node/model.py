"""The model a pipeline node runs, called with NumPy arrays: :func:`load_node_model`.

A node keeps its port values as NumPy arrays (the messages decode into them without copying).
An ONNX node runs them in ONNX Runtime directly (:mod:`leapp.run.onnx_runner`) and never
imports torch; a TorchScript node whose graph NumPy computes exactly (exact arithmetic and
moves of values: :mod:`leapp.run.numpy_program`, checked at load) runs as NumPy; any other
TorchScript or pt2 node wraps them as tensors sharing their memory (``torch.from_numpy``) and
hands the results back as arrays (``Tensor.numpy``, no copy).

``reads_only`` says whether a model leaves its inputs alone, so that a node may hand it
read-only views of a message's payload (ONNX Runtime only reads them: small ones copied into
its buffers, a camera frame where it lies; a NumPy program never writes into them); a
TorchScript module may update an input in place, so it gets arrays of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leapp.spec import Spec

__all__ = ["NumpyModel", "TorchModel", "load_node_model"]


class NumpyModel:
    """A :class:`leapp.run.model.Model` whose artifact runs as NumPy (``Model.numpy_call``)."""

    __slots__ = ("backend", "call", "model", "name")
    reads_only = True

    def __init__(self, model: Any):
        self.model = model
        self.name = model.name
        self.backend = model.backend
        self.call = model.numpy_call  # a list of arrays in, one array per output out

    def __repr__(self) -> str:
        return f"{self.model!r} as NumPy"


class TorchModel:
    """A :class:`leapp.run.model.Model` (jit, pt2) called with NumPy arrays."""

    reads_only = False
    __slots__ = (
        "_call",
        "_from_numpy",
        "_grad",
        "_ndarray",
        "_set_grad",
        "backend",
        "model",
        "name",
    )

    def __init__(self, model: Any):
        import numpy as np
        import torch

        self.model = model
        self.name = model.name
        self.backend = model.backend
        self._call = model._call  # the artifact itself: gradients are off around it below
        self._from_numpy = torch.from_numpy
        self._ndarray = np.ndarray
        self._grad = torch.is_grad_enabled
        self._set_grad = torch._C._set_grad_enabled

    def call(self, inputs: Sequence[Any]) -> list[Any]:
        """One array per output (a tensor where NumPy lacks the dtype: bfloat16)."""
        ndarray, from_numpy = self._ndarray, self._from_numpy
        tensors = [from_numpy(v) if v.__class__ is ndarray else v for v in inputs]
        grad = self._grad()
        self._set_grad(False)
        try:
            results = self._call(tensors)
        finally:
            self._set_grad(grad)
        return [_array(value) for value in results]

    def __repr__(self) -> str:
        return repr(self.model)


def _array(value: Any) -> Any:
    try:
        return value.numpy()
    except (RuntimeError, TypeError):  # requires grad, or a dtype NumPy lacks
        value = value.detach()
        return value if str(value.dtype) == "torch.bfloat16" else value.numpy()


def load_node_model(spec: Spec, node: str) -> Any:
    """The loaded, warmed-up model of pipeline node ``node``, with ``call(arrays) -> arrays``.

    Raises:
        PipelineError: as :func:`leapp.run.model.load_model` or
            :func:`leapp.run.onnx_runner.load_onnx`.
    """
    model = spec.model(node) if node in {m.name for m in spec.models} else None
    lean = model is not None and model.parameters.backend == "onnx"
    if lean and all(port.dtype != "bfloat16" for port in (*model.inputs, *model.outputs)):
        from leapp.run.onnx_runner import load_onnx

        return load_onnx(spec, node)
    from leapp.run.model import load_model

    loaded = load_model(spec, node, as_numpy=True)
    return TorchModel(loaded) if loaded.numpy_call is None else NumpyModel(loaded)
