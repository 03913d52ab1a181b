"""What a record of the rate loop (:class:`rate_drive.Record`) proves: which inputs produced
each policy result, whether each target follows from them, and how steady the periods were.

- :func:`identify` finds, for each ``action`` received, the input set eager PyTorch gets it
  from: the JointState and Imu of one stamp (both published) with a command sent no earlier
  than shortly before that instant (a newest-value input: a set that waited, or a timer's
  tick on the newest whole set, pairs it with a later command). A result
  that no such set gives is looked up among the sets of a JointState and an Imu of *different*
  stamps (up to 25 steps apart): ``mixed`` when one of them gives it, else ``wrong``.
- :func:`check_targets` replays the documented interpolation (leapp_ros.plan.output_rates) over
  the targets received: each target is either the next one of the current result's ramp, or
  the first of a later result's (``p``: the target before it), with the eager ``joint_targets``
  of the identified inputs; the first explanation that the rest of the targets bear out is
  taken, so nothing depends on when a result came between two targets.
- :func:`periods` gives p50 / p99 of the intervals between arrivals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from rate_arm import JOINTS, Reading, eager
from rate_drive import Record

__all__ = ["TOLERANCE", "Identified", "check_targets", "identify", "periods"]

TOLERANCE = 1e-5
_AROUND = 150  # steps: commands sent this long before an instant may be its newest
_MIXED_SPAN = 25  # steps between the JointState and the Imu of a mixed set looked for
_MAX_SKIP = 64  # results a target may come after without a target of their own


@dataclass
class Identified:
    """Per result received: its input set (``(stamp, command index)``, None when none is
    coherent), the eager ``joint_targets`` of it, and which results were mixed or wrong."""

    sets: list[tuple[int, int] | None] = field(default_factory=list)
    targets: list[np.ndarray] = field(default_factory=list)
    mixed: list[int] = field(default_factory=list)
    wrong: list[int] = field(default_factory=list)


def _commands_near(record: Record, step: int) -> list[int]:
    """The commands a set of ``step`` may have used: the newest sent before ``_AROUND`` steps
    before it, and every one sent since."""
    steps = [s for s, _ in record.twists]
    chosen = [i for i, s in enumerate(steps) if step - _AROUND <= s]
    before = [i for i, s in enumerate(steps) if s < step - _AROUND]
    return before[-1:] + chosen


def _candidates(record: Record, pairs: list[tuple[int, int]]) -> tuple[list, np.ndarray, list]:
    """Eager results of every ``(joint stamp, imu stamp)`` pair with each command near it."""
    readings, commands, keys = [], [], []
    for joint_stamp, imu_stamp in pairs:
        joint, imu = record.readings[joint_stamp], record.readings[imu_stamp]
        reading = Reading(joint.position, joint.velocity, imu.gyro, imu.accel, imu.quat)
        for index in _commands_near(record, record.step_of[joint_stamp]):
            readings.append(reading)
            commands.append(record.twists[index][1])
            keys.append((joint_stamp, imu_stamp, index))
    if not keys:
        return [], np.empty((0, len(JOINTS))), []
    actions, targets = eager(readings, np.stack(commands))
    return keys, actions.astype(np.float64), list(targets.astype(np.float64))


def _nearest(value: np.ndarray, actions: np.ndarray) -> tuple[int, float]:
    if not len(actions):
        return -1, math.inf
    distance = np.max(np.abs(actions - value), axis=1)
    best = int(np.argmin(distance))
    return best, float(distance[best])


def identify(record: Record) -> Identified:
    """The input set of every result of ``record`` (see the module documentation)."""
    coherent = sorted(record.joint_stamps & record.imu_stamps)
    keys, actions, targets = _candidates(record, [(s, s) for s in coherent])
    found = Identified()
    unmatched = []
    for number, (_, value) in enumerate(record.results):
        best, distance = _nearest(value, actions)
        if distance <= TOLERANCE:
            joint_stamp, _, command = keys[best]
            found.sets.append((joint_stamp, command))
            found.targets.append(targets[best])
        else:
            found.sets.append(None)
            found.targets.append(np.full(len(JOINTS), np.nan))
            unmatched.append(number)
    if unmatched:
        mixed = _mixed_sets(record)
        for number in unmatched:
            _, distance = _nearest(record.results[number][1], mixed)
            (found.mixed if distance <= TOLERANCE else found.wrong).append(number)
    return found


def _mixed_sets(record: Record) -> np.ndarray:
    """Eager actions of every JointState and Imu of different stamps close in time."""
    imu_by_step = {record.step_of[s]: s for s in record.imu_stamps}
    pairs = []
    for joint_stamp in sorted(record.joint_stamps):
        step = record.step_of[joint_stamp]
        for offset in range(-_MIXED_SPAN, _MIXED_SPAN + 1):
            imu_stamp = imu_by_step.get(step + offset)
            if offset and imu_stamp is not None:
                pairs.append((joint_stamp, imu_stamp))
    return _candidates(record, pairs)[1]


def _interpolated(start: np.ndarray, point: np.ndarray, step: int, steps: float) -> np.ndarray:
    """The ``step``-th target after a result ``point`` from ``start`` (linear, one point)."""
    u = step / steps
    if math.floor(u + 1e-9) >= 1:
        return point
    return start + (point - start) * u


def check_targets(
    results: list[np.ndarray], targets: list[np.ndarray], steps: float
) -> tuple[int, list[str]]:
    """How many of ``targets`` the interpolation of ``results`` (eager ``joint_targets``, in
    the order the results came) explains with ``steps`` targets per policy period, and what
    did not fit (the first target no explanation reaches)."""
    count = len(targets)
    # a choice point: (target index, result, step within its ramp, ramp start, options left)
    stack: list[tuple[int, int, int, np.ndarray | None, list]] = []
    j, k, i, start = 0, -1, 0, None
    furthest = 0
    budget = 50 * max(count, 1)
    while j < count and budget > 0:
        budget -= 1
        options = _options(results, targets, j, k, i, start, steps)
        if options:
            stack.append((j, k, i, start, options[1:]))
            k, i, start = options[0]
            j += 1
            furthest = max(furthest, j)
            continue
        while stack and not stack[-1][4]:
            stack.pop()
        if not stack:
            break
        j, _, _, _, rest = stack[-1]
        stack[-1] = (*stack[-1][:4], rest[1:])
        k, i, start = rest[0]
        j += 1
    if j >= count:
        return count, []
    last = results[k] if k >= 0 else None
    return furthest, [
        f"target {furthest + 1} of {count}: {targets[furthest].tolist()}; no result's "
        f"interpolation gives it (current result {None if last is None else last.tolist()})"
    ]


def _options(results, targets, j, k, i, start, steps) -> list[tuple[int, int, np.ndarray]]:
    """The explanations of target ``j``: ``(result, step, ramp start)`` each, a new result's
    first target before the current result's next one."""
    value = targets[j]
    found = []
    ramp_start = targets[j - 1] if j else None
    for later in range(k + 1, min(k + 1 + _MAX_SKIP, len(results))):
        point = results[later]
        begin = point if ramp_start is None else ramp_start
        if np.max(np.abs(_interpolated(begin, point, 1, steps) - value)) <= TOLERANCE:
            found.append((later, 1, begin))
    if k >= 0 and start is not None:
        going_on = _interpolated(start, results[k], i + 1, steps)
        if np.max(np.abs(going_on - value)) <= TOLERANCE:
            found.append((k, i + 1, start))
    return found


def periods(arrivals: list[float]) -> tuple[float, float]:
    """p50 and p99 (s) of the intervals between consecutive ``arrivals``."""
    gaps = np.diff(np.asarray(arrivals))
    if not len(gaps):
        return math.nan, math.nan
    return float(np.percentile(gaps, 50)), float(np.percentile(gaps, 99))
