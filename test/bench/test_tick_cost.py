"""bench/tick_cost.py, short: it builds the fused node and the hand-written node of the seed
pipeline, ticks both through their subscription callbacks and prints each tick against the
sum of its parts (the figures are the bench's business; here only that it runs and ticks)."""

from __future__ import annotations

import re
import sys

import pytest
from support.ros import REPO

sys.path.insert(0, str(REPO / "bench"))
import tick_cost

pytestmark = pytest.mark.ros


def test_tick_cost_bench_times_both_ticks_against_their_parts(capsys):
    tick_cost.main(["--samples", "200", "--rounds", "2"])
    printed = capsys.readouterr().out
    ratios = re.findall(r"= (\d+\.\d+)x the sum of its parts", printed)
    assert len(ratios) == 2, printed
    assert all(float(ratio) > 0 for ratio in ratios), printed
    for part in ("preprocess (TorchScript)", "policy (ONNX)", "both model calls"):
        assert part in printed, printed
    assert re.search(r"leapp fused tick / hand-written tick: \d+\.\d+x", printed), printed


def test_tick_cost_bench_with_idle_times_each_call_after_the_idle(capsys):
    tick_cost.main(["--samples", "200", "--idle-ms", "1"])
    printed = capsys.readouterr().out
    assert "after 1 ms idle, on a woken thread" in printed, printed
    assert len(re.findall(r"sum of the parts, each on a wake of its own", printed)) == 2, printed
    assert len(re.findall(r"= (\d+\.\d+)x the sum of its parts", printed)) == 2, printed
