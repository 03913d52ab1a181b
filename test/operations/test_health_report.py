"""The levels and values of /diagnostics (leapp_ros.node.diagnostics), without ROS traffic;
test_robot_operations.py reads them from live nodes."""

from __future__ import annotations

from diagnostic_msgs.msg import DiagnosticStatus

from leapp_ros.node.data_path import COUNTERS
from leapp_ros.node.diagnostics import HealthReport


def record(**fields):
    base = {"node": "policy", "lifecycle": "active", "estop": False, "safe_action": False}
    return {**base, **dict.fromkeys(COUNTERS, 0), "hardware_id": "robot", **fields}


def test_a_healthy_active_node_is_ok_with_every_counter_and_its_rate():
    report = HealthReport("/robot")
    report.statuses([record(runs=0)], 0.0)
    (status,) = report.statuses([record(runs=50, last_set_age_s=0.01)], 1.0)
    values = {kv.key: kv.value for kv in status.values}
    assert (status.level, status.name, status.hardware_id) == (
        DiagnosticStatus.OK,
        "/robot/policy",
        "robot",
    )
    assert set(COUNTERS) <= values.keys() and values["firing_rate_hz"] == "50.000"
    assert values["last_set_age_s"] == "0.010" and values["lifecycle"] == "active"


def test_drops_timeouts_and_limits_in_the_last_period_warn_then_clear():
    report = HealthReport("/robot")
    report.statuses([record()], 0.0)
    for counter in ("dropped", "incomplete_sets", "timeouts", "clamped", "step_limited"):
        (status,) = report.statuses([record(**{counter: 3})], 1.0)
        assert status.level == DiagnosticStatus.WARN, counter
        (status,) = report.statuses([record(**{counter: 3})], 2.0)  # nothing new: OK again
        assert status.level == DiagnosticStatus.OK, counter
        report = HealthReport("/robot")
        report.statuses([record()], 0.0)


def test_model_errors_and_an_unexpected_inactive_node_are_errors():
    report = HealthReport("/robot")
    report.statuses([record()], 0.0)
    (status,) = report.statuses([record(errors=1)], 1.0)
    assert status.level == DiagnosticStatus.ERROR and "model failures" in status.message
    (status,) = report.statuses([record(errors=1, lifecycle="inactive")], 2.0)
    assert status.level == DiagnosticStatus.ERROR and "autostart is true" in status.message
    (status,) = report.statuses(
        [record(errors=1, lifecycle="inactive", expected_active=False)], 3.0
    )
    assert status.level == DiagnosticStatus.WARN  # an operator deactivated it


def test_the_estop_and_the_safe_action_warn_and_a_level_change_is_noticed():
    report = HealthReport("/robot")
    report.statuses([record()], 0.0)
    assert not report.changed([record()])
    assert report.changed([record(estop=True, safe_action=True)])
    (status,) = report.statuses([record(estop=True, safe_action=True)], 0.5, periodic=False)
    assert status.level == DiagnosticStatus.WARN and "e-stop" in status.message
    assert not report.changed([record(estop=True, safe_action=True)])


VIOLATION = {
    "port": "joint_vel",
    "element": "elbow",
    "value": 12.5,
    "bound": "max",
    "limit": 2.0,
    "action": "drop",
    "text": "input joint_vel[elbow] = 12.5 above max 2",
}


def test_an_out_of_domain_value_warns_naming_port_element_and_value():
    report = HealthReport("/robot")
    report.statuses([record()], 0.0)
    (status,) = report.statuses([record(out_of_domain=1, last_out_of_domain=VIOLATION)], 1.0)
    assert status.level == DiagnosticStatus.WARN
    assert "joint_vel[elbow] = 12.5 above max 2" in status.message


def test_a_latched_safe_action_is_an_error_naming_its_cause_not_a_timeout():
    report = HealthReport("/robot")
    report.statuses([record()], 0.0)
    cause = "node 'preprocess': out of domain: input joint_vel[elbow] = 12.5 above max 2"
    latched = record(latched=True, latch_cause=cause, safe_action=True)
    assert report.changed([latched])
    (status,) = report.statuses([latched], 1.0)
    assert status.level == DiagnosticStatus.ERROR
    assert cause in status.message and "input_timeout_ms" not in status.message
    assert {kv.key: kv.value for kv in status.values}["latched"] == "true"


def test_a_ramp_in_shows_blending_and_its_start_and_end_publish_at_once():
    report = HealthReport("/robot")
    report.statuses([record()], 0.0)
    progress = {"joint_targets": {"command": 2, "of": 5, "weight": 0.4, "from": "measured"}}
    blending = record(blending=progress)
    assert report.changed([blending])
    (status,) = report.statuses([blending], 1.0)
    assert status.level == DiagnosticStatus.OK
    assert "blending joint_targets 2/5 from measured" in status.message
    assert report.changed([record(blending={})])
