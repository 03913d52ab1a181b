"""Reference runtime: run an exported pipeline in-process, node by node.

:func:`load_model` loads one node's artifact (TorchScript, ONNX or pt2) behind one interface,
:class:`Model`; :class:`Pipeline` loads every node of an export and runs them in
producer-before-consumer order on each :meth:`Pipeline.step`::

    import torch
    from leapp.runtime import Pipeline

    pipeline = Pipeline.load("exports/torch_pipeline")        # checks every sha256 first
    out = pipeline.step({"preprocess/state": torch.zeros(6),
                         "preprocess/velocity": torch.zeros(3)})
    out["policy/action"]                                       # every output of every node

Runtimes follow the deployment settings: ONNX Runtime with one intra-op and one inter-op
thread, TorchScript and pt2 with ``torch.set_num_threads(1)`` (process-wide), and warm-up runs
on zeros at load, so the first step is not slower than the others. Everything a step needs
(order, port lists, expected shapes and dtypes, ONNX input names) is computed at load; a step
only checks each external input's shape and dtype and calls the models.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from leapp.errors import PipelineError
from leapp.spec import ModelSpec, Spec, TensorSpec

__all__ = ["Model", "Pipeline", "load_model"]

logger = logging.getLogger(__name__)

_Call = Callable[[Sequence[torch.Tensor]], tuple[torch.Tensor, ...]]
_Check = tuple[str, torch.dtype, tuple[int, ...]]  # (port, dtype, shape)
_WARMUP_RUNS = 2  # TorchScript's profiling executor settles on its optimized plan at run 2


class Model:
    """One node's loaded artifact, called with tensors in the spec's port order.

    ``name`` is the node, ``backend`` its backend, ``inputs``/``outputs`` its port specs.
    """

    __slots__ = ("_call", "_checks", "backend", "inputs", "name", "outputs", "path")

    def __init__(self, model: ModelSpec, path: Path, call: _Call):
        self.name = model.name
        self.backend = model.parameters.backend
        self.inputs = model.inputs
        self.outputs = model.outputs
        self.path = path
        self._call = call
        self._checks = tuple(_check_of(model.name, port) for port in model.inputs)

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
            _check_value(f"{self.name}/{port}", value, dtype, shape)
        with torch.no_grad():
            return self._call(inputs)

    def __repr__(self) -> str:
        return f"Model(name={self.name!r}, backend={self.backend!r}, path={str(self.path)!r})"


def load_model(spec: Spec, node: str) -> Model:
    """Load the artifact of ``node`` (relative to the spec's folder), warmed up and checked.

    Checksums are not verified here: :func:`leapp.spec.load` does that when asked to
    (``Pipeline.load`` asks). Warm-up runs on zeros of the spec's input shapes also check that
    the artifact returns the outputs the spec lists.

    Raises:
        PipelineError: unknown node, a node without artifact (backend null), a missing file,
            an unknown backend, or an artifact that disagrees with the spec.
    """
    try:
        model = spec.model(node)
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
        call = loader(path, model)
    except PipelineError:
        raise
    except Exception as e:
        raise PipelineError(f"node {node!r}: cannot load {str(path)!r}: {e}") from e
    loaded = Model(model, path, call)
    _warm_up(loaded)
    logger.debug(
        "node %s: loaded %s in %.1f ms",
        node,
        parameters.backend,
        1e3 * (time.perf_counter() - started),
    )
    return loaded


class Pipeline:
    """Every node of an export, run in producer-before-consumer order by :meth:`step`.

    Build it with :meth:`load` from an export folder (or its YAML file), or directly from a
    :class:`~leapp.spec.Spec` that has a ``path``.
    """

    def __init__(self, spec: Spec):
        unexported = [m.name for m in spec.models if m.parameters.backend is None]
        if unexported:
            raise PipelineError(
                f"pipeline {spec.name!r}: nodes {unexported} have no artifact (backend: null), "
                "so the pipeline cannot run; export them with export_with='jit', 'onnx' or 'pt2'"
            )
        self._spec = spec
        sources, external = _wire(spec)
        self._checks: tuple[_Check, ...] = tuple(
            _check_of(f"{spec.name} input", port, key) for key, port in external
        )
        self._input_keys = frozenset(key for key, _ in external)
        # Values of feedback inputs (source index 2), keyed by the consuming port: the initial
        # values at load and after reset(), then what the producers published last tick.
        self._initial = _initial_values(spec)
        self._feedback: dict[str, torch.Tensor] = {}
        self._feedback_edges = tuple(
            (producer, consumer)
            for producer, consumers in spec.pipeline.feedback_flow.items()
            for consumer in consumers
        )
        self.reset()
        self._models: dict[str, Model] = {}
        plan = []
        for model in _execution_order(spec, sources):
            loaded = load_model(spec, model.name)
            self._models[model.name] = loaded
            inputs = tuple(
                sources.get(f"{model.name}/{p.name}", (0, f"{model.name}/{p.name}"))
                for p in model.inputs
            )
            keys = tuple(f"{model.name}/{p.name}" for p in model.outputs)
            plan.append((loaded._call, inputs, keys))
        self._plan = tuple(plan)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Pipeline:
        """Load the export at ``path`` (folder or YAML), verifying every artifact's sha256."""
        from leapp import spec as spec_file

        return cls(spec_file.load(path, verify_checksums=True))

    def reset(self) -> None:
        """Put every state and feedback input back to its initial value."""
        self._feedback.clear()
        self._feedback.update({key: value.clone() for key, value in self._initial.items()})

    @property
    def spec(self) -> Spec:
        """The spec this pipeline runs."""
        return self._spec

    @property
    def models(self) -> Mapping[str, Model]:
        """The loaded node models, in execution order."""
        return dict(self._models)

    @property
    def input_keys(self) -> tuple[str, ...]:
        """The ``"node/port"`` keys :meth:`step` needs: inputs no data_flow edge feeds."""
        return tuple(key for key, _, _ in self._checks)

    def step(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Run every node once; returns ``{"node/port": tensor}`` for every node output.

        ``inputs`` maps every key of :attr:`input_keys` to a tensor of the spec's shape and
        dtype.

        Raises:
            PipelineError: a missing or unexpected key, a non-tensor, or a wrong shape or dtype;
                the message names the port.
        """
        if inputs.keys() != self._input_keys:
            raise self._key_error(inputs)
        for key, dtype, shape in self._checks:
            value = inputs[key]
            try:
                if value.dtype is dtype and value.shape == shape:
                    continue
            except AttributeError:
                pass
            _check_value(key, value, dtype, shape)
        outputs: dict[str, torch.Tensor] = {}
        values = (inputs, outputs, self._feedback)
        with torch.no_grad():
            for call, sources, keys in self._plan:
                results = call([values[where][key] for where, key in sources])
                outputs.update(zip(keys, results, strict=True))
        for producer, consumer in self._feedback_edges:
            self._feedback[consumer] = outputs[producer]
        return outputs

    def _key_error(self, inputs: Mapping[str, Any]) -> PipelineError:
        given = set(inputs.keys())
        missing = sorted(self._input_keys - given)
        extra = sorted(given - self._input_keys)
        problems = []
        if missing:
            problems.append(f"missing input(s) {missing}")
        if extra:
            problems.append(f"unexpected input(s) {extra} (not external inputs of the pipeline)")
        return PipelineError(
            f"pipeline {self._spec.name!r}: {'; '.join(problems)}; step() takes exactly "
            f"{sorted(self._input_keys)}"
        )


def _wire(spec: Spec) -> tuple[dict[str, tuple[int, str]], list[tuple[str, TensorSpec]]]:
    """Map each fed input to (1, producer key) or, fed back, (2, its own key); list the
    external inputs as (key, port)."""
    outputs = {f"{m.name}/{p.name}" for m in spec.models for p in m.outputs}
    inputs = {f"{m.name}/{p.name}" for m in spec.models for p in m.inputs}
    sources: dict[str, tuple[int, str]] = {}
    for producer, consumers in spec.pipeline.data_flow.items():
        if producer not in outputs:
            raise PipelineError(f"data_flow names {producer!r}, which is no node output")
        for consumer in consumers:
            if consumer not in inputs:
                raise PipelineError(f"data_flow feeds {consumer!r}, which is no node input")
            if consumer in sources:
                raise PipelineError(
                    f"data_flow feeds {consumer!r} from both {sources[consumer][1]!r} and "
                    f"{producer!r}; an input takes one producer"
                )
            sources[consumer] = (1, producer)
    for producer, consumers in spec.pipeline.feedback_flow.items():
        if producer not in outputs:
            raise PipelineError(f"feedback_flow names {producer!r}, which is no node output")
        for consumer in consumers:
            if consumer not in inputs or consumer in sources:
                raise PipelineError(
                    f"feedback_flow feeds {consumer!r}, which is no node input or is also fed "
                    "by data_flow"
                )
            sources[consumer] = (2, consumer)
    external = [
        (f"{m.name}/{p.name}", p)
        for m in spec.models
        for p in m.inputs
        if f"{m.name}/{p.name}" not in sources
    ]
    return sources, external


def _initial_values(spec: Spec) -> dict[str, torch.Tensor]:
    """The first-tick value of every feedback input, from ``pipeline.initial_values``."""
    targets = [c for consumers in spec.pipeline.feedback_flow.values() for c in consumers]
    if not targets:
        return {}
    name = spec.pipeline.initial_values
    path = spec.directory / name if name else None
    if path is None or not path.is_file():
        raise PipelineError(
            f"pipeline {spec.name!r} has feedback inputs {targets} but no initial values file "
            f"({path or 'pipeline.initial_values is not set'}); re-export the pipeline"
        )
    from safetensors.torch import load_file

    values = load_file(str(path))
    missing = [t for t in targets if t not in values]
    if missing:
        raise PipelineError(
            f"{path}: no initial value for feedback input(s) {missing}; re-export the pipeline"
        )
    return {t: values[t] for t in targets}


def _execution_order(spec: Spec, sources: Mapping[str, tuple[int, str]]) -> list[ModelSpec]:
    """Models ordered producers before consumers, otherwise in spec order."""
    needs = {
        m.name: {
            source.split("/", 1)[0]
            for key, (where, source) in sources.items()
            if where == 1 and key.split("/", 1)[0] == m.name
        }
        for m in spec.models
    }
    order: list[ModelSpec] = []
    done: set[str] = set()
    while len(order) < len(spec.models):
        ready = [m for m in spec.models if m.name not in done and needs[m.name] <= done]
        if not ready:
            cycle = sorted(set(needs) - done)
            raise PipelineError(
                f"pipeline {spec.name!r}: data_flow has a cycle through nodes {cycle}; "
                "values that go back to an earlier node belong in feedback_flow"
            )
        order.append(ready[0])
        done.add(ready[0].name)
    return order


def _check_of(owner: str, port: TensorSpec, key: str | None = None) -> _Check:
    dtype = getattr(torch, port.dtype.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise PipelineError(f"{owner}: port {port.name!r} has unknown dtype {port.dtype!r}")
    return (key or port.name, dtype, tuple(int(size) for size in port.shape))


def _check_value(key: str, value: object, dtype: torch.dtype, shape: tuple[int, ...]) -> None:
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


def _warm_up(model: Model) -> None:
    zeros = [torch.zeros(shape, dtype=dtype) for _, dtype, shape in model._checks]
    try:
        for _ in range(_WARMUP_RUNS):
            results = model.run(zeros)
    except Exception as e:
        raise PipelineError(
            f"node {model.name!r}: the artifact {str(model.path)!r} fails on zeros of the "
            f"spec's input shapes: {e}; re-export the node or try another backend"
        ) from e
    expected = [_check_of(model.name, port) for port in model.outputs]
    if len(results) != len(expected):
        raise PipelineError(
            f"node {model.name!r}: the artifact {str(model.path)!r} returns {len(results)} "
            f"outputs, the spec lists {len(expected)} {[p.name for p in model.outputs]}; "
            "re-export the node"
        )
    for (port, dtype, shape), value in zip(expected, results, strict=True):
        if value.dtype is not dtype or value.shape != shape:
            raise PipelineError(
                f"node {model.name!r}: output {port!r} of {str(model.path)!r} is "
                f"{_dtype_name(value.dtype)} {list(value.shape)}, the spec says "
                f"{_dtype_name(dtype)} {list(shape)}; re-export the node"
            )


def _load_jit(path: Path, model: ModelSpec) -> _Call:
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        # TorchScript is deprecated upstream but is what LEAPP deployments load.
        warnings.filterwarnings("ignore", message=".*torch.jit.load. is deprecated")
        module = torch.jit.load(str(path), map_location="cpu")
    module.eval()
    return _module_call(module.forward)


def _load_pt2(path: Path, model: ModelSpec) -> _Call:
    from torch.export import load as load_program

    torch.set_num_threads(1)
    return _module_call(load_program(str(path)).module())


def _module_call(forward: Callable[..., Any]) -> _Call:
    def call(inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        result = forward(*inputs)
        if isinstance(result, torch.Tensor):
            return (result,)
        return tuple(result)

    return call


def _load_onnx(path: Path, model: ModelSpec) -> _Call:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    input_names = _match_names(
        model.name, "inputs", [i.name for i in session.get_inputs()], model.inputs
    )
    output_names = _match_names(
        model.name, "outputs", [o.name for o in session.get_outputs()], model.outputs
    )
    run = session.run
    from_numpy = torch.from_numpy

    def call(inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        feed = {}
        for name, value in zip(input_names, inputs, strict=True):
            try:
                feed[name] = value.numpy()  # a view: no copy for CPU tensors
            except (RuntimeError, TypeError):
                feed[name] = value.detach().cpu().numpy()
        return tuple(map(from_numpy, run(output_names, feed)))

    return call


def _match_names(node: str, what: str, names: list[str], ports: Sequence[TensorSpec]) -> list[str]:
    """ONNX value names in port order: by name when every port finds its name (the port name,
    or ``<port>_in`` / ``<port>_out`` for a port that is both an input and an output, as leapp
    and NVIDIA's LEAPP write them), else by position (files from other tools keep the order).
    """
    port_names = [port.name for port in ports]
    if len(names) != len(port_names):
        raise PipelineError(
            f"node {node!r}: the ONNX model has {len(names)} {what} {names}, the spec lists "
            f"{len(port_names)} {port_names}; re-export the node"
        )
    suffix = "_in" if what == "inputs" else "_out"
    available = set(names)
    matched = []
    for port in port_names:
        found = next((n for n in (port, port + suffix) if n in available), None)
        if found is None:
            return names
        matched.append(found)
    return matched
