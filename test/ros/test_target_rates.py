"""Targets at a controller's rate over real DDS, in every deployment: the seed's policy runs
once per input set, at a stated ``rate_hz`` of 10 Hz, and its ``action`` goes out at 100 Hz
(``ports.action.output_rate_hz``), in a straight line from the last published value to each
new result over one policy period (``interpolate: linear``), every target within ``min`` /
``max`` and at most ``max_step`` from the one before.

Every message is checked value by value against eager PyTorch's result and the documented
formula (leapp_ros.plan.output_rates) with the limits applied in publishing order. The
harness's subscription is reliable and deep, so it sees every target; where a result comes
in, between two targets, is found from the values (the first target that differs from the
held value), not from a clock.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from support.rates import expected_targets, guarded
from support.ros import eager_seed

from leapp_ros.testing import Deployment, GraphOptions, GraphUnderTest

pytestmark = pytest.mark.ros

POLICY_HZ, OUTPUT_HZ = 10.0, 100.0
STEPS = 10  # n: targets per policy period
LOW, HIGH, MAX_STEP = -0.6, 0.6, 0.04
ACTION = "policy/action"
INPUTS = ("preprocess/state", "preprocess/velocity")


def target_parameters(**extra) -> dict:
    """The ``/**`` section: every node at 10 Hz, ``action`` played out at 100 Hz."""
    action = {"output_rate_hz": OUTPUT_HZ, "interpolate": "linear", **extra}
    return {"/**": {"ros__parameters": {"rate_hz": POLICY_HZ, "ports": {"action": action}}}}


@pytest.fixture(scope="module", params=list(Deployment))
def graph(request, seed, tmp_path_factory):
    params = tmp_path_factory.mktemp("targets") / "params.yaml"
    limits = {"min": LOW, "max": HIGH, "max_step": MAX_STEP}
    params.write_text(yaml.safe_dump(target_parameters(**limits)))
    with GraphUnderTest(seed.path, GraphOptions(request.param, params_file=params)) as started:
        yield started


def inputs_that_reach_the_limits(seed, last: np.ndarray) -> tuple[dict, np.ndarray]:
    """Fresh random inputs whose action lies partly outside [LOW, HIGH] and whose ramp from
    ``last`` steps further than MAX_STEP somewhere (so both limits act); their action."""
    for _ in range(200):
        state, velocity = torch.randn(6) * 3, torch.randn(3) * 3
        action = eager_seed(seed, state, velocity)[1].numpy().astype(np.float64)
        outside = np.any((action < LOW) | (action > HIGH))
        if outside and np.max(np.abs(action - last)) / STEPS > MAX_STEP:
            return dict(zip(INPUTS, (state, velocity), strict=True)), action
    raise AssertionError("no random input reached the limits")


def targets(graph) -> list[np.ndarray]:
    return [value.numpy().astype(np.float64) for value in graph.received(ACTION)]


def wait_targets(graph, count: int) -> list[np.ndarray]:
    graph.probe.spin_until(
        lambda: len(graph.received(ACTION)) >= count, graph.timeout_s, f"{count} targets"
    )
    return targets(graph)


def test_targets_go_linearly_to_each_result_within_the_limits(graph, seed):
    assert graph.received(ACTION) == [], "this test needs a graph that published nothing yet"
    given, first = inputs_that_reach_the_limits(seed, np.zeros(6))
    graph.publish(given)
    held = guarded([first], None, LOW, HIGH, MAX_STEP)[0]  # nothing before: p = c_0
    for value in wait_targets(graph, 3):
        np.testing.assert_allclose(value, held, atol=1e-6)  # held at 100 Hz
    before = graph.wait_received()["policy"]  # exact: every input taken
    given, second = inputs_that_reach_the_limits(seed, held)
    graph.publish(given)
    count = len(targets(graph))

    def ramp_start() -> int | None:  # the first target that is not the held value
        got = targets(graph)
        moved = (i for i in range(count, len(got)) if not np.allclose(got[i], held, atol=1e-7))
        return next(moved, None)

    start = graph.probe.spin_until(ramp_start, graph.timeout_s, "a ramp")  # (never 0)
    compared = 6 * STEPS  # the ramp, then max_step catching up, then the clamped result held
    received = wait_targets(graph, start + compared)
    ramp = expected_targets(second[None], held, STEPS, compared, linear=True)
    expected = guarded(ramp, held, LOW, HIGH, MAX_STEP)
    clamped = np.clip(second.astype(np.float32), LOW, HIGH)
    np.testing.assert_allclose(expected[-1], clamped, atol=1e-6, err_msg="window too short")
    for index, (value, want) in enumerate(zip(received[start:], expected, strict=False)):
        np.testing.assert_allclose(value, want, atol=1e-6, err_msg=f"target {index + 1}")
    after = graph.wait_received()["policy"]
    assert after["runs"] == before["runs"] + 1, "one result, many targets"
    graph.probe.spin_until(  # the counters of what the limits changed, as soon as reported
        lambda: (
            (s := graph.status()["policy"])["clamped"] > before["clamped"]
            and s["step_limited"] > before["step_limited"]
        ),
        graph.timeout_s,
        "clamped and step-limited targets counted",
    )
