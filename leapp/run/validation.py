"""Validation: prove that every exported artifact reproduces the traced values.

:func:`validate_export` loads each node's artifact with :func:`leapp.run.model.load_model`, feeds
it every input captured while tracing (``<name>_examples.safetensors``) and compares each output
with the value eager PyTorch produced then::

    from leapp import spec
    from leapp.run.validation import validate_export

    report = validate_export(spec.load("exports/torch_pipeline"), rtol=1e-3, atol=1e-5)
    report.raise_for_failures()   # ValidationError naming node, output, sample, difference

Floating outputs must satisfy ``|artifact - traced| <= atol + rtol * |traced|`` (NaN where
the traced value is NaN, and an infinity where the same infinity was traced, count as equal);
integer and bool outputs must match exactly; shapes and dtypes must match exactly.

Artifacts are loaded and warmed up on the first traced sample. A smoke run on zeros of the
input shapes follows: an artifact that raises there (zeros are no valid input for a Cholesky
factorization) is only warned about; one whose output shapes differ there from the spec's has
shapes that depend on the input values, and fails validation.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import torch

from leapp.errors import PipelineError, ValidationError
from leapp.spec import ModelSpec, Spec

__all__ = ["Mismatch", "ValidationReport", "validate_export"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Mismatch:
    """One output of one sample that the artifact did not reproduce.

    ``max_abs_diff`` is the largest absolute difference (``inf`` when shape or dtype differ);
    ``detail`` says what differed in words.
    """

    node: str
    output: str
    sample: int
    max_abs_diff: float
    detail: str

    def __str__(self) -> str:
        return (
            f"node {self.node!r}, output {self.output!r}, sample {self.sample}: {self.detail} "
            f"(largest difference {self.max_abs_diff:.3g})"
        )


@dataclass(frozen=True)
class ValidationReport:
    """The outcome of :func:`validate_export`.

    ``checked`` lists the validated nodes, ``skipped`` the nodes without artifact or without
    captured samples, ``samples`` the number of node runs compared, ``failures`` every
    :class:`Mismatch`; ``max_abs_diff`` maps ``"node/output"`` to the largest difference seen.
    """

    checked: tuple[str, ...]
    skipped: tuple[str, ...]
    samples: int
    failures: tuple[Mismatch, ...]
    max_abs_diff: dict[str, float]
    rtol: float
    atol: float

    @property
    def ok(self) -> bool:
        """True when every output of every sample matched."""
        return not self.failures

    def raise_for_failures(self) -> None:
        """Raise :class:`ValidationError` describing the failures, if there are any."""
        if not self.failures:
            return
        worst = max(self.failures, key=lambda failure: failure.max_abs_diff)
        lines = "\n".join(f"  {failure}" for failure in self.failures[:10])
        more = len(self.failures) - 10
        raise ValidationError(
            f"{len(self.failures)} exported output values differ from the traced ones beyond "
            f"rtol={self.rtol:g}, atol={self.atol:g}; worst: {worst}\n{lines}"
            + (f"\n  ... and {more} more" if more > 0 else "")
            + "\nCheck the node's graph (leapp.format_graph) or export it with another backend"
        )


def validate_export(spec: Spec, *, rtol: float = 1e-3, atol: float = 1e-5) -> ValidationReport:
    """Re-run every artifact of ``spec`` on every captured sample and compare the outputs.

    Args:
        spec: a spec with a ``path`` (from :func:`leapp.spec.load` or :func:`leapp.spec.dump`)
            whose ``pipeline.examples`` names the examples file.
        rtol: relative tolerance for floating outputs.
        atol: absolute tolerance for floating outputs.

    Returns:
        A :class:`ValidationReport`; nodes with backend null are skipped (and logged).

    Raises:
        ValidationError: the spec names no examples file, or a sample lacks an input.
        SpecError: the examples file is missing or unreadable.
        PipelineError: an artifact cannot be loaded.
    """
    from leapp.run.model import load_model
    from leapp.spec.examples import load_examples

    if spec.pipeline.examples is None:
        raise ValidationError(
            f"spec {spec.name!r} records no examples file (pipeline.examples), so there is "
            "nothing to compare against; export the pipeline with leapp to capture examples"
        )
    samples = load_examples(spec.directory / spec.pipeline.examples)
    checked, skipped, failures = [], [], []
    largest: dict[str, float] = {}
    runs = 0
    for model in spec.models:
        node_samples = samples.get(model.name, [])
        if model.parameters.backend is None or not node_samples:
            reason = "has no artifact" if model.parameters.backend is None else "has no samples"
            logger.info("validation: node %s %s, skipped", model.name, reason)
            skipped.append(model.name)
            continue
        loaded = load_model(
            spec, model.name, warm_up_inputs=_sample_inputs(model, node_samples[0].inputs, 0)
        )
        _smoke_on_zeros(loaded)
        for index, sample in enumerate(node_samples):
            inputs = _sample_inputs(model, sample.inputs, index)
            try:
                results = loaded.run(inputs)
            except PipelineError as e:
                raise ValidationError(f"sample {index} of node {model.name!r}: {e}") from e
            for port, actual in zip(model.outputs, results, strict=True):
                expected = sample.outputs.get(port.name)
                if expected is None:
                    continue
                difference, detail = compare(actual, expected, rtol=rtol, atol=atol)
                key = f"{model.name}/{port.name}"
                largest[key] = max(largest.get(key, 0.0), difference)
                if detail is not None:
                    failures.append(Mismatch(model.name, port.name, index, difference, detail))
        runs += len(node_samples)
        checked.append(model.name)
        logger.info(
            "validation: node %s, %d samples, largest difference %.3g",
            model.name,
            len(node_samples),
            max((v for k, v in largest.items() if k.startswith(f"{model.name}/")), default=0.0),
        )
    return ValidationReport(
        tuple(checked), tuple(skipped), runs, tuple(failures), largest, rtol, atol
    )


def _smoke_on_zeros(loaded) -> None:
    """Run the artifact once on zeros of its input shapes. Zeros are not always valid inputs (a
    singular matrix for a Cholesky factorization), so an exception is only a warning; outputs of
    another shape than the spec's prove that the shapes depend on the values, which no spec
    describes, and fail validation."""
    from leapp.run.output_check import check_outputs

    zeros = [torch.zeros(port.shape, dtype=_dtype(port.dtype)) for port in loaded.inputs]
    try:
        results = loaded.run(zeros)
    except Exception as e:
        logger.warning(
            "validation: node %s raises on zeros of its input shapes (%s); it reproduced the "
            "traced values, so this is only a warning: make sure deployed inputs stay valid",
            loaded.name,
            " ".join(str(e).split())[:300],
        )
        return
    try:
        check_outputs(loaded, results, "zeros of its input shapes")
    except PipelineError as e:
        raise ValidationError(str(e)) from e


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name.removeprefix("torch."))


def compare(
    actual: torch.Tensor, expected: torch.Tensor, *, rtol: float, atol: float
) -> tuple[float, str | None]:
    """``(largest absolute difference, None)`` when ``actual`` matches, else a description."""
    if actual.dtype != expected.dtype:
        return math.inf, f"dtype {actual.dtype} but {expected.dtype} was traced"
    if actual.shape != expected.shape:
        return math.inf, f"shape {list(actual.shape)} but {list(expected.shape)} was traced"
    if actual.numel() == 0:
        return 0.0, None
    if not (actual.dtype.is_floating_point or actual.dtype.is_complex):
        different = actual != expected
        difference = (actual.to(torch.float64) - expected.to(torch.float64)).abs().max()
        if different.any():
            return float(difference), f"{int(different.sum())} of {actual.numel()} values differ"
        return 0.0, None
    wide = torch.complex128 if actual.dtype.is_complex else torch.float64
    both_nan = torch.isnan(actual) & torch.isnan(expected)
    same = both_nan | (actual == expected)  # equal infinities have a NaN difference
    gap = (actual.to(wide) - expected.to(wide)).abs()
    gap = torch.where(same, torch.zeros_like(gap), gap)
    allowed = atol + rtol * expected.to(wide).abs()
    # NaN on one side only gives a NaN gap; an infinity matches only the same infinity.
    infinite = torch.isinf(actual) | torch.isinf(expected)
    bad = (~(gap <= allowed) | infinite) & ~same
    difference = float(gap.max()) if not torch.isnan(gap).any() else math.inf
    if bad.any():
        return difference, f"{int(bad.sum())} of {actual.numel()} values beyond tolerance"
    return difference, None


def _sample_inputs(
    model: ModelSpec, values: dict[str, torch.Tensor], index: int
) -> list[torch.Tensor]:
    missing = [port.name for port in model.inputs if port.name not in values]
    if missing:
        raise ValidationError(
            f"sample {index} of node {model.name!r} has no value for inputs {missing}; the "
            "examples file does not belong to this spec; re-export the pipeline"
        )
    return [values[port.name] for port in model.inputs]
