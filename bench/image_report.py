"""What bench/image_latency.py measures per camera frame, its verdicts, and how it prints them.

Per frame (480x640 ``32FC1`` depth, 1280x720 ``rgb8``), leapp's camera graph (one process
per node, composed or fused) against the
typed hand-written node pair (bench/image_nodes.py), from one run, by ratios only; the raw
hand-written pair (raw CDR, as a skilled user writes a node for speed, around the same model
calls) is printed beside, without a verdict: what part of the typed pair's cost outside the
model calls even that node pays, and leapp's cost to it. Each graph is driven in several
windows with frames (alternating with the other graphs') and windows of
joint states alone; its figures are medians over its windows, so that one window disturbed by
the machine's other work moves none of them:

- per image outside the model calls: what a frame costs beyond the joint states (CPU per image
  less the joint states' CPU over the same time, measured in the windows without frames) less
  the CPU time of the model calls, which each process of the graph measures around exactly
  its model calls with its thread's CPU clock in the same window (bench/model_clock.py): the
  receive, decode, hand-over to the model, the latent's hop and the command's publish, with
  the middleware's threads: <= :data:`OUTSIDE_LIMIT` x the hand-written pair's;
- end-to-end latency (median, from the frame's publish to the command) below the hand-written
  pair's;
- CPU per image (everything the graph's processes spent, the joint states' share included)
  below the hand-written pair's.

The model calls (the encoder's ONNX and the policy's TorchScript call) are printed apart per
graph, with their share of its CPU per image.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

LEAPP = "leapp, one process per node"  # leapp's graph as bench/image_latency.py runs it by default
HAND = "hand-written typed pair"
RAW = "hand-written raw pair"  # information only (bench/image_nodes.py's raw form)


def leapp_label(deployment: str) -> str:
    """The row of leapp's graph in ``deployment`` (:class:`leapp_ros.run.deployment.Deployment`'s
    description: ``one process per node``, ``composed``, ``fused``)."""
    return f"leapp, {deployment}"


OUTSIDE_LIMIT = 0.5


@dataclass(frozen=True)
class Result:
    """One graph's figures for one frame: latencies (us) of the answered frames, frames lost,
    and medians over its windows: CPU per image (us), the joint states' CPU alone (us per
    second), the CPU per image beyond the joint states' (us), the model calls' CPU per image
    (us) and what is left outside them (us)."""

    latencies: tuple[float, ...]
    lost: int
    cpu_us: float
    joints_us_per_s: float
    image_us: float
    model_us: float
    outside_us: float

    @property
    def median(self) -> float:
        return statistics.median(self.latencies)

    @property
    def p99(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


@dataclass(frozen=True)
class Verdict:
    rule: str
    figures: str
    passed: bool

    @property
    def word(self) -> str:
        return "PASS" if self.passed else "FAIL"


def judge(leapp: Result, hand: Result) -> tuple[Verdict, ...]:
    """The three verdicts of one frame (see the module documentation)."""
    ours, theirs = leapp.outside_us, hand.outside_us
    outside = ours / theirs if theirs > 0 else float("inf")
    latency, cpu = leapp.median / hand.median, leapp.cpu_us / hand.cpu_us
    return (
        Verdict(
            "outside",
            f"CPU per image outside the model calls {ours:.0f} / {theirs:.0f} us = "
            f"{outside:.2f}x <= {OUTSIDE_LIMIT:.2f}x",
            outside <= OUTSIDE_LIMIT,
        ),
        Verdict(
            "latency",
            f"median {leapp.median:.0f} / {hand.median:.0f} us = {latency:.2f}x < 1.00x",
            latency < 1.0,
        ),
        Verdict(
            "CPU",
            f"per image {leapp.cpu_us:.0f} / {hand.cpu_us:.0f} us = {cpu:.2f}x < 1.00x",
            cpu < 1.0,
        ),
    )


def report_frame(name: str, results: dict[str, Result]) -> list[Verdict]:
    """Print one frame's figures and verdicts; the verdicts."""
    print(f"  {name}")
    print(
        f"    {'graph':<30}{'median':>9}{'p99':>9}{'lost':>5}{'CPU/image':>11}"
        f"{'joints/s':>10}{'image':>9}{'model':>9}{'model share':>12}{'outside':>9}"
    )
    (leapp,) = (label for label in results if label not in (HAND, RAW))
    for label in (HAND, RAW, leapp) if RAW in results else (HAND, leapp):
        result = results[label]
        share = result.model_us / result.cpu_us if result.cpu_us > 0 else 0.0
        print(
            f"    {label:<30}{result.median:7.0f}us{result.p99:7.0f}us{result.lost:>5}"
            f"{result.cpu_us:9.0f}us{result.joints_us_per_s:8.0f}us{result.image_us:7.0f}us"
            f"{result.model_us:7.0f}us{100 * share:11.0f}%{result.outside_us:7.0f}us"
        )
    print(
        "    (medians over the graph's windows. CPU/image: all of the graph's processes per "
        "answered frame; joints/s: the joint states alone, CPU per second; image: CPU/image "
        "beyond the joint states; model: the model calls' CPU per image, timed in the graph's "
        "processes; outside: image less model)"
    )
    verdicts = list(judge(results[leapp], results[HAND]))
    for verdict in verdicts:
        print(f"      {verdict.rule:<8} {verdict.figures:<72} {verdict.word}")
    if RAW in results:
        print(f"      {'raw':<8} {raw_line(results[leapp], results[RAW], results[HAND])}")
    return verdicts


def raw_line(leapp: Result, raw: Result, hand: Result) -> str:
    """The raw pair against both (information, no verdict): what part of the typed pair's cost
    outside the model calls the raw pair pays, and leapp's to the raw pair's."""
    floor = raw.outside_us / hand.outside_us if hand.outside_us > 0 else float("inf")
    ours = leapp.outside_us / raw.outside_us if raw.outside_us > 0 else float("inf")
    return (
        f"outside the model calls: raw / typed {raw.outside_us:.0f} / {hand.outside_us:.0f} us"
        f" = {floor:.2f}x; leapp / raw {leapp.outside_us:.0f} / {raw.outside_us:.0f} us = "
        f"{ours:.2f}x (information)"
    )


def report(frames: dict[str, dict[str, Result]], load: str) -> None:
    """Every frame's figures and verdicts, then the count."""
    print(f"camera pipeline over ROS 2 (localhost); all figures: this run; load: {load}")
    verdicts = []
    for name, results in frames.items():
        verdicts += report_frame(name, results)
    passed = sum(verdict.passed for verdict in verdicts)
    print(f"  {passed} of {len(verdicts)} verdicts PASS")
