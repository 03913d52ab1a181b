"""bench/image_latency.py: its verdicts are ratios to the hand-written typed pair of the same
run (outside the model calls <= 0.5x, latency and CPU per image below), the raw pair is printed
beside without a verdict, and its short form drives every graph with every frame and prints
each figure (the figures are the bench's business)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from image_report import HAND, LEAPP, RAW, Result, judge, report
from support.ros import REPO


def result(median: float, cpu: float, image: float, model: float = 1000.0) -> Result:
    return Result((median,) * 3, 0, cpu, 50_000.0, image, model, image - model)


SHORT = ("--rounds", "1", "--seconds", "1")


def test_outside_verdict_is_half_the_hand_written_cost_beyond_the_model_calls():
    hand = result(5000.0, 8000.0, 3000.0)  # 2000 us outside the model calls
    assert judge(result(4000.0, 7000.0, 1999.0), hand)[0].passed is True
    assert judge(result(4000.0, 7000.0, 2001.0), hand)[0].passed is False


def test_latency_and_cpu_verdicts_ask_for_less_than_the_hand_written_pair():
    hand = result(5000.0, 8000.0, 3000.0)
    below = judge(result(4999.0, 7999.0, 1500.0), hand)
    equal = judge(result(5000.0, 8000.0, 1500.0), hand)
    assert [v.passed for v in below[1:]] == [True, True]
    assert [v.passed for v in equal[1:]] == [False, False]


def test_report_prints_both_graphs_their_model_calls_and_each_verdict(capsys):
    results = {HAND: result(5000.0, 10000.0, 3000.0), LEAPP: result(4000.0, 6000.0, 1800.0)}
    report({"640x480 32FC1 (depth)": results}, "1.0")
    printed = capsys.readouterr().out
    row = rf"{HAND} +5000us +5000us +0 +10000us +50000us +3000us +1000us +10% +2000us"
    assert re.search(row, printed)
    assert "outside the model calls 800 / 2000 us = 0.40x <= 0.50x" in printed
    assert "median 4000 / 5000 us = 0.80x < 1.00x" in printed
    assert "per image 6000 / 10000 us = 0.60x < 1.00x" in printed
    assert "3 of 3 verdicts PASS" in printed


def test_report_prints_the_raw_pair_beside_without_a_verdict(capsys):
    results = {
        HAND: result(5000.0, 10000.0, 3000.0),
        RAW: result(3000.0, 6000.0, 1800.0),  # 800 us outside the model calls
        LEAPP: result(4000.0, 6000.0, 2000.0),  # 1000 us
    }
    report({"640x480 32FC1 (depth)": results}, "1.0")
    printed = capsys.readouterr().out
    assert re.search(rf"{RAW} +3000us +3000us +0 +6000us", printed)
    assert "raw / typed 800 / 2000 us = 0.40x; leapp / raw 1000 / 800 us = 1.25x" in printed
    assert "3 of 3 verdicts PASS" in printed


@pytest.mark.ros
@pytest.mark.slow
def test_short_image_bench_drives_every_graph_and_prints_every_figure():
    """Every graph answers its first frame with eager PyTorch's command (checked as they start)
    and the run prints each graph's row, the three verdicts and the raw pair's line per
    frame."""
    from leapp_ros.testing import reserve_domain_id

    with reserve_domain_id() as domain:
        env = {**os.environ, "ROS_DOMAIN_ID": str(domain)}
        env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        done = subprocess.run(
            [sys.executable, str(REPO / "bench" / "image_latency.py"), *SHORT],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout
    for title in ("640x480 32FC1 (depth)", "1280x720 rgb8 (rgb)"):
        assert title in printed, printed
    for label in (HAND, RAW, LEAPP):
        rows = re.findall(rf"^ +{label} +\d+us +\d+us +(\d+) ", printed, re.M)
        assert len(rows) == 2, printed
    verdicts = re.findall(r"^ +(outside|latency|CPU) +.+ (PASS|FAIL)$", printed, re.M)
    assert [rule for rule, _ in verdicts] == ["outside", "latency", "CPU"] * 2, printed
    assert len(re.findall(r"^ +raw +outside the model calls: raw / typed", printed, re.M)) == 2
    assert re.search(r"\d of 6 verdicts PASS", printed), printed
