"""bench/reaction_time.py, short: it drives the seed graph through a watchdog timeout, an
e-stop and a timer, and prints how soon each acted (the figures are the bench's business; the
rules that hold under any load are tested in test/operations and test/ros)."""

from __future__ import annotations

import re

import pytest
import reaction_time

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_reaction_time_bench_prints_each_figure_against_its_setting(capsys):
    reaction_time.main(["--repeat", "2"])
    printed = capsys.readouterr().out
    assert re.search(r"watchdog: last set \d+\.\d ms old when it fired = \d+\.\d\dx", printed)
    assert re.search(r"watchdog: first safe action \d+\.\d ms after the last command", printed)
    assert re.search(r"e-stop: first safe action \d+\.\d ms after the ~/enable request", printed)
    assert re.search(r"timer: \d+\.\d\d Hz = \d\.\d{3}x rate_hz", printed), printed
