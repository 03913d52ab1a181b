"""Prove that the live ROS 2 graph computes what the export computes: ``leapp-ros verify``.

::

    leapp-ros verify exports/torch_pipeline              # one process per node
    leapp-ros verify ros2_ws/src/torch_pipeline_ros --deployment composed --rtol 1e-4 --timeout 20
    leapp-ros verify exports/nvidia_policy --ticks 50 --seed 3   # an export without examples
    leapp-ros verify exports/torch_pipeline --inputs recorded_on_robot.safetensors

:func:`verify` takes an export folder (or its YAML), a package written by ``leapp-ros
generate`` (its ``export/`` folder), or an install prefix holding one
(``share/<package>/export``), and:

1. loads the spec and verifies every artifact's sha256 *before starting anything*: a damaged
   model file is a :class:`~leapp.errors.SpecError` naming the file (exit code 2);
2. checks the export can be replayed: every node fires on its inputs (a node with only
   feedback or state inputs runs on a timer, which cannot be replayed sample by sample) and
   has an artifact (else :class:`~leapp_ros.tools.reference.ReplayError`, exit code 2);
3. makes the reference, ticks of external inputs and expected outputs
   (:func:`leapp_ros.tools.reference.make_reference`):

   - with ``inputs`` (``--inputs FILE.safetensors``): the user's inputs, one tensor per
     external input keyed ``"<node>/<port>"`` with a leading ticks axis, run through
     :class:`leapp.Pipeline` in this process;
   - else, when the spec names them (``<name>_examples.safetensors``), the examples recorded
     while tracing: the outputs eager PyTorch computed (the nodes must have run equally often
     while tracing), then ``random_ticks`` ticks of seeded random inputs drawn within the
     range the examples show (an element they show at one value only: within 1 of it), run
     through leapp.Pipeline, which steps through the examples' inputs first so that state and
     feedback enter the random ticks as the graph's do. The examples tie the graph to the
     training code, but only as far as their inputs reach (one all-zero sample shows a
     layer's bias, not its weights); the random ticks tie every topic to the export on inputs
     that reach every weight;
   - else (an export without examples, such as every export of NVIDIA's leapp 0.7.2)
     ``random_ticks`` ticks of seeded random inputs of the ports' shapes and dtypes
     (:func:`~leapp_ros.tools.reference.random_inputs`: floats from a standard normal
     distribution, integers in 0..4, bools), run through :class:`leapp.Pipeline`;

4. starts the graph with :class:`~leapp_ros.testing.GraphUnderTest` (isolated domain,
   localhost discovery, the nodes' deployed QoS with every hop matched both ways before the
   first tick) and, tick by tick from the first one, publishes the external inputs, once
   each (as the robot message a port is bound to, where it is), and waits for
   every output topic, so recurrent state and feedback evolve exactly as in the reference
   (leapp.Pipeline carries its feedback values from tick to tick the same way);
5. compares every published tensor with its reference value as ``compile_graph`` validates
   artifacts: ``|published - expected| <= atol + rtol * |expected|`` for floating values
   (defaults rtol 1e-3, atol 1e-5), exact equality for integers and bools.

The report (:meth:`VerifyReport.format`) is a table, one row per output topic; here the graph
of the seed runs a policy whose weight matrix differs (its bias does not, so the all-zero
recorded example passes)::

    leapp-ros verify torch_pipeline: 21 of 21 samples replayed on /torch_pipeline (one
    process per node) against the recorded examples (1 tick(s), eager PyTorch while tracing),
    then leapp.Pipeline on 20 random ticks within their range (seed 0), rtol 0.001, atol 1e-05
      topic                           samples  largest difference  result
      /torch_pipeline/preprocess/obs  21/21    0                   pass
      /torch_pipeline/policy/action   21/21    0.856               FAIL
    verify FAILED: 1 of 2 topics failed
      /torch_pipeline/policy/action: sample 1 (random tick 0): 6 of 6 values beyond tolerance
      (largest difference 0.54); 19 more sample(s) differ

(the heading and the detail lines are one line each; the reference reads "the recorded
examples" with ``random_ticks`` 0, "leapp.Pipeline on random inputs (seed 0)" or "leapp.Pipeline
on the inputs in FILE" on the other paths). When every topic passes, the last line is ``verify
passed: every published tensor matches`` and the reference. A timeout or a node that dies
stops the replay; the verdict then says after how many samples and why.

``leapp-ros verify`` exits with 0 when every topic passes, 1 on any mismatch, timeout or node
failure, and 2 when the export is invalid or cannot be replayed, or the inputs file does not
fit it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from leapp.spec import Spec
from leapp_ros.plan.pipeline import PipelinePlan
from leapp_ros.run.deployment import Deployment
from leapp_ros.tools.reference import RECORDED_EXAMPLES, Reference, ReplayError, make_reference

__all__ = ["TopicCheck", "VerifyReport", "find_export", "verify"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicCheck:
    """The comparison of one output topic with its reference values.

    ``compared`` of ``recorded`` samples arrived; ``max_abs_diff`` is the largest absolute
    difference seen (``inf`` for a dtype or shape mismatch); ``problem`` describes the first
    mismatching sample, or None.
    """

    topic: str
    port: str
    compared: int
    recorded: int
    max_abs_diff: float
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None and self.compared == self.recorded


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of :func:`verify`; ``stopped`` says why the replay ended early, if it did;
    ``reference`` names what the published tensors were compared with."""

    name: str
    namespace: str
    deployment: Deployment
    samples: int
    replayed: int
    topics: tuple[TopicCheck, ...]
    rtol: float
    atol: float
    stopped: str | None = None
    reference: str = RECORDED_EXAMPLES

    @property
    def ok(self) -> bool:
        """Every sample replayed and every topic matched."""
        return self.stopped is None and all(check.ok for check in self.topics)

    @property
    def failures(self) -> tuple[TopicCheck, ...]:
        return tuple(check for check in self.topics if not check.ok)

    def format(self) -> str:
        """The report as text: a heading, one table row per topic, and the verdict."""
        lines = [
            f"leapp-ros verify {self.name}: {self.replayed} of {self.samples} samples replayed "
            f"on {self.namespace} ({self.deployment.description}) against {self.reference}, "
            f"rtol {self.rtol:g}, atol {self.atol:g}"
        ]
        rows = [("topic", "samples", "largest difference", "result")]
        rows += [
            (
                check.topic,
                f"{check.compared}/{check.recorded}",
                f"{check.max_abs_diff:.3g}" if check.compared else "-",
                "pass" if check.ok else "FAIL",
            )
            for check in self.topics
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        for row in rows:
            cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
            lines.append(("  " + "  ".join(cells)).rstrip())
        if self.ok:
            lines.append(f"verify passed: every published tensor matches {self.reference}")
            return "\n".join(lines)
        failed = self.failures
        verdict = f"verify FAILED: {len(failed)} of {len(self.topics)} topics failed"
        if self.stopped is not None:
            verdict += f"; after {self.replayed} of {self.samples} samples: {self.stopped}"
        lines.append(verdict)
        lines += [f"  {check.topic}: {check.problem}" for check in failed if check.problem]
        return "\n".join(lines)


def find_export(path: str | os.PathLike[str]) -> Path:
    """The export inside ``path``: ``path`` itself when it is a YAML file or holds the spec,
    else the ``export/`` folder of a generated package or ``share/<package>/export`` of an
    install prefix. Otherwise ``path`` (so that loading it explains what is missing).

    Raises:
        ReplayError: ``path`` holds several exports.
    """
    path = Path(path)
    if not path.is_dir() or _holds_spec(path):
        return path
    candidates = [path / "export", *sorted(path.glob("share/*/export"))]
    candidates += sorted(path.glob("*/share/*/export"))
    found = [folder for folder in candidates if folder.is_dir() and _holds_spec(folder)]
    if len(found) > 1:
        raise ReplayError(
            f"{path} holds several exports ({', '.join(map(str, found))}); pass one of them"
        )
    return found[0] if found else path


def _holds_spec(folder: Path) -> bool:
    return (folder / f"{folder.name}.yaml").is_file() or len(list(folder.glob("*.yaml"))) == 1


def verify(
    path: str | os.PathLike[str],
    *,
    rtol: float = 1e-3,
    atol: float = 1e-5,
    deployment: Deployment | str = Deployment.PROCESSES,
    timeout_s: float = 10.0,
    startup_timeout_s: float = 60.0,
    inputs: str | os.PathLike[str] | None = None,
    random_ticks: int = 20,
    seed: int = 0,
) -> VerifyReport:
    """Drive the live ROS 2 graph of an export tick by tick and compare every published
    tensor with the reference (see the module documentation).

    Args:
        path: export folder or YAML, generated package, or install prefix.
        rtol, atol: tolerances for floating outputs.
        deployment: one process per node (default), composed or fused
            (:class:`~leapp_ros.run.deployment.Deployment`, or its name).
        timeout_s: how long to wait for the outputs of each sample.
        startup_timeout_s: how long to wait for the graph to be ready.
        inputs: a safetensors file of external inputs to run instead of the recorded
            examples (see :func:`load_inputs`).
        random_ticks, seed: how many ticks of random inputs, and their seed: after the
            recorded examples (0: the examples alone), or alone for an export without them.

    Returns:
        The :class:`VerifyReport`; a mismatch, a timeout or a node failure makes it not ok.

    Raises:
        SpecError: the export is missing, invalid, or an artifact fails its checksum.
        ReplayError: the export cannot be replayed, or the inputs do not fit it (see
            :func:`make_reference`).
    """
    from leapp import spec as spec_file

    deployment = Deployment.parse(deployment)
    spec = spec_file.load(find_export(path), verify_checksums=True)
    reference = make_reference(spec, inputs=inputs, random_ticks=random_ticks, seed=seed)
    run = _run_graph(
        spec, reference, deployment=deployment, timeout_s=timeout_s,
        startup_timeout_s=startup_timeout_s, rtol=rtol, atol=atol,
    )  # fmt: skip
    topics = {f"{n.name}/{o.port}": run.plan.resolve(o.topic) for n in run.plan.nodes
              for o in n.outputs}  # fmt: skip
    samples = len(reference.ticks)
    checks = tuple(
        _check(topics[key], key, outcomes, samples) for key, outcomes in run.results.items()
    )
    report = VerifyReport(
        spec.name, run.plan.namespace, deployment, samples, run.replayed, checks, rtol, atol,
        run.stopped, reference.what,
    )  # fmt: skip
    logger.debug("%s", report.format())
    return report


@dataclass(frozen=True)
class _Run:
    """What :func:`_run_graph` saw: per ``"node/port"`` output the (difference, problem) of
    each tick, how many ticks were replayed, and why it stopped early (or None)."""

    plan: PipelinePlan
    results: dict[str, list[tuple[float, str | None]]]
    replayed: int
    stopped: str | None


def _run_graph(
    spec: Spec,
    reference: Reference,
    *,
    deployment: Deployment,
    timeout_s: float,
    startup_timeout_s: float,
    rtol: float,
    atol: float,
) -> _Run:
    """Start the graph of ``spec``, step it through the ticks of ``reference`` in order,
    compare, stop it. The one place that starts a graph: a further way to run it goes here."""
    from leapp_ros.testing import GraphAssertionError, GraphUnderTest

    graph = GraphUnderTest(
        spec.path, deployment, timeout_s=startup_timeout_s, step_timeout_s=timeout_s
    )
    expected = reference.ticks
    results: dict[str, list[tuple[float, str | None]]] = {key: [] for key in expected[0].outputs}
    replayed, stopped = 0, None
    try:
        graph.start()
        for index, tick in enumerate(expected):
            published = graph.step(tick.inputs, outputs=list(tick.outputs))
            sample = reference.sample(index)
            for key, value in tick.outputs.items():
                results[key].append(_compare(published[key], value, rtol, atol, sample))
            replayed += 1
        graph.close()
    except GraphAssertionError as e:  # a timeout, a node that died or did not stop cleanly
        stopped = str(e)
        graph.close(check=False)
    return _Run(graph.plan, results, replayed, stopped)


def _compare(
    published: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float, sample: str
) -> tuple[float, str | None]:
    from leapp.run.validation import compare

    difference, detail = compare(published, expected, rtol=rtol, atol=atol)
    if detail is None:
        return difference, None
    return difference, f"{sample}: {detail} (largest difference {difference:.3g})"


def _check(
    topic: str, key: str, outcomes: list[tuple[float, str | None]], recorded: int
) -> TopicCheck:
    problems = [problem for _, problem in outcomes if problem is not None]
    largest = max((difference for difference, _ in outcomes), default=0.0)
    problem = problems[0] if problems else None
    if problem is None and len(outcomes) < recorded:
        problem = f"only {len(outcomes)} of {recorded} samples arrived"
    if problems and len(problems) > 1:
        problem += f"; {len(problems) - 1} more sample(s) differ"
    return TopicCheck(topic, key, len(outcomes), recorded, largest, problem)
