"""The reference a live graph is compared with by ``leapp-ros verify`` and the generated
launch_testing test: ticks of external inputs and the outputs expected for them.

:func:`make_reference` picks, in this order, the user's inputs file (:func:`load_inputs`, run
through :class:`leapp.Pipeline`), the examples recorded while tracing (:func:`ticks`), or seeded
random inputs of the external ports' shapes and dtypes (:func:`random_inputs`: floats from a
standard normal distribution, integers in 0..4, bools) run through :class:`leapp.Pipeline`
(:func:`reference_ticks`, state and feedback carried from tick to tick). An export that cannot
be replayed tick by tick, or an inputs file that does not fit it, is a :class:`ReplayError`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from leapp.errors import LeappError
from leapp.spec import Spec
from leapp_ros.plan.pipeline import PipelinePlan, make_plan

__all__ = [
    "RECORDED_EXAMPLES",
    "Reference",
    "ReplayError",
    "Tick",
    "load_inputs",
    "make_reference",
    "random_inputs",
    "reference_ticks",
    "replayable_plan",
    "ticks",
]

RECORDED_EXAMPLES = "the recorded examples"
_INT_RANGE = (0, 5)  # random integer inputs: 0..4, valid for unsigned types and small indices


class ReplayError(LeappError):
    """The export cannot be replayed through ROS: a timer-fired node, a node without artifact,
    examples that are not whole ticks, an inputs file that does not fit the external inputs,
    or inputs the pipeline fails on."""


@dataclass(frozen=True)
class Tick:
    """One tick: the external inputs (``"node/port"``) and every expected output."""

    inputs: dict[str, torch.Tensor]
    outputs: dict[str, torch.Tensor]


@dataclass(frozen=True)
class Reference:
    """What the graph is compared with: ``what`` names it in the report (the recorded
    examples, random inputs and their seed, or an inputs file), ``ticks`` in order."""

    what: str
    ticks: tuple[Tick, ...]


def ticks(spec: Spec) -> list[Tick]:
    """The recorded ticks of ``spec``, in tracing order, ready to replay.

    Raises:
        ReplayError: a node runs on a timer or has no artifact, the spec names no examples
            file, or the nodes ran different numbers of times while tracing.
        SpecError: the examples file is missing or unreadable.
    """
    from leapp.spec.examples import load_examples

    plan = replayable_plan(spec)
    if spec.pipeline.examples is None:
        raise ReplayError(
            f"spec {spec.path} names no examples file (pipeline.examples), so there is "
            "nothing to replay; make_reference() runs leapp.Pipeline on random inputs instead"
        )
    samples = load_examples(spec.directory / spec.pipeline.examples)
    counts = {model.name: len(samples.get(model.name, [])) for model in spec.models}
    if len(set(counts.values())) != 1 or not min(counts.values()):
        raise ReplayError(
            f"pipeline {spec.name!r}: the nodes ran different numbers of times while tracing "
            f"({counts}), so the examples are not whole ticks and cannot be replayed"
        )
    external = [key.split("/", 1) for key, _ in _external_ports(spec, plan)]
    recorded = []
    for index in range(next(iter(counts.values()))):
        try:
            inputs = {f"{n}/{p}": samples[n][index].inputs[p] for n, p in external}
        except KeyError as e:
            raise ReplayError(
                f"sample {index} of the examples of {spec.name!r} has no value for input "
                f"{e.args[0]!r}; the examples file does not belong to this spec"
            ) from None
        outputs = {
            f"{model.name}/{port}": value
            for model in spec.models
            for port, value in samples[model.name][index].outputs.items()
        }
        recorded.append(Tick(inputs, outputs))
    return recorded


def random_inputs(spec: Spec, count: int = 20, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """``count`` ticks of random values for every external input of ``spec`` (``"node/port"``),
    of the port's shape and dtype: floats (and complex values) from a standard normal
    distribution, integers in 0..4, bools; the same ``seed`` gives the same values.

    Raises:
        ReplayError: ``count`` is below 1.
        PipelineError: a port's dtype is unknown.
    """
    if count < 1:
        raise ReplayError(f"random inputs for {count} ticks: give at least 1 tick")
    ports = _external_ports(spec, make_plan(spec))
    generator = torch.Generator().manual_seed(seed)
    return [{key: _random(dtype, shape, generator) for key, (dtype, shape) in ports}
            for _ in range(count)]  # fmt: skip


def load_inputs(spec: Spec, path: str | os.PathLike[str]) -> list[dict[str, torch.Tensor]]:
    """The ticks of external inputs in the safetensors file ``path``: one tensor per external
    input of ``spec``, keyed ``"node/port"``, of the port's dtype and shape after a leading
    ticks axis (the same length for every input).

    Raises:
        ReplayError: the file is missing or unreadable, lacks an external input, has a key
            that is none, or a tensor of another dtype, shape or number of ticks.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    ports = dict(_external_ports(spec, make_plan(spec)))
    layout = ", ".join(f"{key!r}: {_dtype_name(dtype)} {['ticks', *shape]}"
                       for key, (dtype, shape) in ports.items())  # fmt: skip
    what = f"inputs file {path}"
    try:
        values = load_file(str(path))
    except (OSError, SafetensorError) as e:
        raise ReplayError(f"{what} cannot be read ({e}); give a safetensors file") from e
    missing = [key for key in ports if key not in values]
    unknown = sorted(set(values) - set(ports))
    if missing or unknown:
        problems = [f"no value for external input(s) {missing}"] if missing else []
        problems += [f"{unknown} are no external inputs"] if unknown else []
        raise ReplayError(f"{what}: {'; '.join(problems)}; pipeline {spec.name!r} takes {layout}")
    counts = set()
    for key, (dtype, shape) in ports.items():
        value = values[key]
        if value.dtype != dtype or value.dim() != len(shape) + 1 or value.shape[1:] != shape:
            raise ReplayError(
                f"{what}: {key!r} is {_dtype_name(value.dtype)} of shape {list(value.shape)}, "
                f"expected {_dtype_name(dtype)} of shape {['ticks', *shape]} (a leading ticks "
                f"axis, then the port's shape); pipeline {spec.name!r} takes {layout}"
            )
        counts.add(value.shape[0])
    if len(counts) != 1 or 0 in counts:
        raise ReplayError(
            f"{what}: the inputs have different numbers of ticks (or none): "
            f"{ {key: values[key].shape[0] for key in ports} }; give every input the same, at "
            "least 1"
        )
    return [{key: values[key][tick].contiguous() for key in ports} for tick in range(counts.pop())]


def reference_ticks(
    spec: Spec, inputs: Sequence[dict[str, torch.Tensor]], what: str = "the given inputs"
) -> list[Tick]:
    """``inputs`` run through :class:`leapp.Pipeline` in this process, tick by tick from the
    initial state and feedback values: each tick's inputs and every output of every node.

    Raises:
        ReplayError: the pipeline fails on a tick (``what`` names the inputs in the message).
    """
    from leapp.run.pipeline import Pipeline

    pipeline = Pipeline(spec)
    result = []
    for index, values in enumerate(inputs):
        try:
            outputs = pipeline.step(values)
        except Exception as e:  # the user's models, any runtime: say where, and what to do
            raise ReplayError(
                f"leapp.Pipeline of {spec.name!r} fails on tick {index} of {what}: {e}; give "
                "inputs it accepts with --inputs FILE.safetensors"
            ) from e
        result.append(Tick(dict(values), {key: value.clone() for key, value in outputs.items()}))
    return result


def make_reference(
    spec: Spec,
    *,
    inputs: str | os.PathLike[str] | None = None,
    random_ticks: int = 20,
    seed: int = 0,
) -> Reference:
    """What :func:`verify` compares the graph with: the ``inputs`` file through
    leapp.Pipeline when given, else the recorded examples when the spec names them, else
    ``random_ticks`` ticks of :func:`random_inputs` (``seed``) through leapp.Pipeline.

    Raises:
        ReplayError, SpecError: see :func:`ticks`, :func:`load_inputs`, :func:`reference_ticks`.
    """
    if inputs is None and spec.pipeline.examples is not None:
        return Reference(RECORDED_EXAMPLES, tuple(ticks(spec)))
    replayable_plan(spec)
    if inputs is not None:
        what = f"the inputs in {inputs}"
        values = load_inputs(spec, inputs)
    else:
        what = f"random inputs (seed {seed})"
        values = random_inputs(spec, random_ticks, seed)
    return Reference(f"leapp.Pipeline on {what}", tuple(reference_ticks(spec, values, what)))


def replayable_plan(spec: Spec) -> PipelinePlan:
    """The plan of ``spec``, once every node is known to fire on its inputs and to have an
    artifact (else ReplayError)."""
    plan = make_plan(spec)
    timed = [node.name for node in plan.nodes if not any(i.triggers for i in node.inputs)]
    if timed:
        raise ReplayError(
            f"pipeline {spec.name!r} cannot be replayed: node(s) {timed} have only feedback or "
            "state inputs, so they run on a timer and their outputs do not follow the "
            "replayed samples; verify replays pipelines whose nodes all fire on their inputs"
        )
    missing = [m.name for m in spec.models if m.parameters.backend is None]
    if missing:
        raise ReplayError(
            f"pipeline {spec.name!r}: node(s) {missing} have no artifact (backend null), so "
            "they cannot run as ROS nodes; export them with a backend"
        )
    return plan


def _external_ports(
    spec: Spec, plan: PipelinePlan
) -> list[tuple[str, tuple[torch.dtype, tuple[int, ...]]]]:
    """``("node/port", (dtype, shape))`` of every external input, in spec order."""
    from leapp.run.model import port_check

    external = {(node.name, port.port) for node in plan.nodes for port in node.inputs
                if port.kind == "external"}  # fmt: skip
    ports = []
    for model in spec.models:
        for port in model.inputs:
            if (model.name, port.name) in external:
                key, dtype, shape = port_check(
                    f"{spec.name} input", port, f"{model.name}/{port.name}"
                )
                ports.append((key, (dtype, shape)))
    return ports


def _random(
    dtype: torch.dtype, shape: tuple[int, ...], generator: torch.Generator
) -> torch.Tensor:
    if dtype.is_complex:
        return torch.randn(shape, generator=generator, dtype=torch.complex128).to(dtype)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    return torch.randint(*_INT_RANGE, shape, generator=generator).to(dtype)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
