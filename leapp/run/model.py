"""One node's artifact, loaded and callable: TorchScript, ONNX or pt2 behind :class:`Model`.

    from leapp.run.model import load_model

    model = load_model(spec, "policy")           # checks ports against the spec, warms up
    (action,) = model.run([obs])                 # tensors in the spec's port order

Runtimes follow the deployment settings: ONNX Runtime with one intra-op and one inter-op
thread, TorchScript and pt2 with ``torch.set_num_threads(1)`` (process-wide), and warm-up runs
on zeros at load, so the first call is not slower than the others.

A TorchScript artifact runs in TorchScript's static runtime wherever that gives exactly what
the graph executor gives (:mod:`leapp.run.static_runtime` checks it at load), else in the
graph executor. The static runtime computes in inference mode, so its outputs are inference
tensors (as under ``torch.inference_mode()``): read them, convert them, feed them to any other
computation; ``clone()`` one before updating it in place or using it where autograd records.
Asked to (``load_model(..., as_numpy=True)``: the ROS nodes, whose values are NumPy arrays
already), a TorchScript graph of only exact arithmetic and moves of values also runs as NumPy
with the same results: :attr:`Model.numpy_call` (:mod:`leapp.run.numpy_program`).
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch

from leapp.errors import PipelineError
from leapp.run.output_check import check_outputs
from leapp.spec import ModelSpec, Spec, TensorSpec
from leapp.spec.pairs import complex_view

__all__ = ["Model", "check_value", "load_model", "port_check"]

logger = logging.getLogger(__name__)

_Call = Callable[[Sequence[torch.Tensor]], tuple[torch.Tensor, ...]]
_Single = Callable[..., torch.Tensor]


class _Runner(NamedTuple):
    """What a loader makes of an artifact: ``call`` (a list of tensors in, a tuple out);
    ``single``, for a one-output artifact, the same run with the tensors passed positionally
    and the one tensor returned; ``grad_free``: the run records no autograd history in any
    grad mode, given inputs that do not require gradients (see leapp.run.step_code)."""

    call: _Call
    single: _Single | None = None
    grad_free: bool = False
    numpy_call: Any = None  # the same run as NumPy, where it is exact (leapp.run.numpy_program)


_Check = tuple[str, torch.dtype, tuple[int, ...]]  # (port, dtype, shape)
_WARMUP_RUNS = 2  # TorchScript's profiling executor settles on its optimized plan at run 2


class Model:
    """One node's loaded artifact, called with tensors in the spec's port order.

    ``name`` is the node, ``backend`` its backend, ``inputs``/``outputs`` its port specs.
    """

    __slots__ = (
        "_call",
        "_checks",
        "_grad_free",
        "_single",
        "backend",
        "inputs",
        "name",
        "numpy_call",
        "outputs",
        "path",
    )

    def __init__(
        self,
        model: ModelSpec,
        path: Path,
        call: _Call,
        single: _Single | None = None,
        grad_free: bool = False,
        numpy_call: Any = None,
    ):
        self.name = model.name
        self.backend = model.parameters.backend
        self.inputs = model.inputs
        self.outputs = model.outputs
        self.path = path
        self._call = call
        # For a one-output artifact, the same run called with the tensors positionally and
        # returning the one tensor (no list in, no tuple out): what Pipeline.step calls.
        self._single = single
        self._grad_free = grad_free  # see leapp.run.step_code
        # A list of NumPy arrays in, one array per output out: the same results, where
        # leapp.run.numpy_program could write the artifact's graph as NumPy (else None).
        self.numpy_call = numpy_call
        self._checks = tuple(port_check(model.name, port) for port in model.inputs)

    def run(self, inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """Run the artifact on one tensor per input port; returns one tensor per output port.

        Raises:
            PipelineError: wrong number of inputs, or an input of the wrong shape or dtype.
        """
        if len(inputs) != len(self._checks):
            names = [port.name for port in self.inputs]
            raise PipelineError(
                f"node {self.name!r} takes {len(names)} inputs {names} in this order, "
                f"got {len(inputs)}"
            )
        for (port, dtype, shape), value in zip(self._checks, inputs, strict=True):
            check_value(f"{self.name}/{port}", value, dtype, shape)
        return self.call(inputs)

    def call(self, inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """:meth:`run` without checking the inputs, for callers that already checked each one
        against its port (the ROS node does, message by message): the data path."""
        with torch.no_grad():
            return self._call(inputs)

    def output_dtypes(self) -> list[torch.dtype]:
        """The torch dtype of each output port (for :func:`leapp.run.output_check.check_outputs`).

        Raises:
            PipelineError: an output port of a dtype torch does not know.
        """
        return [port_check(self.name, port)[1] for port in self.outputs]

    def __repr__(self) -> str:
        return f"Model(name={self.name!r}, backend={self.backend!r}, path={str(self.path)!r})"


def load_model(
    spec: Spec,
    node: str,
    *,
    warm_up_inputs: Sequence[torch.Tensor] | None = None,
    as_numpy: bool = False,
) -> Model:
    """Load the artifact of ``node`` (relative to the spec's folder), warmed up and checked.

    Checksums are not verified here: :func:`leapp.spec.load` does that when asked to
    (``Pipeline.load`` asks). The warm-up runs also check that the artifact returns the outputs
    the spec lists. They run on ``warm_up_inputs`` (one tensor per input port, such as a traced
    example) when given, else on zeros of the spec's input shapes; zeros are not always valid
    inputs (a Cholesky factorization of a zero matrix fails), so an artifact that raises on
    zeros is only logged as a warning. ``as_numpy``: try to run a TorchScript artifact as NumPy
    too (:attr:`Model.numpy_call`; a few milliseconds at load, for callers that hold NumPy
    arrays: the ROS nodes).

    Raises:
        PipelineError: unknown node, a node without artifact (backend null), a missing file,
            an unknown backend, an artifact that fails on ``warm_up_inputs``, or one whose
            outputs disagree with the spec (count, dtype, shape).
    """
    try:
        model = complex_view(spec.model(node))  # complex outputs the artifact writes as pairs
    except KeyError:
        names = [m.name for m in spec.models]
        raise PipelineError(f"no node {node!r} in spec {spec.name!r}; nodes: {names}") from None
    parameters = model.parameters
    if parameters.backend is None or parameters.model_path is None:
        raise PipelineError(
            f"node {node!r} has no artifact (backend: null): there is nothing to run; export "
            "it with export_with='jit', 'onnx' or 'pt2'"
        )
    if spec.path is None:
        raise PipelineError(f"spec {spec.name!r} has no file; write it with leapp.spec.dump()")
    path = spec.directory / parameters.model_path
    if not path.is_file():
        raise PipelineError(f"node {node!r}: artifact file {str(path)!r} does not exist")
    loaders = {"jit": _load_jit, "onnx": _load_onnx, "pt2": _load_pt2}
    loader = loaders.get(parameters.backend)
    if loader is None:
        raise PipelineError(
            f"node {node!r}: backend {parameters.backend!r} cannot be run; this runtime runs "
            f"{sorted(loaders)}"
        )
    started = time.perf_counter()
    try:
        if parameters.warp_segments:  # its Warp archive first: the artifact calls its segments
            from leapp.run.warp_runtime import load_archive

            load_archive(spec, model)
        if as_numpy and loader is _load_jit:
            runner = _load_jit(path, model, warm_up_inputs, as_numpy=True)
        else:
            runner = loader(path, model, warm_up_inputs)
    except PipelineError:
        raise
    except Exception as e:
        raise PipelineError(f"node {node!r}: cannot load {str(path)!r}: {e}") from e
    loaded = Model(model, path, *runner)
    _warm_up(loaded, warm_up_inputs)
    logger.debug(
        "node %s: loaded %s in %.1f ms",
        node,
        parameters.backend,
        1e3 * (time.perf_counter() - started),
    )
    return loaded


def port_check(owner: str, port: TensorSpec, key: str | None = None) -> _Check:
    dtype = getattr(torch, port.dtype.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise PipelineError(f"{owner}: port {port.name!r} has unknown dtype {port.dtype!r}")
    return (key or port.name, dtype, tuple(int(size) for size in port.shape))


def check_value(key: str, value: object, dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    if not isinstance(value, torch.Tensor):
        raise PipelineError(
            f"input {key!r} is a {type(value).__name__}, expected a torch.Tensor of dtype "
            f"{_dtype_name(dtype)} and shape {list(shape)} (use torch.as_tensor)"
        )
    if value.dtype is not dtype:
        raise PipelineError(
            f"input {key!r} has dtype {_dtype_name(value.dtype)}, expected "
            f"{_dtype_name(dtype)}; convert it with .to(torch.{_dtype_name(dtype)})"
        )
    if value.shape != shape:
        raise PipelineError(f"input {key!r} has shape {list(value.shape)}, expected {list(shape)}")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _warm_up(model: Model, inputs: Sequence[torch.Tensor] | None) -> None:
    on_zeros = inputs is None
    if inputs is None:
        inputs = [torch.zeros(shape, dtype=dtype) for _, dtype, shape in model._checks]
    try:
        for _ in range(_WARMUP_RUNS):
            results = model.run(inputs)
    except Exception as e:
        if not on_zeros:
            raise PipelineError(
                f"node {model.name!r}: the artifact {str(model.path)!r} fails on its traced "
                f"inputs: {e}; re-export the node or try another backend"
            ) from e
        logger.warning(
            "node %s: the artifact %s raises on zeros of its input shapes (%s); zeros may not "
            "be valid inputs for it (a singular matrix, an index out of range), so it is "
            "loaded unchecked",
            model.name,
            model.path,
            " ".join(str(e).split())[:300],
        )
        return
    check_outputs(model, results, "zeros of its input shapes" if on_zeros else "its inputs")


def _load_jit(
    path: Path, model: ModelSpec, inputs: Sequence[torch.Tensor] | None, as_numpy: bool = False
) -> _Runner:
    from leapp.run.numpy_program import numpy_program
    from leapp.run.static_runtime import static_forward

    torch.set_num_threads(1)
    with warnings.catch_warnings():
        # TorchScript is deprecated upstream but is what LEAPP deployments load.
        warnings.filterwarnings("ignore", message=".*torch.jit.load. is deprecated")
        module = torch.jit.load(str(path), map_location="cpu")
    module.eval()
    # The C method itself: ScriptModule.forward goes through Python wrappers on every call.
    get_method = getattr(getattr(module, "_c", None), "_get_method", None)
    if get_method is None:
        return _Runner(_module_call(module.forward))
    forward = get_method("forward")
    ports = [port_check(model.name, port)[1:] for port in model.inputs]
    static = static_forward(module, forward, ports, inputs, node=model.name)
    run = forward if static is None else static  # the static runtime runs in inference mode
    numpy_call = (
        numpy_program(module, forward, ports, inputs, node=model.name) if as_numpy else None
    )
    returns = [str(value.type) for value in forward.schema.returns]
    if returns == ["Tensor"]:  # one tensor out: no check of the result's type per call
        return _Runner(lambda values: (run(*values),), run, static is not None, numpy_call)
    return _Runner(_module_call(run), None, static is not None, numpy_call)


def _load_pt2(path: Path, model: ModelSpec, inputs: Sequence[torch.Tensor] | None) -> _Runner:
    from torch.export import load as load_program

    torch.set_num_threads(1)
    return _Runner(_module_call(load_program(str(path)).module()))


def _module_call(forward: Callable[..., Any]) -> _Call:
    def call(inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        result = forward(*inputs)
        if isinstance(result, torch.Tensor):
            return (result,)
        return tuple(result)

    return call


def _load_onnx(path: Path, model: ModelSpec, inputs: Sequence[torch.Tensor] | None) -> _Runner:
    import onnxruntime

    from leapp.run.onnx_runner import OnnxModel, session_options

    session = onnxruntime.InferenceSession(
        str(path), session_options(model), providers=["CPUExecutionProvider"]
    )
    runner = OnnxModel(model, path, session)  # matches the ports to the model's value names
    pairs = [port.dtype.startswith("complex") for port in model.outputs]
    if not any(pairs) and runner.bind():  # I/O binding: the cheap entry (see onnx_runner)
        return _Runner(_bound_call(runner.bound), _bound_single(runner.bound), True)
    run = runner.call
    from_numpy = torch.from_numpy

    def call(inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        arrays = []
        for value in inputs:
            try:
                arrays.append(value.numpy())  # a view: no copy for CPU tensors
            except (RuntimeError, TypeError):
                arrays.append(value.detach().cpu().numpy())
        results = tuple(map(from_numpy, run(arrays)))
        if any(pairs):  # complex outputs travel as (real, imaginary) pairs
            results = tuple(map(_complex_of_pairs, results, pairs))
        return results

    return _Runner(call, None, True)  # NumPy in and out: no autograd on the way


def _bound_call(bound: Any) -> _Call:
    """Tensors in and out of a :class:`~leapp.run.onnx_runner.BoundRun`'s buffers, through
    torch views of them: one copy in per input, one out per output, no NumPy on the way."""
    ins = [torch.from_numpy(buffer) for buffer in bound.input_buffers]
    outs = [torch.from_numpy(buffer) for buffer in bound.output_buffers]
    run = bound.run
    if len(ins) == 1 and len(outs) == 1:  # most policies: the shortest path
        (tensor_in,), (tensor_out,) = ins, outs

        def call_one(inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
            tensor_in.copy_(inputs[0])
            run()
            return (tensor_out.clone(),)

        return call_one

    def call(inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        for buffer, value in zip(ins, inputs, strict=True):
            buffer.copy_(value)
        run()
        return tuple(output.clone() for output in outs)

    return call


def _bound_single(bound: Any) -> _Single | None:
    """:func:`_bound_call` for a one-output model, called with the tensors positionally and
    returning the one tensor."""
    ins = [torch.from_numpy(buffer) for buffer in bound.input_buffers]
    outs = [torch.from_numpy(buffer) for buffer in bound.output_buffers]
    if len(outs) != 1:
        return None
    run, (tensor_out,) = bound.run, outs
    if len(ins) == 1:
        (tensor_in,) = ins

        def one(value: torch.Tensor) -> torch.Tensor:
            tensor_in.copy_(value)
            run()
            return tensor_out.clone()

        return one

    def many(*values: torch.Tensor) -> torch.Tensor:
        for buffer, value in zip(ins, values, strict=True):
            buffer.copy_(value)
        run()
        return tensor_out.clone()

    return many


def _complex_of_pairs(value: torch.Tensor, complex_port: bool) -> torch.Tensor:
    if complex_port and not value.is_complex() and value.dim() and value.shape[-1] == 2:
        return torch.view_as_complex(value.contiguous())
    return value
