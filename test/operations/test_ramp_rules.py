"""The rules of ramp-in, out-of-domain guards and the latch, without ROS
(:mod:`leapp_ros.node.ramp`, :mod:`leapp_ros.node.safety`, :mod:`leapp_ros.node.domain_guard`,
:mod:`leapp_ros.plan.domain`, :mod:`leapp_ros.plan.limits`); the same rules over real DDS are
in test_ramp_and_guards.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from leapp_ros.node.domain_guard import first_outside
from leapp_ros.node.safety import CommandGate, OutputGuard
from leapp_ros.node.target_player import TargetPlayer
from leapp_ros.plan.domain import input_bounds
from leapp_ros.plan.limits import output_limits
from leapp_ros.plan.output_rates import OutputRate
from leapp_ros.plan.settings import StartupError

RATE_HZ = 50.0


def port(name="targets", dtype="float32", shape=(3,)):
    return SimpleNamespace(port=name, dtype=dtype, shape=shape)


def counters():
    return SimpleNamespace(clamped=0, step_limited=0)


def limits(**given):
    values = {"safe_action": None, "safe_values": None, "min": None, "max": None, "max_step": None}
    return output_limits("node 'p': parameter ports.targets", "targets", (3,), {**values, **given})


def ramped(measured=None, **given):
    guard = OutputGuard.of("p", [port()], {"targets": limits(blend_s=0.1, **given)}, RATE_HZ)
    if measured is not None:
        guard.ramps[0].ramp.measured = lambda: np.asarray(measured, dtype=np.float64)
    return guard


def test_a_blend_moves_linearly_from_the_measured_position_to_the_policys_target():
    measured = np.array([1.0, -1.0, 0.5])
    guard = ramped(measured)
    guard.begin_blends()
    rng = np.random.default_rng(0)
    for k in range(1, 8):  # 0.1 s at 50 Hz: 5 commands
        target = rng.normal(size=3).astype(np.float32)
        (out,) = guard.apply([target.copy()], counters())
        weight = min(k / 5, 1.0)
        np.testing.assert_allclose(out, measured + weight * (target - measured), atol=1e-6)
        assert bool(guard.blending()) == (k < 5)


def test_without_a_measured_position_a_blend_starts_from_the_last_command():
    guard = ramped()
    first = np.array([0.2, 0.2, 0.2], dtype=np.float32)
    guard.apply([first.copy()], counters())
    guard.begin_blends()
    target = np.array([1.2, -0.8, 0.2], dtype=np.float32)
    (out,) = guard.apply([target.copy()], counters())
    np.testing.assert_allclose(out, first + 0.2 * (target - first), atol=1e-6)
    assert guard.blending()["targets"]["from"] == "last command"


def test_a_blend_with_nothing_to_start_from_is_skipped_and_said():
    guard = ramped()
    guard.begin_blends()
    target = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    (out,) = guard.apply([target.copy()], counters())
    np.testing.assert_array_equal(out, target)
    assert guard.unstarted == ["targets"] and not guard.blending()


def test_a_blend_whose_measured_position_is_still_to_come_waits_for_it():
    guard = ramped()
    assert guard.awaiting_start() == []  # no blend pending
    measured = [None]
    guard.ramps[0].ramp.measured = lambda: measured[0]
    guard.begin_blends()
    assert guard.awaiting_start() == ["targets"]
    measured[0] = np.array([1.0, -1.0, 0.5])
    assert guard.awaiting_start() == []
    target = np.array([2.0, 0.0, 0.5], dtype=np.float32)
    (out,) = guard.apply([target.copy()], counters())
    np.testing.assert_allclose(out, measured[0] + 0.2 * (target - measured[0]), atol=1e-6)
    measured[0] = None  # a port that published starts from its last command instead
    guard.begin_blends()
    assert guard.awaiting_start() == []


def test_limits_apply_on_top_of_the_blend():
    guard = ramped(np.zeros(3), max_step=0.05, max=0.12)
    guard.apply([np.zeros(3, dtype=np.float32)], counters())  # published: 0
    guard.begin_blends()
    data = counters()
    outs = [guard.apply([np.full(3, 1.0, dtype=np.float32)], data)[0] for _ in range(5)]
    # blended 0.2, 0.4, ...; then at most 0.05 from the last published, then at most 0.12
    np.testing.assert_allclose([o[0] for o in outs], [0.05, 0.1, 0.12, 0.12, 0.12], atol=1e-6)
    assert data.step_limited == 5 and data.clamped == 3


def test_a_played_port_is_blended_per_result_then_interpolated_and_limited_per_target():
    guard = ramped(np.zeros(3), max=0.5)
    (played,) = guard.hand_over({0}).values()
    player = TargetPlayer(OutputRate("targets", 0, 200.0, "linear", 1 / RATE_HZ), "float32")
    player.published(np.zeros(3))
    guard.begin_blends()
    target = np.full(3, 1.0, dtype=np.float32)
    (result,) = guard.apply([target.copy()], counters())
    np.testing.assert_allclose(result, 0.2, atol=1e-6)  # blended, not yet limited
    player.target(result)
    ticks = []
    for _ in range(4):  # 200 Hz over one 50 Hz period: 4 targets
        value, _, _ = played.apply(player.next())
        player.published(value)
        ticks.append(float(value[0]))
    np.testing.assert_allclose(ticks, [0.05, 0.1, 0.15, 0.2], atol=1e-6)
    for _ in range(4):  # the next results blend on; their targets hit the limit
        (result,) = guard.apply([target.copy()], counters())
    player.target(result)  # 1.0 * 0.8 + 0 = 0.8 blended, 0.5 after the per-target limit
    value, clamped, _ = played.apply(player.next())
    assert clamped is False
    for _ in range(3):
        value, clamped, _ = played.apply(player.next())
    np.testing.assert_allclose(value, 0.5, atol=1e-6)
    assert clamped


def test_blend_s_needs_a_rate_and_a_float_port():
    with pytest.raises(StartupError, match="rate_hz"):
        OutputGuard.of("p", [port()], {"targets": limits(blend_s=0.1)}, None)
    with pytest.raises(StartupError, match="float outputs only"):
        OutputGuard.of("p", [port(dtype="int32")], {"targets": limits(blend_s=0.1)}, RATE_HZ)
    with pytest.raises(StartupError, match="blend_s must be a number"):
        limits(blend_s=-1.0)
    with pytest.raises(StartupError, match="blend_from is set but"):
        limits(blend_from="joint_pos")


def test_the_first_element_outside_its_range_is_found_with_its_bound():
    low, high = np.array([-1.0, -2.0, -3.0]), np.array([1.0])
    assert first_outside(np.array([0.0, 1.5, 0.0]), low, high) == (1, "max", 1.0, 1.5)
    assert first_outside(np.array([0.0, -2.5, 0.0]), low, high) == (1, "min", -2.0, -2.5)
    assert first_outside(np.array([0.0, np.nan, 0.5]), low, high) is None


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"min": [1.0, 2.0]}, "min"),
        ({"min": 2.0, "max": 1.0}, "exceeds"),
        ({"max": 1.0, "on_out_of_domain": "ignore"}, "on_out_of_domain must be one of"),
        ({"on_out_of_domain": "safe"}, "no min / max is set"),
    ],
)
def test_bad_input_bounds_are_startup_errors_that_name_the_parameter(given, says):
    with pytest.raises(StartupError, match=says):
        input_bounds("node 'p': parameter ports.joint_vel", "joint_vel", (3,), given, "drop")


def test_an_input_range_takes_the_nodes_action_unless_its_own():
    bounds = input_bounds("where", "joint_vel", (3,), {"max": 2.0}, "safe")
    assert bounds.action == "safe" and bounds.low is None
    own = input_bounds("where", "joint_vel", (3,), {"max": 2.0, "on_out_of_domain": "drop"}, "x")
    assert own.action == "drop"


def test_a_latch_stops_commands_until_released_then_a_fresh_set_commands():
    gate = CommandGate()
    gate.activate(0.0)
    assert gate.admit(1.0, {"a": 0.5}, ["a"])
    assert gate.latch() and not gate.latch()  # latched once
    assert gate.safe and not gate.commanding
    assert not gate.admit(2.0, {"a": 1.5}, ["a"])
    assert gate.unlatch(3.0)
    assert not gate.admit(3.5, {"a": 2.5}, ["a"])  # gathered before the release
    assert gate.admit(4.0, {"a": 3.2}, ["a"])


def test_activate_releases_a_latch():
    gate = CommandGate()
    gate.activate(0.0)
    gate.latch()
    gate.deactivate()
    gate.activate(1.0)
    assert not gate.latched and gate.commanding


def test_an_output_guarded_by_drop_or_safe_is_checked_raw_not_clamped():
    guard = OutputGuard.of("p", [port()], {"targets": limits(max=1.0, on_out_of_domain="safe")})
    guard.name_elements({"targets": ("hip", "knee", "ankle")})
    raw = np.array([0.5, 1.5, 0.0], dtype=np.float32)
    found = guard.out_of_domain([raw])
    assert (found.port, found.element, found.value, found.action) == (
        "targets",
        "knee",
        1.5,
        "safe",
    )
    assert found.describe() == "output targets[knee] = 1.5 above max 1"
    (out,) = guard.apply([np.array([0.5, 0.9, 0.0], dtype=np.float32)], counters())
    np.testing.assert_array_equal(out, np.float32([0.5, 0.9, 0.0]))
    clamping = OutputGuard.of("p", [port()], {"targets": limits(max=1.0)})
    assert clamping.out_of_domain([raw]) is None  # clamp (default): clamped instead


class _Node:
    """What subscribe_measured asks of an rclpy node: subscriptions, whose callbacks it keeps."""

    def __init__(self):
        self.callbacks = []

    def create_subscription(self, message_class, topic, callback, qos, event_callbacks=None):
        self.callbacks.append(callback)
        return SimpleNamespace(topic_name=topic)


@pytest.mark.parametrize("owns_input", [True, False], ids=["fused", "apart"])
def test_a_node_that_reads_the_measured_input_starts_its_blend_from_its_own_set(seed, owns_input):
    """The seed's policy ramps in from ``state``: a fused node, whose preprocess stage reads
    ``state``, takes the value of the set it runs on, ahead of its measured subscription (which
    may not have taken that message yet); a node apart only has the subscription."""
    from std_msgs.msg import Float32MultiArray

    from leapp_ros.node.measured_position import subscribe_measured
    from leapp_ros.run.processes import load_plan

    plan = load_plan(seed.path)
    nodes = {node.name: node for node in plan.nodes}
    action = limits(blend_s=0.1, blend_from="state")
    policy = SimpleNamespace(
        name="policy",
        plan=nodes["policy"],
        values=[None],
        guard=OutputGuard.of("policy", [port("action", shape=(6,))], {"action": action}, 50.0),
        measured_cell=lambda reader: [0],
    )
    preprocess = SimpleNamespace(
        name="preprocess", plan=nodes["preprocess"], values=[None, None], guard=None
    )
    node = _Node()
    subscribe_measured(node, plan, [preprocess, policy] if owns_input else [policy])
    measured = policy.guard.ramps[0].ramp.measured
    assert measured() is None
    (take,) = node.callbacks
    take(Float32MultiArray(data=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))
    np.testing.assert_allclose(measured(), [1, 2, 3, 4, 5, 6])
    preprocess.values[0] = np.array([9.0, 8.0, 7.0, 6.0, 5.0, 4.0], dtype=np.float32)
    expected = [9, 8, 7, 6, 5, 4] if owns_input else [1, 2, 3, 4, 5, 6]
    np.testing.assert_allclose(measured(), expected)
