"""What bench/image_latency.py measures per camera frame, its verdicts, and how it prints them.

Per frame (480x640 ``32FC1`` depth, 1280x720 ``rgb8``), leapp's camera graph (one process per
node) against the typed hand-written node pair (bench/image_nodes.py), from one run, by ratios
only:

- per image outside the model calls: what a frame costs beyond the joint states (CPU per image
  less the joint states' CPU over the same time, measured in windows without frames) less the
  model calls' CPU: the receive, decode, hand-over to the model, the latent's hop and the
  command's publish, with the middleware's threads: <= :data:`OUTSIDE_LIMIT` x the
  hand-written pair's;
- end-to-end latency (median, from the frame's publish to the command) below the hand-written
  pair's;
- CPU per image (everything the graph's processes spent, the joint states' share included)
  below the hand-written pair's.

The model calls (the encoder's ONNX and the policy's TorchScript call, as the hand-written
nodes make them, at the frame rate in this process) are printed apart, with their share of
each graph's CPU per image.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

LEAPP = "leapp, one process per node"
HAND = "hand-written typed pair"
OUTSIDE_LIMIT = 0.5


@dataclass(frozen=True)
class Result:
    """One graph's figures for one frame: latencies (us) of the answered frames, frames lost,
    CPU per image (us) over all its windows, the joint states' CPU alone (us per second), and
    the CPU per image beyond the joint states' (us)."""

    latencies: tuple[float, ...]
    lost: int
    cpu_us: float
    joints_us_per_s: float
    image_us: float

    @property
    def median(self) -> float:
        return statistics.median(self.latencies)

    @property
    def p99(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


@dataclass(frozen=True)
class ModelCalls:
    """The model calls per image, in microseconds: CPU (this thread's) and wall time."""

    cpu_us: float
    wall_us: float


@dataclass(frozen=True)
class Verdict:
    rule: str
    figures: str
    passed: bool

    @property
    def word(self) -> str:
        return "PASS" if self.passed else "FAIL"


def outside_us(result: Result, model: ModelCalls) -> float:
    """CPU per image beyond the joint states' outside the model calls."""
    return result.image_us - model.cpu_us


def judge(leapp: Result, hand: Result, model: ModelCalls) -> tuple[Verdict, ...]:
    """The three verdicts of one frame (see the module documentation)."""
    ours, theirs = outside_us(leapp, model), outside_us(hand, model)
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


def report_frame(name: str, results: dict[str, Result], model: ModelCalls) -> list[Verdict]:
    """Print one frame's figures and verdicts; the verdicts."""
    print(f"  {name}")
    print(
        f"    model calls (encoder ONNX + policy TorchScript, this process, at the frame "
        f"rate): CPU {model.cpu_us:.0f} us, wall {model.wall_us:.0f} us per image"
    )
    print(
        f"    {'graph':<30}{'median':>9}{'p99':>9}{'lost':>5}{'CPU/image':>11}"
        f"{'joints/s':>10}{'image':>9}{'model share':>12}{'outside':>9}"
    )
    for label in (HAND, LEAPP):
        result = results[label]
        share = model.cpu_us / result.cpu_us
        print(
            f"    {label:<30}{result.median:7.0f}us{result.p99:7.0f}us{result.lost:>5}"
            f"{result.cpu_us:9.0f}us{result.joints_us_per_s:8.0f}us{result.image_us:7.0f}us"
            f"{100 * share:11.0f}%{outside_us(result, model):7.0f}us"
        )
    print(
        "    (CPU/image: all of the graph's processes per answered frame; joints/s: the joint "
        "states alone, CPU per second; image: CPU/image beyond the joint states; outside: "
        "image less the model calls)"
    )
    verdicts = list(judge(results[LEAPP], results[HAND], model))
    for verdict in verdicts:
        print(f"      {verdict.rule:<8} {verdict.figures:<72} {verdict.word}")
    return verdicts


def report(frames: dict[str, tuple[dict[str, Result], ModelCalls]], load: str) -> None:
    """Every frame's figures and verdicts, then the count."""
    print(f"camera pipeline over ROS 2 (localhost); all figures: this run; load: {load}")
    verdicts = []
    for name, (results, model) in frames.items():
        verdicts += report_frame(name, results, model)
    passed = sum(verdict.passed for verdict in verdicts)
    print(f"  {passed} of {len(verdicts)} verdicts PASS")
