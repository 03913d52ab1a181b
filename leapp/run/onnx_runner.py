"""One node's ONNX artifact run on NumPy arrays, without importing torch.

    from leapp.run.onnx_runner import load_onnx

    model = load_onnx(spec, "policy")            # checks outputs against the spec, warms up
    (action,) = model.call([obs])                # NumPy arrays in the spec's port order

What a deployed ONNX node needs and no more: ONNX Runtime with one intra-op and one inter-op
thread, ports matched to the model's value names as :mod:`leapp.run.model` matches them, and
two warm-up runs on zeros that also check the outputs' count, dtypes and shapes. A process
that only runs ONNX nodes stays free of torch (about 90 MB instead of 270 MB).

The data path goes through :class:`BoundRun`: input and output buffers of the spec's shapes
are bound to the session once (ONNX Runtime's I/O binding), and a call copies the inputs in,
runs, and copies the outputs out. That skips what ``InferenceSession.run`` does in Python on
every call (a dict of inputs, name and type checks, new output arrays): on the seed's policy a
call takes a third of ``run``'s time, and it leaves the CPU caches to the model. An input of
:data:`DIRECT_BYTES` or more (a camera frame) is not copied: a C-contiguous array of its dtype
and shape (such as a read-only view of a message's payload) is bound where it lies for the
call, which costs a couple of microseconds where a copy of a 1280x720 rgb8 frame costs
hundreds.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from leapp.errors import PipelineError
from leapp.run.output_check import check_outputs
from leapp.spec import ModelSpec, Spec, TensorSpec

__all__ = [
    "DIRECT_BYTES",
    "BoundRun",
    "OnnxModel",
    "load_onnx",
    "session_options",
    "takes_frames",
]

logger = logging.getLogger(__name__)

_WARMUP_RUNS = 2
DIRECT_BYTES = 1 << 16  # inputs this large are bound where they lie instead of copied


def session_options(model: ModelSpec | None = None) -> Any:
    """ONNX Runtime session options of a deployed node: one intra-op, one inter-op thread,
    and neither the CPU memory arena nor memory patterns: for a policy-sized model both cost
    more per run than the allocations they save, or the same (figures: docs, explanation,
    performance). A ``model`` that takes a camera frame (:func:`takes_frames`) keeps both:
    without them each run allocates its frame-sized intermediates anew (a CNN encoder on a
    1280x720 rgb8 frame cost 17 % more CPU per run, the kernel's page faults)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    pooled = model is not None and takes_frames(model)
    options.enable_cpu_mem_arena = pooled
    options.enable_mem_pattern = pooled
    return options


def takes_frames(model: ModelSpec) -> bool:
    """Whether an input of ``model`` holds :data:`DIRECT_BYTES` or more (a camera frame)."""
    for port in model.inputs:
        try:
            item = np.dtype(port.dtype).itemsize
        except TypeError:  # bfloat16
            item = 2
        if math.prod(port.shape) * item >= DIRECT_BYTES:
            return True
    return False


class BoundRun:
    """``session`` run through buffers of fixed dtypes and shapes bound to it once.

    ``call(values)`` copies each value into its input buffer (anything NumPy can copy from: an
    array, a CPU torch tensor), except that an input of :data:`DIRECT_BYTES` or more given as a
    C-contiguous array of its dtype and shape is bound as it is for that run (no copy;
    ``last_inputs`` holds what each input read); it runs and returns a new array per output.
    Between calls the buffers are bound: ``run`` alone runs on what they hold. Raises
    ``TypeError`` at construction when this ONNX Runtime lacks I/O binding; :meth:`agrees`
    tells whether the bound run gives what ``session.run`` gives (callers fall back to ``run``
    otherwise).
    """

    __slots__ = (
        "_any_direct",
        "_binding",
        "_buffer_values",
        "_direct",
        "_keep",
        "_names",
        "_wrap",
        "input_buffers",
        "last_inputs",
        "output_buffers",
        "run",
    )

    def __init__(
        self,
        session: Any,
        inputs: Sequence[tuple[str, np.dtype, tuple[int, ...]]],
        outputs: Sequence[tuple[str, np.dtype, tuple[int, ...]]],
    ):
        from onnxruntime import OrtValue, RunOptions

        self.input_buffers = [np.zeros(shape, dtype) for _, dtype, shape in inputs]
        self.output_buffers = [np.zeros(shape, dtype) for _, dtype, shape in outputs]
        binding = session.io_binding()
        self._keep = []  # the OrtValues must live as long as the binding uses their buffers
        self._names = [name for name, _, _ in inputs]
        self._buffer_values = []
        for name, buffer in zip(self._names, self.input_buffers, strict=True):
            value = OrtValue.ortvalue_from_numpy(buffer)
            binding.bind_ortvalue_input(name, value)
            self._buffer_values.append(value)
        self._direct = [buffer.nbytes >= DIRECT_BYTES for buffer in self.input_buffers]
        self._any_direct = any(self._direct)
        self._wrap = OrtValue.ortvalue_from_numpy
        # per input: the array the last call read (its buffer, or a large array where it lay)
        self.last_inputs: list[np.ndarray] = list(self.input_buffers)
        for (name, _, _), buffer in zip(outputs, self.output_buffers, strict=True):
            value = OrtValue.ortvalue_from_numpy(buffer)
            binding.bind_ortvalue_output(name, value)
            self._keep.append(value)
        self._binding = binding
        # The C session's entry: the Python wrapper's per-call checks (graph capture, run
        # options) cost several times the run of a small policy.
        inner = getattr(session, "_sess", None)
        run = getattr(inner, "run_with_iobinding", None)
        if run is None:
            raise TypeError("this ONNX Runtime has no InferenceSession._sess.run_with_iobinding")
        options = RunOptions()
        iobinding = binding._iobinding
        self.run = partial(run, iobinding, options)  # runs on what the buffers hold

    def call(self, values: Sequence[Any]) -> list[np.ndarray]:
        """Run on one value per input (already checked against the ports)."""
        if not self._any_direct:
            for buffer, value in zip(self.input_buffers, values, strict=True):
                np.copyto(buffer, value, casting="no")
            self.run()
            return [output.copy() for output in self.output_buffers]
        direct = self._take(values)
        try:
            self.run()
        finally:  # the buffers again, for whoever runs on what they hold
            for index in direct:
                self._binding.bind_ortvalue_input(self._names[index], self._buffer_values[index])
        return [output.copy() for output in self.output_buffers]

    def _take(self, values: Sequence[Any]) -> list[int]:
        """Bind the large inputs where they lie and copy the others into their buffers; the
        indices of the inputs bound where they lie."""
        direct = []
        for index, value in enumerate(values):
            buffer = self.input_buffers[index]
            if (
                self._direct[index]
                and isinstance(value, np.ndarray)
                and value.dtype == buffer.dtype
                and value.shape == buffer.shape
                and value.flags.c_contiguous
            ):
                self._binding.bind_ortvalue_input(self._names[index], self._wrap(value))
                self.last_inputs[index] = value
                direct.append(index)
            else:
                np.copyto(buffer, value, casting="no")
                self.last_inputs[index] = buffer
        return direct

    def agrees(self, session: Any, names: Sequence[str], feed: dict[str, np.ndarray]) -> bool:
        """Whether a bound run on ``feed`` returns exactly what ``session.run`` returns."""
        expected = session.run(list(names), feed)
        found = self.call(list(feed.values()))
        return len(found) == len(expected) and all(
            a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
            for a, b in zip(found, expected, strict=True)
        )


class OnnxModel:
    """An ONNX artifact called with one NumPy array per input port (dtype and shape of the
    spec); returns one array per output port. ``name``, ``backend``, ``inputs``, ``outputs``
    and ``path`` as :class:`leapp.run.model.Model` has them. ``reads_only``: ONNX Runtime
    never writes into the arrays given (small ones are copied into its buffers, large ones
    read where they lie)."""

    reads_only = True
    __slots__ = (
        "_feed",
        "_outputs",
        "_run",
        "_session",
        "backend",
        "bound",
        "call",
        "inputs",
        "name",
        "outputs",
        "path",
    )

    def __init__(self, model: ModelSpec, path: Path, session: Any):
        self.name = model.name
        self.backend = "onnx"
        self.inputs = model.inputs
        self.outputs = model.outputs
        self.path = path
        self._session = session
        self._feed = _value_names(model.name, "inputs", session.get_inputs(), model.inputs)
        self._outputs = _value_names(model.name, "outputs", session.get_outputs(), model.outputs)
        self._run = session.run
        self.call = self.call_session
        self.bound: BoundRun | None = None  # set by bind()

    def call_session(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run on arrays already checked against their ports, through ``session.run``."""
        return self._run(self._outputs, dict(zip(self._feed, inputs, strict=True)))

    def bind(self) -> bool:
        """Route :attr:`call` through a :class:`BoundRun` when it agrees with ``session.run``
        on zeros and on a pattern of varied values (floating inputs; the others stay zero, as an
        index or a mask must stay valid); whether it does."""
        try:
            inputs = [
                (name, _dtype(self, port), tuple(port.shape))
                for name, port in zip(self._feed, self.inputs, strict=True)
            ]
            outputs = [
                (name, _dtype(self, port), tuple(port.shape))
                for name, port in zip(self._outputs, self.outputs, strict=True)
            ]
            bound = BoundRun(self._session, inputs, outputs)
            agrees = all(
                bound.agrees(self._session, self._outputs, feed) for feed in _check_feeds(inputs)
            )
        except Exception as e:  # no binding in this ONNX Runtime, or a model it does not fit
            logger.debug("node %s: ONNX I/O binding not used: %s", self.name, e)
            return False
        if agrees:
            self.bound = bound
            self.call = bound.call
        return agrees

    def output_dtypes(self) -> list[np.dtype]:
        """The NumPy dtype of each output port (for
        :func:`leapp.run.output_check.check_outputs`)."""
        return [_dtype(self, port) for port in self.outputs]

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
    try:
        session = onnxruntime.InferenceSession(
            str(path), session_options(model), providers=["CPUExecutionProvider"]
        )
    except Exception as e:
        raise PipelineError(f"node {node!r}: cannot load {str(path)!r}: {e}") from e
    loaded = OnnxModel(model, path, session)
    if _warm_up(loaded):
        loaded.bind()
    logger.debug("node %s: loaded onnx in %.1f ms", node, 1e3 * (time.perf_counter() - started))
    return loaded


def _warm_up(model: OnnxModel) -> bool:
    """Two runs on zeros, checking the outputs; False when the model raises on zeros."""
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
        return False
    check_outputs(model, results, "zeros of its input shapes")
    return True


def _check_feeds(
    inputs: Sequence[tuple[str, np.dtype, tuple[int, ...]]],
) -> list[dict[str, np.ndarray]]:
    """Zeros, then values that differ from element to element and from input to input in the
    floating inputs: a bound run that returns stale or zeroed buffers, or mixes up two inputs,
    disagrees with ``session.run`` on one. (A fixed pattern, not ``numpy.random``: importing
    that costs a large share of a small pipeline's validation.)"""
    zeros = {name: np.zeros(shape, dtype) for name, dtype, shape in inputs}
    mixed = {
        name: _pattern(shape, n).astype(dtype)
        if np.issubdtype(dtype, np.floating)
        else np.zeros(shape, dtype)
        for n, (name, dtype, shape) in enumerate(inputs)
    }
    return [zeros, mixed]


def _pattern(shape: tuple[int, ...], n: int) -> np.ndarray:
    """Values in (-2, 2), no two neighbours alike, another sequence for each ``n``."""
    count = int(np.prod(shape, dtype=np.int64))
    return (2.0 * np.sin(np.arange(1, count + 1) * 1.618034 + 0.7 * n)).reshape(shape)


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
