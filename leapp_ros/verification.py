"""Prove that the live ROS 2 graph reproduces the traced values: ``leapp-ros verify``.

::

    leapp-ros verify exports/torch_pipeline              # one process per node
    leapp-ros verify ros2_ws/src/torch_pipeline_ros --composed --rtol 1e-4 --timeout 20

:func:`verify` takes an export folder (or its YAML), a package written by ``leapp-ros
generate`` (its ``export/`` folder), or an install prefix holding one
(``share/<package>/export``), and:

1. loads the spec and verifies every artifact's sha256 *before starting anything*: a damaged
   model file is a :class:`~leapp.errors.SpecError` naming the file (exit code 2);
2. checks the export can be replayed: every node fires on its inputs (a node with only
   feedback or state inputs runs on a timer, which cannot be replayed sample by sample), has
   an artifact, and ran as often as the others while tracing (else :class:`ReplayError`,
   exit code 2);
3. starts the graph with :class:`~leapp_ros.testing.GraphUnderTest` (isolated domain,
   localhost discovery, reliable test traffic) and replays the examples recorded while
   tracing (``<name>_examples.safetensors``): tick by tick from the first one, it publishes
   the external inputs and waits for every output topic, so recurrent state and feedback
   evolve exactly as they did while tracing;
4. compares every published tensor with its recorded value as ``compile_graph`` validates
   artifacts: ``|published - recorded| <= atol + rtol * |recorded|`` for floating values
   (defaults rtol 1e-3, atol 1e-5), exact equality for integers and bools.

The report (:meth:`VerifyReport.format`) is a table, one row per output topic::

    leapp-ros verify swap: 3 of 3 samples replayed on /swap (one process per node), rtol
    0.001, atol 1e-05
      topic           samples  largest difference  result
      /swap/first/y   3/3      2.98                FAIL
      /swap/second/z  3/3      0                   pass
    verify FAILED: 1 of 2 topics failed
      /swap/first/y: sample 0: 4 of 4 values beyond tolerance (largest difference 2.98); 2
      more sample(s) differ

(the heading and the detail lines are one line each). When every topic passes, the last line
is ``verify passed: every published tensor matches the recorded examples``. A timeout or a node
that dies stops the replay; the verdict then says after how many samples and why.

``leapp-ros verify`` exits with 0 when every topic passes, 1 on any mismatch, timeout or node
failure, and 2 when the export is invalid or cannot be replayed.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from leapp.errors import LeappError
from leapp.spec import Spec
from leapp_ros.plan import make_plan

__all__ = ["ReplayError", "Tick", "TopicCheck", "VerifyReport", "find_export", "ticks", "verify"]

logger = logging.getLogger(__name__)


class ReplayError(LeappError):
    """The export cannot be replayed through ROS: a timer-fired node, a node without artifact,
    no examples, or examples that are not whole ticks."""


@dataclass(frozen=True)
class Tick:
    """One recorded tick: the external inputs (``"node/port"``) and every recorded output."""

    inputs: dict[str, torch.Tensor]
    outputs: dict[str, torch.Tensor]


@dataclass(frozen=True)
class TopicCheck:
    """The comparison of one output topic with its recorded values.

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
    """The outcome of :func:`verify`; ``stopped`` says why the replay ended early, if it did."""

    name: str
    namespace: str
    composed: bool
    samples: int
    replayed: int
    topics: tuple[TopicCheck, ...]
    rtol: float
    atol: float
    stopped: str | None = None

    @property
    def ok(self) -> bool:
        """Every sample replayed and every topic matched."""
        return self.stopped is None and all(check.ok for check in self.topics)

    @property
    def failures(self) -> tuple[TopicCheck, ...]:
        return tuple(check for check in self.topics if not check.ok)

    def format(self) -> str:
        """The report as text: a heading, one table row per topic, and the verdict."""
        mode = "one process for every node" if self.composed else "one process per node"
        lines = [
            f"leapp-ros verify {self.name}: {self.replayed} of {self.samples} samples replayed "
            f"on {self.namespace} ({mode}), rtol {self.rtol:g}, atol {self.atol:g}"
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
            lines.append("verify passed: every published tensor matches the recorded examples")
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


def ticks(spec: Spec) -> list[Tick]:
    """The recorded ticks of ``spec``, in tracing order, ready to replay.

    Raises:
        ReplayError: a node runs on a timer or has no artifact, the spec names no examples
            file, or the nodes ran different numbers of times while tracing.
        SpecError: the examples file is missing or unreadable.
    """
    from leapp.spec.examples import load_examples

    plan = make_plan(spec)
    timed = [node.name for node in plan.nodes if not any(i.triggers for i in node.inputs)]
    if timed:
        raise ReplayError(
            f"pipeline {spec.name!r} cannot be replayed: node(s) {timed} have only feedback or "
            "state inputs, so they run on a timer and their outputs do not follow the "
            "recorded samples; verify replays pipelines whose nodes all fire on their inputs"
        )
    missing = [m.name for m in spec.models if m.parameters.backend is None]
    if missing:
        raise ReplayError(
            f"pipeline {spec.name!r}: node(s) {missing} have no artifact (backend null), so "
            "they cannot run as ROS nodes; export them with a backend"
        )
    if spec.pipeline.examples is None:
        raise ReplayError(
            f"spec {spec.path} names no examples file (pipeline.examples), so there is "
            "nothing to replay; export the pipeline with leapp to record examples"
        )
    samples = load_examples(spec.directory / spec.pipeline.examples)
    counts = {model.name: len(samples.get(model.name, [])) for model in spec.models}
    if len(set(counts.values())) != 1 or not min(counts.values()):
        raise ReplayError(
            f"pipeline {spec.name!r}: the nodes ran different numbers of times while tracing "
            f"({counts}), so the examples are not whole ticks and cannot be replayed"
        )
    external = [
        (node.name, port.port) for node in plan.nodes for port in node.inputs
        if port.kind == "external"
    ]  # fmt: skip
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


def verify(
    path: str | os.PathLike[str],
    *,
    rtol: float = 1e-3,
    atol: float = 1e-5,
    composed: bool = False,
    timeout_s: float = 10.0,
    startup_timeout_s: float = 60.0,
) -> VerifyReport:
    """Replay the recorded examples of an export through its live ROS 2 graph (see the module
    documentation).

    Args:
        path: export folder or YAML, generated package, or install prefix.
        rtol, atol: tolerances for floating outputs.
        composed: run every node in one process instead of one process per node.
        timeout_s: how long to wait for the outputs of each sample.
        startup_timeout_s: how long to wait for the graph to be ready.

    Returns:
        The :class:`VerifyReport`; a mismatch, a timeout or a node failure makes it not ok.

    Raises:
        SpecError: the export is missing, invalid, or an artifact fails its checksum.
        ReplayError: the export cannot be replayed (see :func:`ticks`).
    """
    from leapp import spec as spec_file
    from leapp_ros.testing import GraphAssertionError, GraphUnderTest

    spec = spec_file.load(find_export(path), verify_checksums=True)
    recorded = ticks(spec)
    graph = GraphUnderTest(
        spec.path, composed=composed, timeout_s=startup_timeout_s, step_timeout_s=timeout_s
    )
    results: dict[str, list[tuple[float, str | None]]] = {key: [] for key in recorded[0].outputs}
    replayed, stopped = 0, None
    try:
        graph.start()
        for index, tick in enumerate(recorded):
            published = graph.step(tick.inputs, outputs=list(tick.outputs))
            for key, expected in tick.outputs.items():
                results[key].append(_compare(published[key], expected, rtol, atol, index))
            replayed += 1
        graph.close()
    except GraphAssertionError as e:  # a timeout, a node that died or did not stop cleanly
        stopped = str(e)
        graph.close(check=False)
    topics = {f"{n.name}/{o.port}": graph.plan.resolve(o.topic) for n in graph.plan.nodes
              for o in n.outputs}  # fmt: skip
    checks = tuple(
        _check(topics[key], key, outcomes, len(recorded)) for key, outcomes in results.items()
    )
    report = VerifyReport(
        spec.name, graph.plan.namespace, composed, len(recorded), replayed, checks, rtol, atol,
        stopped,
    )  # fmt: skip
    logger.debug("%s", report.format())
    return report


def _compare(
    published: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float, index: int
) -> tuple[float, str | None]:
    from leapp.run.validation import compare

    difference, detail = compare(published, expected, rtol=rtol, atol=atol)
    if detail is None:
        return difference, None
    return difference, f"sample {index}: {detail} (largest difference {difference:.3g})"


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
