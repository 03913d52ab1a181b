"""A recorded bag replayed through a live graph, every published tensor compared tick by tick:
what :meth:`GraphUnderTest.replay <leapp_ros.testing.graph.GraphUnderTest.replay>` and
``leapp-ros verify --bag`` do.

The bag's input messages are grouped into ticks (:func:`leapp_ros.bag.bag_ticks.load_ticks`:
every external input topic has a new message; robot messages are sent as recorded, joints in
their recorded order) and sent tick by tick, each tick after the graph answered the one before
(``rate="asap"``), or no earlier than the bag's own timing (``"realtime"``). Each tick's
outputs are compared with

- ``against="pipeline"`` (default): :class:`leapp.Pipeline` run in this process on the same
  inputs, decoded from the same messages as the nodes decode them, from the initial state and
  feedback values on, so recurrent state evolves alike on both sides; or
- ``against="recorded"``: the outputs recorded in the bag (a regression test between two
  deployments); outputs the bag does not hold are not compared and listed.

A value matches as ``compile_graph`` validates artifacts: ``|published - expected| <= atol +
rtol * |expected|`` for floats, equality for integers and bools. :class:`ReplayReport` has per
topic the ticks compared, the largest difference and where it was (tick, time in the bag,
element), the first mismatch, and the largest difference of every tick (:meth:`ReplayReport.plot`
draws them).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from leapp_ros.bag.bag_file import BagError
from leapp_ros.bag.bag_ticks import BagTicks, load_ticks
from leapp_ros.plan.pipeline import PipelinePlan
from leapp_ros.run.deployment import Deployment
from leapp_ros.testing.failures import GraphAssertionError
from leapp_ros.testing.topics import driven_outputs

__all__ = [
    "AGAINST",
    "RATES",
    "ReplayReport",
    "ReplayTarget",
    "TopicReplay",
    "pipeline_reference",
    "replay",
]

RATES = ("asap", "realtime")
AGAINST = ("pipeline", "recorded")
_REFERENCES = {
    "pipeline": "leapp.Pipeline on the bag's inputs",
    "recorded": "the recorded outputs",
}


@dataclass(frozen=True)
class TopicReplay:
    """One output topic: ``compared`` of ``expected`` ticks, the ``largest`` difference
    and ``where`` it was, the first mismatch (``problem``), and ``(seconds, difference)`` of
    every tick compared (``deviations``)."""

    topic: str
    key: str
    compared: int
    expected: int
    largest: float
    where: str
    problem: str | None
    deviations: tuple[tuple[float, float], ...]

    @property
    def ok(self) -> bool:
        return self.problem is None and self.compared == self.expected


@dataclass(frozen=True)
class ReplayReport:
    """The outcome of :func:`replay`; ``stopped`` says why it ended early, if it did."""

    bag: Path
    namespace: str
    mode: str
    against: str
    ticks: int
    replayed: int
    topics: tuple[TopicReplay, ...]
    rtol: float
    atol: float
    superseded: int = 0
    left_over: tuple[str, ...] = ()
    unrecorded: tuple[str, ...] = ()
    stopped: str | None = None

    @property
    def ok(self) -> bool:
        return self.stopped is None and bool(self.topics) and all(t.ok for t in self.topics)

    @property
    def failed(self) -> tuple[TopicReplay, ...]:
        return tuple(topic for topic in self.topics if not topic.ok)

    def format(self) -> str:
        """The report as text: a heading, one row per topic, the verdict."""
        lines = [
            f"leapp-ros verify: {self.replayed} of {self.ticks} ticks of bag {self.bag} replayed "
            f"on {self.namespace} ({self.mode}) against {_REFERENCES[self.against]}, rtol "
            f"{self.rtol:g}, atol {self.atol:g}"
        ]
        if self.superseded:
            lines.append(f"  {self.superseded} input message(s) superseded by a newer one "
                         "before their tick was complete: not sent")  # fmt: skip
        if self.left_over:
            lines.append(f"  an incomplete last set on {', '.join(self.left_over)}: not sent")
        if self.unrecorded:
            lines.append(f"  not in the bag, not compared: {', '.join(self.unrecorded)}")
        rows = [("topic", "ticks", "largest difference", "where", "result")]
        rows += [(t.topic, f"{t.compared}/{t.expected}", f"{t.largest:.3g}", t.where,
                  "pass" if t.ok else "FAIL") for t in self.topics]  # fmt: skip
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                  for row in rows]  # fmt: skip
        if self.ok:
            lines.append("verify passed: every published tensor matches")
            return "\n".join(lines)
        verdict = f"verify FAILED: {len(self.failed)} of {len(self.topics)} topics failed"
        if self.stopped:
            verdict += f"; stopped after {self.replayed} of {self.ticks} ticks: {self.stopped}"
        lines.append(verdict)
        lines += [f"  {t.topic}: {t.problem or f'only {t.compared} of {t.expected} ticks'}"
                  for t in self.failed]  # fmt: skip
        return "\n".join(lines)

    def plot(self, path: str | os.PathLike[str]) -> Path:
        """Draw the largest difference per topic over the bag's time into the PNG ``path``
        (needs Pillow); the path."""
        from leapp_ros.bag.deviation_plot import write_deviation_plot

        verdict = "passed" if self.ok else "FAILED"
        return write_deviation_plot(
            path,
            {topic.topic: topic.deviations for topic in self.topics},
            title=f"{self.namespace} ({self.mode}) against {_REFERENCES[self.against]}: "
            f"{verdict}; dashed: atol {self.atol:g}",
            tolerance=self.atol,
        )


class ReplayTarget(Protocol):
    """What a replay drives: a started graph (:class:`~leapp_ros.testing.GraphUnderTest`)."""

    plan: PipelinePlan

    @property
    def deployment(self) -> Deployment: ...

    def spin(self, seconds: float) -> None: ...

    def send(
        self,
        messages: Mapping[str, Any],
        *,
        outputs: Iterable[str],
        timeout_s: float | None = None,
    ) -> dict[str, torch.Tensor]: ...


def pipeline_reference(plan_spec: os.PathLike[str] | str, ticks: BagTicks) -> list[dict]:
    """Every output of every node per tick, from :class:`leapp.Pipeline` run on the ticks'
    inputs from the initial state on.

    Raises:
        BagError: the pipeline fails on a tick's inputs (the message names the tick).
    """
    from leapp import spec as spec_module
    from leapp.run.pipeline import Pipeline

    pipeline = Pipeline(spec_module.load(plan_spec))
    outputs = []
    for tick in ticks.ticks:
        try:
            step = pipeline.step(dict(tick.inputs))
        except Exception as e:  # the user's models: say which tick of which bag
            raise BagError(
                f"leapp.Pipeline fails on tick {tick.index} of bag {ticks.bag} (at "
                f"{ticks.seconds(tick):.3f} s): {e}"
            ) from e
        outputs.append({key: value.clone() for key, value in step.items()})
    return outputs


def replay(
    graph: ReplayTarget,
    bag: str | os.PathLike[str] | BagTicks,
    *,
    remaps: Sequence[str] = (),
    rate: str = "asap",
    against: str = "pipeline",
    rtol: float = 1e-3,
    atol: float = 1e-5,
    timeout_s: float | None = None,
) -> ReplayReport:
    """Replay ``bag`` (a folder, or its :class:`BagTicks`) through the started ``graph`` and
    compare (see the module documentation).

    Raises:
        BagError: the bag does not fit the graph (before anything is sent), ``rate`` or
            ``against`` is unknown, leapp.Pipeline fails on the bag's inputs.
    """
    if rate not in RATES or against not in AGAINST:
        raise BagError(f"rate {rate!r} / against {against!r}: choose rate among {RATES} and "
                       f"against among {AGAINST}")  # fmt: skip
    plan = graph.plan
    ticks = bag if isinstance(bag, BagTicks) else load_ticks(
        plan, bag, remaps, recorded=against == "recorded"
    )  # fmt: skip
    if against == "pipeline":
        reference = pipeline_reference(plan.spec_path, ticks)
        expected = {key: tuple(step[key] for step in reference) for key in reference[0]}
    else:
        expected = dict(ticks.recorded)
    awaited = driven_outputs(plan, list(ticks.ticks[0].inputs))
    compared = [key for key in awaited if key in expected]
    outcomes: dict[str, list[tuple[int, float, str, str | None]]] = {k: [] for k in compared}
    replayed, stopped = 0, None
    started, first = time.monotonic(), ticks.ticks[0].time_ns
    try:
        for tick in ticks.ticks:
            if rate == "realtime":
                graph.spin(max(0.0, started + (tick.time_ns - first) / 1e9 - time.monotonic()))
            published = graph.send(tick.messages, outputs=awaited, timeout_s=timeout_s)
            for key in compared:
                value = expected[key][tick.index]
                if value is not None:
                    outcomes[key].append(
                        (tick.index, *_compare(published[key], value, rtol, atol))
                    )
            replayed += 1
    except GraphAssertionError as e:  # a timeout, a node that died
        stopped = str(e)
    # an output's topic is "<node>/<output>" under the namespace
    topics = tuple(_topic(plan.resolve(key), key, outcomes[key], expected[key], ticks)
                   for key in compared)  # fmt: skip
    mode = graph.deployment.description
    return ReplayReport(ticks.bag, plan.namespace, mode, against, len(ticks.ticks), replayed,
                        topics, rtol, atol, ticks.superseded, ticks.left_over,
                        tuple(k for k in ticks.unrecorded if k in awaited), stopped)  # fmt: skip


def _compare(
    published: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float
) -> tuple[float, str, str | None]:
    """(largest difference, the element where it is, a problem or None)."""
    from leapp.run.validation import compare

    difference, problem = compare(published, expected, rtol=rtol, atol=atol)
    element = ""
    if published.shape == expected.shape and published.numel() and math.isfinite(difference):
        gap = (published.to(torch.float64) - expected.to(torch.float64)).abs()
        flat = int(torch.nan_to_num(gap, nan=math.inf).reshape(-1).argmax())
        index = [int(i) for i in torch.unravel_index(torch.tensor(flat), published.shape)]
        element = f", element {index}"
    return difference, element, problem


def _topic(
    topic: str,
    key: str,
    outcomes: list[tuple[int, float, str, str | None]],
    expected: Sequence[torch.Tensor | None],
    ticks: BagTicks,
) -> TopicReplay:
    wanted = sum(value is not None for value in expected)
    worst = max(outcomes, key=lambda outcome: outcome[1], default=None)
    where = "-"
    if worst is not None and worst[1] > 0:
        tick = ticks.ticks[worst[0]]
        where = f"tick {tick.index} ({ticks.seconds(tick):.3f} s){worst[2]}"
    problems = [(index, problem) for index, _, _, problem in outcomes if problem is not None]
    problem = None
    if problems:
        index, text = problems[0]
        problem = f"tick {index} ({ticks.seconds(ticks.ticks[index]):.3f} s): {text}"
        if len(problems) > 1:
            problem += f"; {len(problems) - 1} more tick(s) differ"
    deviations = tuple((ticks.seconds(ticks.ticks[i]), d) for i, d, _, _ in outcomes)
    largest = worst[1] if worst is not None else 0.0
    return TopicReplay(topic, key, len(outcomes), wanted, largest, where, problem, deviations)
