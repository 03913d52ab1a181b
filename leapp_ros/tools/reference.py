"""The reference a live graph is compared with by ``leapp-ros verify`` and the generated
launch_testing test: ticks of external inputs and the outputs expected for them.

Two references exist for a tool that has the export but not the user's training code:

- the examples recorded while tracing: the outputs eager PyTorch (the user's own code)
  computed, on the inputs it was traced with. The only eager reference a tool has, but it sees
  no more than those inputs excite: an all-zero sample shows a linear layer's bias, never its
  weight matrix;
- :class:`leapp.Pipeline` running the export's artifacts in this process, on any inputs, state
  and feedback carried from tick to tick. It shares the artifacts with the graph, so it checks
  the graph (nodes, messages, runtimes, ordering, state) against the export, not the export
  against the training code (``compile_graph`` validated that on the recorded examples).

:func:`make_reference` picks, in this order: the user's inputs file (:func:`load_inputs`)
through leapp.Pipeline; the recorded examples (:func:`ticks`) followed by seeded random ticks
drawn within the range the examples show (:func:`random_inputs` with ``like``) through
leapp.Pipeline continuing from the examples' state; or, for an export without examples, seeded
random inputs of the external ports' shapes and dtypes (floats from a standard normal
distribution, integers in 0..4, bools) through leapp.Pipeline (:func:`reference_ticks`). An
export that cannot be replayed tick by tick, or an inputs file that does not fit it, is a
:class:`ReplayError`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
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
# A float element the examples show only one value of is drawn this far around it (the seed's
# all-zero sample: uniform in -1..1), else within the examples' smallest and largest values.
_FLAT_HALF_WIDTH = 1.0


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
    examples, random inputs and their seed, or an inputs file), ``ticks`` in order; the first
    ``recorded`` of them are recorded examples, the rest leapp.Pipeline's."""

    what: str
    ticks: tuple[Tick, ...]
    recorded: int = 0

    def sample(self, index: int) -> str:
        """Tick ``index`` as a report names it: ``sample 3 (random tick 2)``."""
        if index < self.recorded:
            return f"sample {index} (recorded example {index})"
        if self.recorded:
            return f"sample {index} (random tick {index - self.recorded})"
        return f"sample {index}"


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


def random_inputs(
    spec: Spec,
    count: int = 20,
    seed: int = 0,
    like: Sequence[Mapping[str, torch.Tensor]] = (),
) -> list[dict[str, torch.Tensor]]:
    """``count`` ticks of random values for every external input of ``spec`` (``"node/port"``),
    of the port's shape and dtype; the same ``seed`` gives the same values.

    Without ``like``: floats (and complex values) from a standard normal distribution,
    integers in 0..4, bools. With ``like`` (ticks of inputs, the recorded examples), each
    element is drawn within what those show: floats uniformly between the smallest and largest
    value seen (an element always seen at one value: within 1 of it), integers between theirs,
    bools as seen (both values once both were); complex values as without ``like``.

    Raises:
        ReplayError: ``count`` is below 1.
        PipelineError: a port's dtype is unknown.
    """
    if count < 1:
        raise ReplayError(f"random inputs for {count} ticks: give at least 1 tick")
    ports = _external_ports(spec, make_plan(spec))
    seen = {key: _seen([values.get(key) for values in like], dtype, shape)
            for key, (dtype, shape) in ports}  # fmt: skip
    generator = torch.Generator().manual_seed(seed)
    return [{key: _draw(dtype, shape, generator, seen[key]) for key, (dtype, shape) in ports}
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
    leapp.Pipeline when given; else, when the spec names examples, the recorded examples
    followed by ``random_ticks`` ticks of :func:`random_inputs` within their range (``seed``)
    through leapp.Pipeline, which first steps through the examples' inputs so that its state
    and feedback enter the random ticks as the graph's do (``random_ticks`` 0: the examples
    alone); else ``random_ticks`` ticks of :func:`random_inputs` through leapp.Pipeline.

    Raises:
        ReplayError, SpecError: see :func:`ticks`, :func:`load_inputs`, :func:`reference_ticks`.
    """
    if inputs is None and spec.pipeline.examples is not None:
        recorded = ticks(spec)
        if random_ticks == 0:
            return Reference(RECORDED_EXAMPLES, tuple(recorded), len(recorded))
        what = f"{random_ticks} random ticks within their range (seed {seed})"
        given = [tick.inputs for tick in recorded]
        draws = random_inputs(spec, random_ticks, seed, like=given)
        stepped = reference_ticks(spec, [*given, *draws], what)
        return Reference(
            f"{RECORDED_EXAMPLES} ({len(recorded)} tick(s), eager PyTorch while tracing), then "
            f"leapp.Pipeline on {what}",
            (*recorded, *stepped[len(recorded) :]),
            len(recorded),
        )
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


def _seen(
    values: Sequence[torch.Tensor | None], dtype: torch.dtype, shape: tuple[int, ...]
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The smallest and largest value of each element over ``values`` (float64; a float
    element never finite: None of it is used), or None: nothing seen, another dtype or shape,
    or a complex port."""
    if not values or dtype.is_complex:
        return None
    if any(v is None or v.dtype != dtype or tuple(v.shape) != shape for v in values):
        return None
    stacked = torch.stack([v.to(torch.float64) for v in values])
    finite = torch.isfinite(stacked)
    low = torch.where(finite, stacked, math.inf).amin(0)
    high = torch.where(finite, stacked, -math.inf).amax(0)
    return low, high


def _draw(
    dtype: torch.dtype,
    shape: tuple[int, ...],
    generator: torch.Generator,
    seen: tuple[torch.Tensor, torch.Tensor] | None,
) -> torch.Tensor:
    """One random value of a port: :func:`_random`, or within ``seen`` (see random_inputs)."""
    if seen is None:
        return _random(dtype, shape, generator)
    low, high = seen
    uniform = torch.rand(shape, generator=generator, dtype=torch.float64)
    if dtype is torch.bool:
        return torch.where(low == high, low, (uniform < 0.5).to(torch.float64)).bool()
    if not dtype.is_floating_point:
        steps = torch.floor(uniform * (high - low + 1)).clamp(max=high - low)
        return (low + steps).to(dtype)
    never = low > high  # no finite value seen: around 0
    low, high = torch.where(never, 0.0, low), torch.where(never, 0.0, high)
    flat = low == high
    low = torch.where(flat, low - _FLAT_HALF_WIDTH, low)
    high = torch.where(flat, high + _FLAT_HALF_WIDTH, high)
    return (low + uniform * (high - low)).to(dtype)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
