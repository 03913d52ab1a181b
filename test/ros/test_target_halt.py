"""The safe action stops targets between results at once, over real DDS, in every deployment.

The seed's ``action`` goes out at 100 Hz, linearly towards each result over one period of a
0.001 Hz policy: 100 000 targets per ramp, so a ramp is under way whenever the test acts. An
e-stop in the middle of it publishes the safe values, and no target of the old ramp follows:
after the release the next result ramps from the safe values (the value published last), and
the targets after the safe values are exactly that new ramp (documented formula, eager
PyTorch), with no target of the old one between.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from support.rates import expected_targets
from support.ros import eager_seed

from leapp_ros.testing import Deployment, GraphOptions, GraphUnderTest

pytestmark = pytest.mark.ros

OUTPUT_HZ, POLICY_HZ = 100.0, 0.001
STEPS = OUTPUT_HZ / POLICY_HZ
ESTOP = "/target_halt_estop"
ACTION = "policy/action"
SAFE = np.zeros(6)


@pytest.fixture(scope="module", params=list(Deployment))
def graph(request, seed, tmp_path_factory):
    action = {"output_rate_hz": OUTPUT_HZ, "interpolate": "linear", "safe_values": [0.0] * 6}
    section = {"rate_hz": POLICY_HZ, "estop_topic": ESTOP, "ports": {"action": action}}
    params = tmp_path_factory.mktemp("halt") / "params.yaml"
    params.write_text(yaml.safe_dump({"/**": {"ros__parameters": section}}))
    with GraphUnderTest(seed.path, GraphOptions(request.param, params_file=params)) as started:
        yield started


def send(graph, seed) -> np.ndarray:
    """Fresh inputs, sent once; their action (eager PyTorch), float64."""
    state, velocity = torch.randn(6), torch.randn(3)
    graph.publish({"preprocess/state": state, "preprocess/velocity": velocity})
    return eager_seed(seed, state, velocity)[1].numpy().astype(np.float64)


def targets(graph) -> list[np.ndarray]:
    return [value.numpy().astype(np.float64) for value in graph.received(ACTION)]


def wait_for(graph, condition, what: str) -> list[np.ndarray]:
    graph.probe.spin_until(lambda: condition(targets(graph)), graph.timeout_s, what)
    return targets(graph)


def test_an_estop_in_the_middle_of_a_ramp_stops_it_at_once(graph, seed):
    from std_msgs.msg import Bool

    from leapp_ros.testing.probe import qos

    first = send(graph, seed)
    wait_for(graph, lambda got: len(got) >= 2, "the first result held")
    second = send(graph, seed)
    wait_for(graph, lambda got: not np.allclose(got[-1], first, atol=1e-7), "a ramp under way")
    estop = graph.probe.node.create_publisher(Bool, ESTOP, qos(transient_local=True, depth=1))
    estop.publish(Bool(data=True))
    got = wait_for(graph, lambda got: any(np.array_equal(v, SAFE) for v in got), "the safe values")
    halted = next(i for i, value in enumerate(got) if np.array_equal(value, SAFE))
    ramp = got[:halted]
    assert not np.allclose(ramp[-1], second, atol=1e-3), "the ramp was far from its end"
    estop.publish(Bool(data=False))
    graph.probe.spin_until(
        lambda: not any(s.get("estop") for s in graph.status().values()), 30, "released"
    )
    third = send(graph, seed)
    count = 5
    got = wait_for(graph, lambda got: len(got) >= halted + 1 + count, "the new ramp")
    expected = expected_targets(third[None], SAFE, STEPS, count, linear=True)
    after = got[halted + 1 : halted + 1 + count]
    for index, (value, want) in enumerate(zip(after, expected, strict=True)):
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-9, err_msg=f"target {index}")
    graph.probe.node.destroy_publisher(estop)
