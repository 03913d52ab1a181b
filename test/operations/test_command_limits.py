"""The rules of command limits, safe actions and the command gate, without ROS
(:mod:`leapp_ros.node.safety`, :mod:`leapp_ros.plan.limits`); the same rules over real DDS are
in test_robot_operations.py and test_closed_loop_faults.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from leapp_ros.node.safety import CommandGate, OutputGuard
from leapp_ros.plan.limits import OutputLimits, output_limits
from leapp_ros.plan.settings import StartupError


def port(name="targets", dtype="float32", shape=(3,)):
    return SimpleNamespace(port=name, dtype=dtype, shape=shape)


def counters():
    return SimpleNamespace(clamped=0, step_limited=0)


def limits(**given):
    values = {"safe_action": None, "safe_values": None, "min": None, "max": None, "max_step": None}
    return output_limits("node 'p': parameter ports.targets", "targets", (3,), {**values, **given})


def test_min_and_max_clamp_each_element_and_count_the_run():
    guard = OutputGuard.of("p", [port()], {"targets": limits(min=[-1.0, -2.0, -3.0], max=1.0)})
    data = counters()
    (out,) = guard.apply([np.array([-5.0, 0.5, 7.0], dtype=np.float32)], data)
    np.testing.assert_array_equal(out, np.array([-1.0, 0.5, 1.0], dtype=np.float32))
    assert out.dtype == np.float32 and data.clamped == 1
    guard.apply([np.zeros(3, dtype=np.float32)], data)
    assert data.clamped == 1  # within the limits: not counted


def test_max_step_limits_the_change_from_the_last_published_value():
    guard = OutputGuard.of("p", [port()], {"targets": limits(max_step=0.1, max=0.25)})
    data = counters()
    first = guard.apply([np.zeros(3, dtype=np.float32)], data)[0]
    assert data.step_limited == 0  # nothing published before: no step to limit
    second = guard.apply([np.array([1.0, -1.0, 0.05], dtype=np.float32)], data)[0]
    np.testing.assert_allclose(second, [0.1, -0.1, 0.05], rtol=1e-6)
    third = guard.apply([np.array([1.0, -1.0, 0.05], dtype=np.float32)], data)[0]
    np.testing.assert_allclose(third, [0.2, -0.2, 0.05], rtol=1e-6)
    fourth = guard.apply([np.array([1.0, -1.0, 0.05], dtype=np.float32)], data)[0]
    np.testing.assert_allclose(fourth, [0.25, -0.3, 0.05], rtol=1e-6)  # max wins over a step
    assert data.step_limited == 3 and data.clamped == 1 and first.dtype == np.float32


def test_hold_repeats_the_last_limited_command_and_nothing_before_one():
    guard = OutputGuard.of("p", [port()], {"targets": limits(safe_action="hold", max=0.5)})
    assert guard.safe_values() == [None]
    guard.apply([np.array([0.1, 0.9, 0.2], dtype=np.float32)], counters())
    np.testing.assert_array_equal(guard.safe_values()[0], np.float32([0.1, 0.5, 0.2]))


def test_safe_values_come_in_the_ports_dtype_and_imply_the_values_action():
    entry = limits(safe_values=[0.0, 0.1, 0.2])
    assert entry.safe_action == "values"
    guard = OutputGuard.of("p", [port(), port("other")], {"targets": entry})
    values = guard.safe_values()
    assert values[1] is None and values[0].dtype == np.float32  # the other port is silent


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"min": [0.0, 1.0]}, "has 2 number(s); the port has 3"),
        ({"min": 1.0, "max": 0.0}, "min exceeds"),
        ({"max_step": 0.0}, "max_step must be > 0"),
        ({"safe_action": "values"}, "safe_values is not set"),
        ({"safe_action": "brake"}, "safe_action must be one of"),
        ({"safe_values": [0.0, 0.0, 9.0], "max": 1.0}, "lie outside"),
        ({"min": "low"}, "must be finite numbers"),
        ({"max": [float("nan")]}, "must be finite numbers"),
    ],
)
def test_bad_limits_are_startup_errors_that_name_the_parameter(given, says):
    with pytest.raises(StartupError, match=r"ports\.targets") as caught:
        limits(**given)
    assert says in str(caught.value)


def test_limits_on_an_integer_output_are_refused():
    with pytest.raises(StartupError, match="node 'p': output 'targets' is int64"):
        OutputGuard.of("p", [port(dtype="int64")], {"targets": OutputLimits("targets", low=1)})


def test_the_gate_commands_only_when_active_and_not_estopped():
    gate = CommandGate()
    stamps = {"a": 1.0}
    assert not gate.admit(2.0, stamps, ["a"])  # not active yet
    gate.activate(0.5)
    assert gate.admit(2.0, stamps, ["a"])
    gate.engage()
    assert not gate.admit(3.0, {"a": 2.5}, ["a"]) and gate.safe


def test_after_a_release_only_a_set_gathered_wholly_after_it_commands():
    gate = CommandGate()
    gate.activate(0.0)
    gate.engage()
    assert gate.release(10.0)
    assert not gate.admit(10.5, {"a": 10.2, "b": 9.9}, ["a", "b"])  # b came before the release
    assert gate.admit(10.6, {"a": 10.2, "b": 10.4}, ["a", "b"])
    assert gate.admit(10.7, {"a": 10.2, "b": 9.0}, ["a", "b"])  # fresh once: arrival rules again


def test_the_watchdog_fires_after_the_timeout_and_a_command_ends_it():
    gate = CommandGate(timeout_s=0.2)
    gate.activate(0.0)
    assert not gate.overdue(0.15)
    assert gate.overdue(0.25) and gate.safe
    assert gate.admit(0.3, {"a": 0.29}, ["a"]) and not gate.timed_out
    assert gate.overdue(0.45), "sets whose runs fail (no command) do not feed the watchdog"
    gate.admit(0.5, {"a": 0.49}, ["a"])
    gate.last_command = 0.5  # the run published
    assert not gate.overdue(0.65)
    gate.engage()
    assert not gate.overdue(5.0), "e-stopped: the e-stop's safe action, not a timeout"


def test_on_a_timer_the_watchdog_watches_the_oldest_input():
    gate = CommandGate(timeout_s=0.2)
    gate.activate(0.0)
    gate.last_command = 0.95
    assert not gate.overdue(1.0, oldest=0.9)
    assert gate.overdue(1.0, oldest=0.7)
