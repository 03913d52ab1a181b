"""NVIDIA LEAPP's runtime class, :class:`InferenceManager`, as a thin face over
:class:`~leapp.run.pipeline.Pipeline`, so code written for LEAPP 0.7.2 runs unchanged::

    from leapp import InferenceManager

    manager = InferenceManager("exports/torch_pipeline/torch_pipeline.yaml")
    out = manager.run_policy(manager.get_mock_input())    # {"policy/action": tensor, ...}
    manager.value_dict["policy"]["obs"]                    # what each node input holds now
    manager.reset()

:class:`~leapp.run.pipeline.Pipeline` does the work: it loads and steps the models, keeps the
state and feedback values. This class adds LEAPP's view of it: ``value_dict`` (per node, the
value each input holds; ``"==out=="`` the pipeline outputs), inputs that keep their last value
when ``run_policy`` is not given them, and LEAPP's load-time checks and error types
(:mod:`leapp.run.inference_checks`). Every error is a :class:`~leapp.errors.LeappError` and
also the built-in type LEAPP raises (``ValueError``, ``FileNotFoundError``). Everything runs on
the CPU: ``nodes[name].device`` is ``"cpu"`` and inputs on another device are copied to the
CPU.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from leapp.errors import PipelineError
from leapp.run.inference_checks import (
    PipelineValueError,
    SpecFileNotFoundError,
    SpecValueError,
    check_initial_values,
    load_checked_spec,
    read_description,
)
from leapp.run.model import Model, port_check
from leapp.run.pipeline import Pipeline
from leapp.spec import Spec

__all__ = [
    "OUTPUTS",
    "InferenceManager",
    "InferenceNode",
    "PipelineValueError",
    "SpecFileNotFoundError",
    "SpecValueError",
]

logger = logging.getLogger(__name__)

#: The ``value_dict`` entry holding the pipeline outputs, keyed ``"node/port"`` (LEAPP's name).
OUTPUTS = "==out=="


class InferenceNode:
    """One loaded node as LEAPP's ``NodeManager`` shows it: its port descriptions (the YAML
    entries), ``model`` (a :class:`~leapp.run.model.Model`) and ``device``; calling it runs the
    model on one tensor per input and returns a tensor, or a tuple for several outputs."""

    def __init__(self, model: Model, description: Mapping[str, Any]):
        self.name = model.name
        self.model = model
        self.model_path = str(model.path)
        self.input_descriptions = list(description["inputs"])
        self.output_descriptions = list(description["outputs"])
        self.device = "cpu"

    input_names = property(lambda self: [p.name for p in self.model.inputs])
    input_shapes = property(lambda self: [list(p.shape) for p in self.model.inputs])
    input_dtypes = property(lambda self: [p.dtype for p in self.model.inputs])
    output_names = property(lambda self: [p.name for p in self.model.outputs])
    output_shapes = property(lambda self: [list(p.shape) for p in self.model.outputs])
    output_dtypes = property(lambda self: [p.dtype for p in self.model.outputs])

    @property
    def mock_input(self) -> dict[str, torch.Tensor]:
        """Zeros for every input, by port name."""
        return _zeros(self.name, self.model.inputs)

    @property
    def mock_output(self) -> dict[str, torch.Tensor]:
        """Zeros for every output, by port name."""
        return _zeros(self.name, self.model.outputs)

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        try:
            outputs = self.model.run(inputs)
        except PipelineError as e:
            raise PipelineValueError(str(e)) from e
        return outputs[0] if len(outputs) == 1 else outputs

    def __repr__(self) -> str:
        return f"InferenceNode(name={self.name!r}, model_path={self.model_path!r})"


class InferenceManager:
    """An export, loaded from its YAML file and run as NVIDIA LEAPP's ``InferenceManager`` does.

    Args:
        model_path: the export's ``<name>.yaml`` (LEAPP's name for the argument).

    Raises:
        SpecFileNotFoundError: no file at ``model_path``, or no initial values file.
        SpecValueError: not a ``.yaml`` path, a key LEAPP requires is missing, the spec is
            inconsistent (every problem listed, e.g. an output nothing routes), an artifact's
            checksum differs, or an initial values key names no node input.
        PipelineValueError: the export cannot run (a node without artifact, an artifact that
            fails on zeros of its input shapes).
    """

    def __init__(self, model_path: str | os.PathLike[str]):
        path = os.fspath(model_path)
        if not os.path.exists(path):
            raise SpecFileNotFoundError(
                f"Leapp description file not found at {path!r}; pass the <name>.yaml that "
                "leapp.compile_graph() wrote into <save_path>/<name>/"
            )
        if not path.endswith(".yaml"):
            raise SpecValueError(
                f"Leapp description file must end with .yaml, got {path!r}; pass the export's "
                "<name>.yaml"
            )
        self.model_path = path
        self.leapp_description = read_description(Path(path))
        self.models: dict[str, Any] = self.leapp_description["models"]
        self.pipeline: dict[str, Any] = self.leapp_description["pipeline"]
        self.system_info: dict[str, Any] = self.leapp_description["system information"]
        spec = load_checked_spec(Path(path))
        check_initial_values(spec)
        try:
            self._runtime = Pipeline(spec)
        except PipelineError as e:
            raise PipelineValueError(f"{path}: {e}") from e
        self._spec = spec
        loaded = self._runtime.models
        self.nodes = {
            m.name: InferenceNode(loaded[m.name], self.models[m.name]) for m in spec.models
        }
        self.organized_pipeline_connections = _connections(spec)
        self._routes = tuple(
            (f"{node}/{port}", tuple(targets))
            for node, ports in self.organized_pipeline_connections.items()
            for port, targets in ports.items()
        )
        self._feedback = tuple((key, *key.split("/")) for key in self.feedback_inputs)
        self._external = tuple((key, *key.split("/")) for key in self._runtime.input_keys)
        self._settable = frozenset(key for key, _, _ in self._feedback + self._external)
        self.value_dict: dict[str, dict[str, torch.Tensor]] = {}
        self.reset()
        logger.info("loaded %s: nodes %s, running on the CPU", path, list(self.nodes))

    @property
    def runtime(self) -> Pipeline:
        """The :class:`~leapp.run.pipeline.Pipeline` doing the work."""
        return self._runtime

    @property
    def inputs(self) -> list[str]:
        """The pipeline inputs, ``"node/port"``, as ``pipeline.inputs`` lists them."""
        return _keys(self._spec.pipeline.inputs)

    @property
    def outputs(self) -> list[str]:
        """The pipeline outputs, ``"node/port"``: the keys :meth:`run_policy` returns."""
        return _keys(self._spec.pipeline.outputs)

    @property
    def feedback_inputs(self) -> list[str]:
        """The inputs ``pipeline.feedback_flow`` feeds (state included), ``"node/port"``."""
        return [t for targets in self._spec.pipeline.feedback_flow.values() for t in targets]

    def run_policy(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Run every node once; returns every pipeline output, keyed ``"node/port"``.

        ``inputs`` maps ``"node/port"`` to tensors of the spec's shape and dtype: pipeline
        inputs, or state/feedback inputs to override their value for this step. An input not
        given keeps its value from the previous step (zeros after load and :meth:`reset`), as
        in LEAPP.

        Raises:
            PipelineValueError: a key that is malformed, names no node input, or names an input
                another node feeds; a value of the wrong shape or dtype. The message names it.
        """
        values = self.value_dict
        given = [(self._settable_key(key), _on_cpu(value)) for key, value in inputs.items()]
        previous = [(node, port, values[node][port]) for (node, port), _ in given]
        for (node, port), value in given:
            values[node][port] = value
        try:
            self._runtime.set_feedback({key: values[n][p] for key, n, p in self._feedback})
            outputs = self._runtime.step({key: values[n][p] for key, n, p in self._external})
        except PipelineError as e:
            for node, port, value in reversed(previous):  # a refused call changes nothing
                values[node][port] = value
            raise PipelineValueError(str(e)) from e
        for key, targets in self._routes:
            value = outputs[key]
            for i, (node, port) in enumerate(targets):
                # Every consumer after the first gets its own copy (LEAPP's fan-out rule).
                values[node][port] = value if i == 0 else value.clone()
        return dict(values[OUTPUTS])

    __call__ = run_policy

    def set_input_value(self, node_name: str, input_name: str, value: torch.Tensor) -> None:
        """Set what ``node_name/input_name`` holds for the next :meth:`run_policy`: ``value``
        copied into a new tensor of the port's shape and dtype (broadcast and cast as
        ``Tensor.copy_`` does)."""
        node, port = self._settable_key(f"{node_name}/{input_name}")
        current = self.value_dict[node][port]
        try:
            self.value_dict[node][port] = torch.empty_like(current).copy_(value)
        except (RuntimeError, TypeError) as e:
            raise PipelineValueError(
                f"set_input_value({node_name!r}, {input_name!r}): cannot copy the value into "
                f"dtype {current.dtype}, shape {list(current.shape)}: {e}"
            ) from e

    def get_mock_input(self) -> dict[str, torch.Tensor]:
        """Random values for every pipeline input, keyed ``"node/port"``: normal floats,
        integers in ``[0, 256)`` (or the dtype's range, if smaller), booleans either value."""
        mock = {}
        for key in self.inputs:
            node, port = key.split("/")
            _, dtype, shape = port_check(node, self._spec.model(node).input(port))
            mock[key] = _random(dtype, shape)
        return mock

    def reset(self) -> None:
        """Start over as right after load: every input and output zeros, then state and
        feedback inputs their initial values."""
        self._runtime.reset()
        for model in self._spec.models:
            self.value_dict.setdefault(model.name, {}).update(_zeros(model.name, model.inputs))
        self.value_dict.setdefault(OUTPUTS, {}).update(
            (f"{node}/{name}", value)
            for node, ports in self._spec.pipeline.outputs.items()
            for name, value in _zeros(node, map(self._spec.model(node).output, ports)).items()
        )
        for key, value in self._runtime.feedback.items():
            node, port = key.split("/")
            self.value_dict[node][port] = value

    def _settable_key(self, key: str) -> tuple[str, str]:
        parts = key.split("/") if isinstance(key, str) else []
        if len(parts) != 2:
            raise PipelineValueError(
                f"Invalid input key: {key!r}. Expected format: node_name/input_name, one of "
                f"{sorted(self._settable)}"
            )
        if key not in self._settable:
            node, port = parts
            if any(key in targets for targets in self._spec.pipeline.data_flow.values()):
                why = "another node's output feeds it on every step"
            elif node in self.nodes:
                why = (
                    f"node {node!r} has no input {port!r} (inputs: {self.nodes[node].input_names})"
                )
            else:
                why = f"there is no node {node!r} (nodes: {list(self.nodes)})"
            raise PipelineValueError(
                f"input {key!r} cannot be set: {why}; set pipeline inputs or state/feedback "
                f"inputs: {sorted(self._settable)}"
            )
        return parts[0], parts[1]

    def __repr__(self) -> str:
        return f"InferenceManager({self.model_path!r})"


def _connections(spec: Spec) -> dict[str, dict[str, list[tuple[str, str]]]]:
    """LEAPP's ``organized_pipeline_connections``: per node and output, its consumers as
    ``(node, input)`` (data_flow, then feedback_flow), then ``("==out==", "node/output")`` for
    a pipeline output."""
    connections: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for flow in (spec.pipeline.data_flow, spec.pipeline.feedback_flow):
        for source, targets in flow.items():
            node, port = source.split("/")
            consumers = connections.setdefault(node, {}).setdefault(port, [])
            consumers.extend((target.split("/")[0], target.split("/")[1]) for target in targets)
    for key in _keys(spec.pipeline.outputs):
        node, port = key.split("/")
        connections.setdefault(node, {}).setdefault(port, []).append((OUTPUTS, key))
    return connections


def _keys(ports: Mapping[str, tuple[str, ...]]) -> list[str]:
    return [f"{node}/{port}" for node, names in ports.items() for port in names]


def _zeros(node: str, ports: Any) -> dict[str, torch.Tensor]:
    return {
        name: torch.zeros(shape, dtype=dtype)
        for name, dtype, shape in (port_check(node, port) for port in ports)
    }


def _on_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.device.type != "cpu":
        return value.cpu()
    return value


def _random(dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    if dtype.is_floating_point or dtype.is_complex:
        return (
            torch.randn(shape).to(dtype) if dtype.itemsize < 2 else torch.randn(shape, dtype=dtype)
        )
    if dtype is torch.bool:
        return torch.randint(0, 2, shape).bool()
    return torch.randint(0, min(256, int(torch.iinfo(dtype).max) + 1), shape, dtype=dtype)
