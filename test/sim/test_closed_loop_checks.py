"""The closed loop's check of a command (:mod:`support.closed_loop`,
:mod:`support.blended_loop`) is made as of the moment the command arrived, not the moment the
loop took it.

The loop takes commands only while it spins between ticks; on a loaded machine it can take
one many ticks after it arrived, while it went on sending ticks. A command that answered the
latest tick when it arrived is right however late the loop reads it; one that answered a tick
more than ``late`` ticks older than the latest sent when it arrived is wrong, and its note says
how many ticks behind it was. No ROS here: the loop's checks alone, fed the ticks it sent (with
the moment each was sent) and the commands as the middleware hands them over (with the moment
each was received).
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
from support.blended_loop import BlendedLoop

COMMANDS = 10  # the commands of one blend
LATE = 10


def checks_only() -> BlendedLoop:
    """A :class:`BlendedLoop` with its checks and no graph: the kill of a restarted node, ticks
    unawaited (``late``), the hold the last command."""
    loop = BlendedLoop.__new__(BlendedLoop)
    loop.commands = COMMANDS
    loop.arm = SimpleNamespace(
        tip_height=lambda: 1.0, deviation=lambda: 0.0, data=SimpleNamespace(ctrl=np.zeros(3))
    )
    loop._init_checks()
    loop.begin("sigkill")
    loop.late = LATE
    loop.last = np.array([0.3, -0.6, 0.3], dtype=np.float32)  # the stand-in's hold
    return loop


def send(loop: BlendedLoop, rng: np.random.Generator) -> int:
    """One tick sent (its measured position and eager output random); the moment it went."""
    position = rng.uniform(-1.0, 1.0, 3)
    loop.positions.append((loop.ticks, position))
    loop.sending(rng.uniform(-1.0, 1.0, 3).astype(np.float32), time.monotonic())
    sent_ns = loop.sent_ns[-1][1]
    loop.ticks += 1
    return sent_ns


def first_blended(loop: BlendedLoop, tick: int, start_tick: int) -> np.ndarray:
    """The first command of a blend from the position of ``start_tick`` to eager on ``tick``."""
    start = dict(loop.positions)[start_tick]
    eager = dict(loop.eager)[tick].astype(np.float64)
    return (start + (eager - start) / COMMANDS).astype(np.float32)


def arrive(loop: BlendedLoop, value: np.ndarray, received_ns: int) -> str:
    """The command ``value``, received by the middleware at ``received_ns``, taken now."""
    loop._on_command(SimpleNamespace(data=value.tolist()), {"received_timestamp": received_ns})
    return loop.faults[-1].arrivals[-1][1]


def test_a_command_the_loop_takes_late_is_checked_against_the_ticks_sent_before_it_arrived():
    rng = np.random.default_rng(7)
    loop = checks_only()
    for _ in range(5):
        send(loop, rng)  # ticks 0..4, answered by the stand-in's hold only
    received = send(loop, rng) + 1  # tick 5; its command arrives before tick 6 goes
    for _ in range(3 * LATE):
        send(loop, rng)  # the loop takes it only after 30 more ticks
    value = first_blended(loop, 5, start_tick=4)

    assert arrive(loop, value, received) == "command", loop.wrong
    assert [(ramp.first_tick, ramp.origin) for ramp in loop.ramps] == [(5, "tick 4")]
    assert loop.largest_lag == 0


def test_a_command_older_than_late_ticks_when_it_arrived_is_wrong_and_says_how_old():
    rng = np.random.default_rng(8)
    loop = checks_only()
    for _ in range(40):
        received = send(loop, rng) + 1  # it arrives right after tick 39 went
    behind = LATE + 5
    stale = first_blended(loop, 39 - behind, start_tick=39 - behind - 1)

    assert arrive(loop, stale, received) == "wrong"
    (note,) = loop.wrong
    assert (
        f"blend from tick {38 - behind} for tick {39 - behind}, {behind} tick(s) before the "
        "latest sent when it arrived (tick 39)"
    ) in note, note
    assert not loop.ramps


def test_an_unblended_command_older_than_late_ticks_names_its_tick():
    rng = np.random.default_rng(9)
    loop = checks_only()
    loop.resuming = False  # commands go on, no blend
    for _ in range(40):
        received = send(loop, rng) + 1
    stale = dict(loop.eager)[39 - LATE - 1]

    assert arrive(loop, stale, received) == "wrong"
    (note,) = loop.wrong
    assert f"nearest eager: tick {39 - LATE - 1}, {LATE + 1} tick(s) before" in note, note
    assert "off by 0.00e+00" in note, note
