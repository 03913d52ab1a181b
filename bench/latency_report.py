"""What bench/ros_latency.py measures, by name, its verdicts, and how it prints them.

Each of leapp's modes is judged against the typed hand-written rclpy graph of its shape
(:data:`HAND_WRITTEN_OF`), from the figures of one run, by ratios only (the same graph's
absolute figures move 2x between runs on a shared machine):

- latency: median <= :data:`LATENCY_LIMITS` x the hand-written graph's median;
- CPU per answer (at :data:`CPU_RATE_HZ`) <= :data:`CPU_LIMIT` x the hand-written graph's;
- sustained rate >= the hand-written graph's, in the same run.

:func:`judge` makes those three :class:`Verdict` s; :func:`report` prints every figure, the
verdicts, and beside them the same ratios against the raw CDR variant of the hand-written graph
(:data:`RAW_OF`; information, no verdict).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from graph_client import RATES_HZ

CPU_RATE_HZ = 500.0  # the rate at which CPU time per answer is measured
COMPOSED, PROCESSES = "composed", "one process per node"
FUSED, FUSED_PROCESS = "fused, composed", "fused, own process"
MODES = (COMPOSED, PROCESSES, FUSED, FUSED_PROCESS)
HAND_CHAIN = "hand-written chain, composed"
HAND_CHAIN_PROCESSES = "hand-written chain, one process per node"
HAND_SINGLE = "hand-written single node, composed"
HAND_SINGLE_PROCESS = "hand-written single node, own process"
RAW = ", raw CDR"  # the raw variant's label: the typed one's and this
HAND_WRITTEN_OF = {  # mode: the typed hand-written graph of its shape
    COMPOSED: HAND_CHAIN,
    PROCESSES: HAND_CHAIN_PROCESSES,
    FUSED: HAND_SINGLE,
    FUSED_PROCESS: HAND_SINGLE_PROCESS,
}
RAW_OF = {mode: typed + RAW for mode, typed in HAND_WRITTEN_OF.items()}
REFERENCES = tuple(label for typed in HAND_WRITTEN_OF.values() for label in (typed, typed + RAW))
LATENCY_LIMITS = {COMPOSED: 0.7, PROCESSES: 0.85, FUSED: 0.7, FUSED_PROCESS: 0.7}
CPU_LIMIT = 0.75
CHECK_TOLERANCE = 1e-5  # a hand-written graph's action against leapp.Pipeline's
DEFAULTS = "system defaults"


@dataclass(frozen=True)
class Verdict:
    """One rule for one mode: ``figures`` in words; ``passed`` is None when the graph's
    figures are not valid (it answered an input pair more than once)."""

    rule: str
    figures: str
    passed: bool | None

    @property
    def word(self) -> str:
        return {True: "PASS", False: "FAIL", None: "INVALID"}[self.passed]


def invalid(result: dict) -> bool:
    """Whether ``result``'s graph answered an input pair more than once (the ping-pong timed
    the first answer, the rate test counted each)."""
    return result["answers"] > 1.01


def judge(mode: str, result: dict, hand: dict) -> tuple[Verdict, Verdict, Verdict]:
    """The latency, CPU and rate verdicts of ``mode``'s ``result`` against ``hand``, the
    typed hand-written graph of its shape measured in the same run."""
    valid = not (invalid(result) or invalid(hand))
    median, hand_median = result["timing"].median, hand["timing"].median
    latency, cpu = median / hand_median, result["cpu"] / hand["cpu"]
    limit = LATENCY_LIMITS[mode]
    return (
        Verdict(
            "latency",
            f"median {median:.1f} / {hand_median:.1f} us = {latency:.2f}x <= {limit:.2f}x",
            latency <= limit if valid else None,
        ),
        Verdict(
            "CPU",
            f"per answer {result['cpu']:.0f} / {hand['cpu']:.0f} us = {cpu:.2f}x "
            f"<= {CPU_LIMIT:.2f}x",
            cpu <= CPU_LIMIT if valid else None,
        ),
        Verdict(
            "rate",
            f"sustained {result['sustained']} Hz >= {hand['sustained']} Hz",
            result["sustained"] >= hand["sustained"] if valid else None,
        ),
    )


def beside(rule: str, result: dict, reference: dict) -> str:
    """``rule``'s figure of ``result`` over ``reference``'s, with the p99 ratio for latency
    (words printed beside a verdict, no verdict of their own)."""
    if rule == "latency":
        median = result["timing"].median / reference["timing"].median
        return f"median {median:.2f}x, p99 {p99_ratio(result, reference):.2f}x"
    if rule == "CPU":
        return f"{result['cpu'] / reference['cpu']:.2f}x"
    return f"{reference['sustained']} Hz"


def report(results: dict) -> None:
    """Every graph's figures, then the verdicts of each mode."""
    domain = os.environ["ROS_DOMAIN_ID"]
    print(f"seed pipeline over ROS 2 (ROS_DOMAIN_ID={domain}, localhost); all figures: this run")
    print(
        f"  graphs ({DEFAULTS}):{'':<36}{'median':>10} {'p99':>10}   sustained (a try < 1 % loss)"
        f"   CPU per answer at {CPU_RATE_HZ:.0f} Hz, unanswered"
    )
    labels = [label for label in REFERENCES if label in results]
    labels += [mode for mode in MODES if mode in results]
    for label in labels:
        result = results[label]
        name = label if label in REFERENCES else f"leapp, {label}"
        print(
            f"    {name:<50} {timings(result)}   {result['sustained']:>5} Hz"
            f"{cpu(result):>32}, {100 * result['loss']:5.2f} %{notes(result)}"
        )
    checked = [results[label]["checked"] for label in REFERENCES if label in results]
    if checked:
        print(
            f"    (hand-written graphs checked at start: action = leapp.Pipeline's within "
            f"{CHECK_TOLERANCE:g}; largest difference {max(checked):.2g})"
        )
    print_verdicts(results)
    print(f"  (rates tried: {', '.join(map(str, RATES_HZ))} Hz)")


def p99_ratio(result: dict, reference: dict) -> float:
    return result["timing"].p99 / reference["timing"].p99


def print_verdicts(results: dict) -> None:
    """Per mode of ``results``: its verdicts against the typed hand-written graph of its shape,
    each with the same figure against the raw CDR variant beside."""
    print(
        "  verdicts: leapp's mode / the typed hand-written graph of its shape, from this run's "
        "medians; beside them, the same / its raw CDR variant (information)"
    )
    verdicts = []
    for mode in MODES:
        if mode not in results or HAND_WRITTEN_OF[mode] not in results:
            continue
        result, hand, raw = (
            results[mode],
            results[HAND_WRITTEN_OF[mode]],
            results.get(RAW_OF[mode]),
        )
        print(f"    {mode} / {HAND_WRITTEN_OF[mode]}")
        for verdict in judge(mode, result, hand):
            verdicts.append(verdict)
            typed = f"p99 {p99_ratio(result, hand):.2f}x" if verdict.rule == "latency" else ""
            extra = f"raw CDR: {beside(verdict.rule, result, raw)}" if raw else ""
            print(
                f"      {verdict.rule:<8} {verdict.figures:<46} {verdict.word:<7} "
                f"{typed:<26} {extra}".rstrip()
            )
    if verdicts:
        passed = sum(verdict.passed is True for verdict in verdicts)
        print(f"    {passed} of {len(verdicts)} verdicts PASS")


def timings(result: dict) -> str:
    return f"{result['timing'].median:7.1f} us {result['timing'].p99:7.1f} us"


def cpu(result: dict) -> str:
    return f"{result['cpu']:7.0f} us"


def notes(result: dict) -> str:
    """Notes on a row: ping-pongs that timed out, answers beyond one per input pair."""
    found = [f"{result['lost']} timed out"] if result["lost"] else []
    if invalid(result):
        found.append(
            f"INVALID: {result['answers']:.2f} answers per input pair: the ping-pong timed "
            "the first of them, the rate test counted each"
        )
    return f"  ({'; '.join(found)})" if found else ""
