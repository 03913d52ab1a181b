"""Reference runtime: run an exported pipeline in-process, node by node.

:class:`Pipeline` loads every node of an export (each a :class:`~leapp.run.model.Model`) and runs
them in producer-before-consumer order on each :meth:`Pipeline.step`::

    import torch
    from leapp.run.pipeline import Pipeline

    pipeline = Pipeline.load("exports/torch_pipeline")        # checks every sha256 first
    out = pipeline.step({"preprocess/state": torch.zeros(6),
                         "preprocess/velocity": torch.zeros(3)})
    out["policy/action"]                                       # every output of every node

State and feedback inputs start from the export's initial values and take, on each step, what
their producers published on the previous one; :meth:`Pipeline.reset` starts them over, and
:attr:`Pipeline.feedback` / :meth:`Pipeline.set_feedback` read and replace them.
Everything a step needs (order, port lists, expected shapes and dtypes) is computed at load; a
step only checks each external input's shape and dtype and calls the models.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch

from leapp.errors import PipelineError, SpecError
from leapp.run.model import Model, check_value, load_model, port_check
from leapp.run.step_code import NodeCall, compile_step
from leapp.spec import ModelSpec, Spec, TensorSpec
from leapp.spec.order import execution_order

__all__ = ["Pipeline"]


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
        # Every value of a step has a slot: the external inputs, then each node's outputs in
        # execution order, then the feedback inputs (what the next step feeds them, kept in
        # self._feedback between steps). The step itself is straight-line code over them.
        # Inputs and outputs are numbered apart: a state port is "node/port" on both sides.
        external_slot = {key: n for n, (key, _) in enumerate(external)}
        checks = [
            (external_slot[key], *port_check(f"{spec.name} input", port, key))
            for key, port in external
        ]
        self._input_keys = frozenset(external_slot)
        self._input_order = tuple(external_slot)
        order = _execution_order(spec, sources)
        output_slot: dict[str, int] = {}
        for model in order:
            for port in model.outputs:
                output_slot[f"{model.name}/{port.name}"] = len(external) + len(output_slot)
        # Values of feedback inputs, keyed by the consuming port: the initial values at load
        # and after reset(), then what the producers published last tick.
        self._initial = _initial_values(spec)
        feedback_base = len(external) + len(output_slot)
        self._feedback_index = {key: n for n, key in enumerate(self._initial)}
        self._feedback: list[torch.Tensor] = [None] * len(self._initial)  # type: ignore[list-item]
        self._feedback_checks = {
            key: port_check(f"{spec.name} feedback input", port, key)
            for model in spec.models
            for port in model.inputs
            if (key := f"{model.name}/{port.name}") in self._initial
        }
        self.reset()

        def read_slot(key: str) -> int:
            where, source = sources.get(key, (0, key))
            if where == 1:
                return output_slot[source]
            if where == 2:
                return feedback_base + self._feedback_index[source]
            return external_slot[source]

        self._models: dict[str, Model] = {}
        calls = []
        for model in order:
            loaded = load_model(spec, model.name)
            self._models[model.name] = loaded
            reads = tuple(read_slot(f"{model.name}/{port.name}") for port in model.inputs)
            first = output_slot[f"{model.name}/{model.outputs[0].name}"] if model.outputs else 0
            calls.append(
                NodeCall(
                    model.name,
                    loaded._call,
                    reads,
                    first,
                    len(model.outputs),
                    loaded._single,
                    loaded._grad_free,
                )
            )
        self._compiled_step, self.step_source = compile_step(
            inputs=checks,
            nodes=calls,
            output_keys=[(slot, key) for key, slot in output_slot.items()],
            feedback_base=feedback_base,
            feedback_moves=[
                (output_slot[producer], feedback_base + self._feedback_index[consumer])
                for producer, consumers in spec.pipeline.feedback_flow.items()
                for consumer in consumers
            ],
            feedback=self._feedback,
            input_keys=self._input_keys,
            key_error=self._key_error,
            check_value=check_value,
        )
        # The compiled function is the step: an instance attribute, one call frame less.
        self.step = self._compiled_step  # type: ignore[method-assign]

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Pipeline:
        """Load the export at ``path`` (folder or YAML), verifying every artifact's sha256."""
        from leapp import spec as spec_file

        return cls(spec_file.load(path, verify_checksums=True))

    def reset(self) -> None:
        """Put every state and feedback input back to its initial value."""
        for key, n in self._feedback_index.items():
            self._feedback[n] = self._initial[key].clone()

    @property
    def feedback(self) -> dict[str, torch.Tensor]:
        """What the next :meth:`step` feeds each state and feedback input, keyed
        ``"node/port"``: the initial values after load and :meth:`reset`, then what their
        producers published on the last step."""
        return {key: self._feedback[n] for key, n in self._feedback_index.items()}

    def set_feedback(self, values: Mapping[str, torch.Tensor]) -> None:
        """Replace what the next :meth:`step` feeds some state or feedback inputs.

        Raises:
            PipelineError: a key that is no state or feedback input, or a value of the wrong
                shape or dtype; the message names the port.
        """
        unknown = sorted(set(values) - self._feedback_checks.keys())
        if unknown:
            raise PipelineError(
                f"pipeline {self._spec.name!r}: {unknown} are no state or feedback inputs; "
                f"set_feedback() takes some of {sorted(self._feedback_checks)}"
            )
        for key, value in values.items():
            _, dtype, shape = self._feedback_checks[key]
            check_value(key, value, dtype, shape)
        for key, value in values.items():  # a step computes no gradients: no history kept
            self._feedback[self._feedback_index[key]] = (
                value.detach() if value.requires_grad else value
            )

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
        return self._input_order

    def step(self, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Run every node once; returns ``{"node/port": tensor}`` for every node output.

        ``inputs`` maps every key of :attr:`input_keys` to a tensor of the spec's shape and
        dtype. No output tracks gradients; the outputs of TorchScript nodes that run in the
        static runtime are inference tensors (see :mod:`leapp.run.model`).

        Raises:
            PipelineError: a missing or unexpected key, a non-tensor, or a wrong shape or dtype;
                the message names the port.
        """
        return self._compiled_step(inputs)  # (instances call it directly: see __init__)

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
    needs: dict[str, set[str]] = {m.name: set() for m in spec.models}
    for key, (where, source) in sources.items():
        if where == 1:
            needs[key.split("/", 1)[0]].add(source.split("/", 1)[0])
    try:
        names = execution_order(needs, pipeline=spec.name)
    except SpecError as e:
        raise PipelineError(str(e)) from e
    return [spec.model(name) for name in names]
