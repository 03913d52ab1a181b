"""What bench/ros_latency.py measures, by name, and how it prints the figures and verdicts.

Three figures per in-process call (the bare model calls and ``leapp.Pipeline.step``): in a tight
loop (what the issue's floors add), right after a thread handover (the way a node's callback
makes the call: the executor woken by the middleware's thread), and after one message period of
idle CPU plus a handover (a graph at a steady 1 kHz). Each mode's floor is printed with the
tight-loop calls (the verdict) and, beside it without a verdict, with the calls after a handover
("in-graph floor"): the part of the gap that a graph cannot close because the same calls cost
more between middleware work than in a loop.
"""

from __future__ import annotations

import os

from bare_calls import CHEAPEST, HAND_WRITTEN, Timing
from export import STEP
from graph_client import RATES_HZ

TARGET_RATE_HZ = 1000.0
CPU_RATE_HZ = 500.0  # the rate at which CPU time per answer is measured
CHAIN, CHAIN_PROCESSES = "plain rclpy chain, composed", "plain rclpy chain, one process per node"
HOP, HOP_PROCESS = "plain rclpy hop pair, composed", "plain rclpy hop pair, own process"
COMPOSED, PROCESSES = "composed", "one process per node"
FUSED, FUSED_PROCESS = "fused, composed", "fused, own process"
HAND_CHAIN = "hand-written rclpy chain, composed"
HAND_CHAIN_PROCESSES = "hand-written rclpy chain, one process per node"
HAND_SINGLE, HAND_SINGLE_PROCESS = (
    "hand-written single node, composed",
    "hand-written single node, own process",
)
REFERENCES = (
    CHAIN,
    CHAIN_PROCESSES,
    HOP,
    HOP_PROCESS,
    HAND_CHAIN,
    HAND_CHAIN_PROCESSES,
    HAND_SINGLE,
    HAND_SINGLE_PROCESS,
)
# mode: (plain rclpy reference, in-process cost added: the CHEAPEST bare calls or STEP, its
# factor, limit)
FLOORS = {
    COMPOSED: (CHAIN, CHEAPEST, 1.0, 1.3),
    PROCESSES: (CHAIN_PROCESSES, CHEAPEST, 1.0, 1.2),
    FUSED: (HOP, STEP, 1.5, 1.0),
    FUSED_PROCESS: (HOP_PROCESS, STEP, 1.5, 1.0),
}
HAND_WRITTEN_OF = {  # mode: the hand-written graph of its shape
    COMPOSED: HAND_CHAIN,
    PROCESSES: HAND_CHAIN_PROCESSES,
    FUSED: HAND_SINGLE,
    FUSED_PROCESS: HAND_SINGLE_PROCESS,
}
CHECK_TOLERANCE = 1e-5  # a hand-written graph's action against leapp.Pipeline's
DEFAULTS = "system defaults"
TIGHT, HANDED_OVER, IDLE = "tight loop", "after a handover", "1 ms idle + handover"


def floors(inprocess: dict[str, dict[str, Timing]], results: dict) -> dict[str, tuple]:
    """mode: (floor, in-graph floor, words): the plain reference plus the added calls at their
    tight-loop cost, resp. at their cost after a thread handover."""
    found = {}
    for mode, (reference, added, factor, _) in FLOORS.items():
        if reference not in results:
            continue
        plain = results[reference]["timing"].median
        tight, handed = inprocess[TIGHT][added].median, inprocess[HANDED_OVER][added].median
        what = "bare calls (cheapest)" if added == CHEAPEST else "Pipeline.step"
        scale = "" if factor == 1.0 else f"{factor} x "
        found[mode] = (
            plain + factor * tight,
            plain + factor * handed,
            f"{reference} {plain:.1f} us + {scale}{what} {tight:.1f} us "
            f"(in-graph: + {scale}{handed:.1f} us after a handover)",
        )
    return found


def report(inprocess: dict, results: dict, extras: dict, skipped: dict[str, str]) -> None:
    domain = os.environ["ROS_DOMAIN_ID"]
    print(f"seed pipeline over ROS 2 (ROS_DOMAIN_ID={domain}, localhost); references: this run")
    conditions = list(inprocess)
    print(
        f"  in-process calls, median / p99 (us):{'':<26}"
        + "".join(f"{condition:>24}" for condition in conditions)
    )
    for label in (STEP, HAND_WRITTEN, CHEAPEST):
        cells = "".join(
            f"{inprocess[c][label].median:11.1f} / {inprocess[c][label].p99:8.1f}"
            for c in conditions
        )
        print(f"    {label:<60}{cells}")
    print(
        f"  rclpy references ({DEFAULTS}):{'median':>26} {'p99':>10}   sustained (< 1 % loss)"
        f"   CPU per answer at {CPU_RATE_HZ:.0f} Hz"
    )
    for label in REFERENCES:
        if label in results:
            result = results[label]
            print(
                f"    {label:<46} {timings(result)}   {result['sustained']:>4} Hz"
                f"{cpu(result):>30}{lost(result)}"
            )
    checked = [results[label]["checked"] for label in HAND_WRITTEN_OF.values() if label in results]
    if checked:
        print(
            f"    (hand-written graphs checked at start: action = leapp.Pipeline's within "
            f"{CHECK_TOLERANCE:g}; largest difference {max(checked):.2g})"
        )
    found = floors(inprocess, results)
    print("  floors (in-graph floor: the same with the calls' cost after a handover):")
    for mode, (floor, in_graph, words) in found.items():
        print(f"    {mode:<20} {floor:7.1f} us, in-graph {in_graph:7.1f} us = {words}")
    print(
        f"  {'mode':<20} {'CPU settings':<26} {'median':>10} {'p99':>10} {'x floor':>8} "
        f"{'limit':>7}         {'x in-graph floor':>16} {'x hand-written':>14}  "
        f"sustained (< 1 % loss)   CPU per answer at {CPU_RATE_HZ:.0f} Hz (x hand-written)"
    )
    modes = [(m, DEFAULTS) for m in FLOORS if m in results] + list(extras)
    for mode, setting in modes:
        result = results[mode] if setting == DEFAULTS else extras[mode, setting]
        floor, in_graph, _ = found[mode]
        limit = FLOORS[mode][3]
        ratio = result["timing"].median / floor
        verdict = ("met" if ratio <= limit else "MISSED") if setting == DEFAULTS else "(extra)"
        rate = "met" if result["sustained"] >= TARGET_RATE_HZ else "MISSED"
        if result["answers"] > 1.01:
            verdict = rate = "INVALID"
        hand = results.get(HAND_WRITTEN_OF[mode])
        versus = f"{result['timing'].median / hand['timing'].median:.2f}x" if hand else "-"
        cpu_versus = f"({result['cpu'] / hand['cpu']:.2f}x)" if hand else ""
        print(
            f"  {mode:<20} {setting:<26} {timings(result)} {ratio:7.2f}x <= {limit:<4} "
            f"{verdict:<7} {result['timing'].median / in_graph:15.2f}x {versus:>14}  "
            f"{result['sustained']:>4} Hz {rate:<6}{cpu(result):>24} {cpu_versus}{lost(result)}"
        )
    print(
        "  the same limits applied to the hand-written graphs (plain rclpy nodes calling the "
        "same artifacts; no verdict of leapp's):"
    )
    for mode, hand_label in HAND_WRITTEN_OF.items():
        if mode not in found or hand_label not in results:
            continue
        floor, in_graph, _ = found[mode]
        median, limit = results[hand_label]["timing"].median, FLOORS[mode][3]
        would = "would meet" if median / floor <= limit else "would miss"
        print(
            f"    {hand_label:<46} {median:7.1f} us = {median / floor:5.2f}x the floor of "
            f"{mode!r} (limit <= {limit}: {would}), {median / in_graph:5.2f}x its in-graph floor"
        )
    for what, why in skipped.items():
        print(f"  {what}: not measured, {why}")
    print(f"  (rates tried: {', '.join(map(str, RATES_HZ))} Hz; limit >= {TARGET_RATE_HZ:.0f} Hz)")
    print(
        "  (x in-graph floor and x hand-written have no limit. x hand-written: median / median "
        "of the hand-written graph of the same shape: the chain, composed or across processes; "
        "the single node for fused)"
    )


def timings(result: dict) -> str:
    return f"{result['timing'].median:7.1f} us {result['timing'].p99:7.1f} us"


def cpu(result: dict) -> str:
    return f"{result['cpu']:7.0f} us"


def lost(result: dict) -> str:
    """Notes on a row: ping-pongs that timed out, answers beyond one per input pair."""
    notes = [f"{result['lost']} timed out"] if result["lost"] else []
    if result["answers"] > 1.01:
        notes.append(
            f"INVALID: {result['answers']:.2f} answers per input pair: the ping-pong timed "
            "the first of them, the rate test counted each"
        )
    return f"  ({'; '.join(notes)})" if notes else ""
