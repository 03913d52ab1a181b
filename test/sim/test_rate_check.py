"""The rate loop's checks (``bench/rate_check.py``) can fail: on a record of the arm made
without ROS, a result computed from a JointState and an Imu of different stamps is counted
mixed, one from nothing sent is wrong, and a target off the documented interpolation is
reported; the right ones pass. The firing page shows the parameters the loop runs with."""

from __future__ import annotations

import numpy as np
import pytest
from rate_arm import Plant, Reading, eager, write_model
from rate_check import check_targets, identify
from rate_drive import Record, command_at

STEPS = 10  # targets per policy period


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> Record:
    """60 steps of the arm at rest, every sensor and a command every 50th step recorded."""
    plant, record = Plant(write_model(tmp_path_factory.mktemp("arm"))), Record()
    for step in range(60):
        plant.step(None)
        stamp, reading = plant.stamp_ns, plant.read()
        record.readings[stamp], record.step_of[stamp] = reading, step
        record.joint_stamps.add(stamp)
        record.imu_stamps.add(stamp)
        if step % 50 == 0:
            record.twists.append((step, command_at(step)))
    return record


def result_of(record: Record, joint_step: int, imu_step: int) -> tuple[np.ndarray, np.ndarray]:
    """Eager ``action`` and ``joint_targets`` of the JointState of one step and the Imu of
    another, with the first command."""
    stamps = {step: stamp for stamp, step in record.step_of.items()}
    joint, imu = record.readings[stamps[joint_step]], record.readings[stamps[imu_step]]
    reading = Reading(joint.position, joint.velocity, imu.gyro, imu.accel, imu.quat)
    action, targets = eager([reading], record.twists[0][1][None])
    return action[0].astype(np.float64), targets[0].astype(np.float64)


def test_a_result_of_one_instant_is_identified_and_one_of_two_is_counted_mixed(record):
    record.results[:] = [(0.0, result_of(record, 30, 30)[0]), (0.0, result_of(record, 30, 29)[0])]
    record.results.append((0.0, result_of(record, 30, 30)[0] + 1e-3))
    found = identify(record)
    stamp, command = found.sets[0]
    assert (record.step_of[stamp], command) == (30, 0)
    assert found.sets[1:] == [None, None]
    assert (found.mixed, found.wrong) == ([1], [2])


def test_targets_off_the_interpolation_are_reported(record):
    first, second = result_of(record, 10, 10)[1], result_of(record, 20, 20)[1]
    held = [first] * 12
    ramp = [first + (second - first) * i / STEPS for i in range(1, STEPS + 1)] + [second] * 3
    assert check_targets([first, second], held + ramp, STEPS) == (len(held + ramp), [])
    late = held + ramp[:4] + [ramp[5]] + ramp[5:]  # one step skipped
    checked, problems = check_targets([first, second], late, STEPS)
    assert checked == len(held) + 4 and "target 17" in problems[0]
