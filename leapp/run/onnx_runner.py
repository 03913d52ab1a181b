"""One node's ONNX artifact run on NumPy arrays, without importing torch.

    from leapp.run.onnx_runner import load_onnx

    model = load_onnx(spec, "policy")            # checks outputs against the spec, warms up
    (action,) = model.call([obs])                # NumPy arrays in the spec's port order

What a deployed ONNX node needs and no more: ONNX Runtime with one intra-op and one inter-op
thread, ports matched to the model's value names as :mod:`leapp.run.model` matches them, and
two warm-up runs on zeros that also check the outputs' count, dtypes and shapes. A process
that only runs ONNX nodes stays free of torch (about 90 MB instead of 270 MB).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from leapp.errors import PipelineError
from leapp.spec import ModelSpec, Spec, TensorSpec

__all__ = ["OnnxModel", "load_onnx"]

logger = logging.getLogger(__name__)

_WARMUP_RUNS = 2


class OnnxModel:
    """An ONNX artifact called with one NumPy array per input port (dtype and shape of the
    spec); returns one array per output port. ``name``, ``backend``, ``inputs``, ``outputs``
    and ``path`` as :class:`leapp.run.model.Model` has them."""

    __slots__ = ("_feed", "_outputs", "_run", "backend", "inputs", "name", "outputs", "path")

    def __init__(self, model: ModelSpec, path: Path, session: Any):
        self.name = model.name
        self.backend = "onnx"
        self.inputs = model.inputs
        self.outputs = model.outputs
        self.path = path
        self._feed = _value_names(model.name, "inputs", session.get_inputs(), model.inputs)
        self._outputs = _value_names(model.name, "outputs", session.get_outputs(), model.outputs)
        self._run = session.run

    def call(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run on arrays already checked against their ports (the data path)."""
        return self._run(self._outputs, dict(zip(self._feed, inputs, strict=True)))

    def __repr__(self) -> str:
        return f"OnnxModel(name={self.name!r}, path={str(self.path)!r})"


def load_onnx(spec: Spec, node: str) -> OnnxModel:
    """The ONNX artifact of ``node``, warmed up on zeros and checked against the spec.

    Checksums are not verified here (:func:`leapp.spec.load` does that when asked to).

    Raises:
        PipelineError: unknown node, a node whose backend is not onnx, a missing or unloadable
            file, or outputs that disagree with the spec.
    """
    import onnxruntime

    try:
        model = spec.model(node)
    except KeyError:
        names = [m.name for m in spec.models]
        raise PipelineError(f"no node {node!r} in spec {spec.name!r}; nodes: {names}") from None
    if model.parameters.backend != "onnx" or model.parameters.model_path is None:
        raise PipelineError(
            f"node {node!r} has backend {model.parameters.backend!r}, not onnx; load it with "
            "leapp.run.model.load_model"
        )
    path = spec.directory / model.parameters.model_path
    if not path.is_file():
        raise PipelineError(f"node {node!r}: artifact file {str(path)!r} does not exist")
    started = time.perf_counter()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    try:
        session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
    except Exception as e:
        raise PipelineError(f"node {node!r}: cannot load {str(path)!r}: {e}") from e
    loaded = OnnxModel(model, path, session)
    _warm_up(loaded)
    logger.debug("node %s: loaded onnx in %.1f ms", node, 1e3 * (time.perf_counter() - started))
    return loaded


def _warm_up(model: OnnxModel) -> None:
    zeros = [np.zeros(tuple(port.shape), _dtype(model, port)) for port in model.inputs]
    try:
        for _ in range(_WARMUP_RUNS):
            results = model.call(zeros)
    except Exception as e:
        logger.warning(
            "node %s: the artifact %s raises on zeros of its input shapes (%s); zeros may not "
            "be valid inputs for it, so it is loaded unchecked",
            model.name,
            model.path,
            " ".join(str(e).split())[:300],
        )
        return
    if len(results) != len(model.outputs):
        raise PipelineError(
            f"node {model.name!r}: the artifact {str(model.path)!r} returns {len(results)} "
            f"outputs, the spec lists {len(model.outputs)}; re-export the node"
        )
    for port, value in zip(model.outputs, results, strict=True):
        if value.dtype != _dtype(model, port) or value.shape != tuple(port.shape):
            raise PipelineError(
                f"node {model.name!r}: output {port.name!r} of {str(model.path)!r} is "
                f"{value.dtype} {list(value.shape)} on zeros of its input shapes, the spec says "
                f"{port.dtype} {list(port.shape)}; re-export the node"
            )


def _dtype(model: OnnxModel, port: TensorSpec) -> np.dtype:
    try:
        return np.dtype(port.dtype)
    except TypeError:
        raise PipelineError(
            f"node {model.name!r}: port {port.name!r} has dtype {port.dtype!r}, which NumPy "
            "lacks; run this node with leapp.run.model.load_model"
        ) from None


def _value_names(
    node: str, what: str, values: Sequence[Any], ports: Sequence[TensorSpec]
) -> list[str]:
    """The model's value names in port order: by name where every port finds its own (the
    port, or ``<port>_in`` / ``<port>_out`` for a port that is both an input and an output),
    else by position."""
    names = [value.name for value in values]
    if len(names) != len(ports):
        raise PipelineError(
            f"node {node!r}: the ONNX model has {len(names)} {what} {names}, the spec lists "
            f"{len(ports)} {[port.name for port in ports]}; re-export the node"
        )
    suffix = "_in" if what == "inputs" else "_out"
    available = set(names)
    matched = []
    for port in ports:
        found = next((n for n in (port.name, port.name + suffix) if n in available), None)
        if found is None:
            return names
        matched.append(found)
    return matched
