"""A policy switch and the node's own state, over real DDS in every deployment mode.

A GRU policy with explicit state ``h`` (one node, :func:`support.switch_policies.gru_step`)
runs as A (``h`` starts at 0); it is switched to B (other weights, ``h`` starting at 0.1):
from the take-over on every action and ``h`` equal eager PyTorch of B started from B's
initial ``h``; then back to A with ``carry_state: [h]`` (set with ``load`` in one atomic
request, as ``leapp-ros switch --carry-state h`` does): eager PyTorch of A continuing from
the ``h`` B reached. The switch is asked between ticks and each take-over waits for the
status ``ready`` (an event), so the next tick is the new policy's first.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support.switch_policies import export_gru_variant, gru_step

from leapp_ros.testing import Deployment, GraphUnderTest

pytestmark = [pytest.mark.ros, pytest.mark.slow]

WAIT_S = 30.0
TICKS = 11  # ticks after each take-over: the probation (10 runs) is over by the next request


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    return (
        export_gru_variant(tmp_path_factory.mktemp("gru_a"), seed=21, first_h=0.0),
        export_gru_variant(tmp_path_factory.mktemp("gru_b"), seed=22, first_h=0.1),
    )


@pytest.fixture(scope="module", params=list(Deployment), ids=str)
def graph(request, exports):
    with GraphUnderTest(exports[0].path, request.param) as graph:
        yield graph


def ask(graph: GraphUnderTest, path, carry: list[str]) -> object:
    """Set ``carry_state`` and ``load`` of the graph's node in one atomic request."""
    from rcl_interfaces.srv import SetParametersAtomically
    from rclpy.parameter import Parameter

    name = "leapp_fused" if graph.fused else "policy"
    probe = graph.probe
    client = probe.node.create_client(
        SetParametersAtomically, f"{graph.plan.namespace}/{name}/set_parameters_atomically"
    )
    try:
        probe.spin_until(client.service_is_ready, WAIT_S, client.srv_name)
        parameters = [
            Parameter("carry_state", Parameter.Type.STRING_ARRAY, carry).to_parameter_msg(),
            Parameter("load", Parameter.Type.STRING, str(path)).to_parameter_msg(),
        ]
        future = client.call_async(SetParametersAtomically.Request(parameters=parameters))
        probe.spin_until(future.done, WAIT_S, "the answer to load")
        return future.result().result
    finally:
        probe.node.destroy_client(client)


def switch_state(graph: GraphUnderTest) -> str | None:
    return (graph.status()["policy"].get("switch") or {}).get("state")


def run_ticks(graph, modules, h, rng, ticks=TICKS):
    """``ticks`` ticks, each checked against eager PyTorch of ``modules`` from ``h``; the
    ``h`` reached."""
    for tick in range(ticks):
        obs = torch.from_numpy(rng.normal(size=4).astype(np.float32))
        got = graph.step({"policy/obs": obs})
        with torch.no_grad():
            action, h = gru_step(modules, obs, h)
        np.testing.assert_allclose(got["policy/action"], action, atol=1e-5, err_msg=f"{tick}")
        np.testing.assert_allclose(got["policy/h"], h, atol=1e-5, err_msg=f"h at {tick}")
    return h


def test_states_start_from_the_new_initial_values_or_are_carried_by_name(graph, exports):
    a, b = exports
    rng = np.random.default_rng(4)
    h = run_ticks(graph, a.modules, a.first_h, rng)
    for export, carry in ((b, []), (a, ["h"])):
        result = ask(graph, export.path, carry)
        assert result.successful, result.reason
        graph.probe.spin_until(lambda: switch_state(graph) == "ready", WAIT_S, "the new model")
        start = h if carry else export.first_h
        h = run_ticks(graph, export.modules, start, rng)
        graph.probe.spin_until(lambda: switch_state(graph) == "switched", WAIT_S, "switched")


def test_carrying_a_state_the_node_lacks_is_refused_naming_its_states(graph, exports):
    result = ask(graph, exports[1].path, ["c"])
    assert not result.successful
    assert "carry_state names ['c'], which are no state inputs (these are: ['policy/h'])" in (
        result.reason
    )
