"""bench/rate_loop.py, short: one second of the 500 Hz arm against the hand-written node and a
composed graph; it prints each stream's p50 and p99 interval as a ratio to the hand-written
node's and the input sets (the figures are the bench's business; test/sim/test_rate_loop.py
checks every target and result in every mode)."""

from __future__ import annotations

import re

import pytest
import rate_loop

pytestmark = [pytest.mark.ros, pytest.mark.slow]

INTERVAL = r"\s+\d+\.\d{3} ms \(\d+\.\d\dx\)"


def test_rate_loop_bench_prints_each_interval_against_the_hand_written_node(capsys):
    rate_loop.main(["--seconds", "1", "--modes", "composed"])
    printed = capsys.readouterr().out
    assert re.search(r"hand-written" + INTERVAL * 4 + r"\s+\d+ mixed, \d+ wrong of \d+", printed)
    assert re.search(r"composed" + INTERVAL * 4 + r"\s+0 mixed, 0 wrong of \d+", printed), printed
