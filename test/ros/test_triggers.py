"""A node fires on its chosen triggers and uses the newest value of every other input, over
real DDS, in every deployment mode.

The seed's preprocess node (and the fused node) run with ``triggers: [state]``: a state fires
the node, a velocity is a newest-value input. So a velocity sent once answers every state
after it (a slow command input never gates a fast sensor), each run computed as eager PyTorch
on that state and the newest velocity; a run whose velocity never came, or came longer than
``max_input_age`` ago, is skipped and counted ``stale``. The nodes keep their deployed QoS
(best effort, depth 1); each message is taken (the node's status counts it) before the next
one goes on its topic.

The first test needs a graph whose velocity has not come yet: it runs first in each mode
(pytest keeps the file's order within a module-scoped graph).
"""

from __future__ import annotations

import pytest
import torch
import yaml
from support.ros import eager_seed

from leapp_ros.testing import Deployment, GraphOptions, GraphUnderTest

pytestmark = pytest.mark.ros

MAX_AGE_S = 4.0  # generous: a fresh velocity must still be fresh a few steps later, however loaded
STATES_PER_VELOCITY = 4
ACTION = "policy/action"


@pytest.fixture(scope="module", params=list(Deployment))
def graph(request, seed, tmp_path_factory):
    def section():  # a new dict for each node: rcl refuses YAML aliases
        return {"ros__parameters": {"triggers": ["state"], "max_input_age": MAX_AGE_S}}

    params = tmp_path_factory.mktemp("triggers") / "params.yaml"
    nodes = ("/torch_pipeline/preprocess", "/torch_pipeline/leapp_fused")
    params.write_text(yaml.safe_dump({node: section() for node in nodes}))
    options = GraphOptions(request.param, params_file=params)
    with GraphUnderTest(seed.path, options) as started:
        yield started


def preprocess(graph) -> dict:
    return graph.wait_received()["preprocess"]


def test_a_newest_value_input_that_never_came_keeps_the_node_from_firing(graph):
    before = preprocess(graph)
    assert before["received_on"].get("/torch_pipeline/preprocess/velocity", 0) == 0, (
        "this test needs a graph that never got a velocity: run it first"
    )
    graph.publish({"preprocess/state": torch.randn(6)})
    after = preprocess(graph)
    assert after["stale"] == before["stale"] + 1, "the skipped set is counted stale"
    assert after["runs"] == before["runs"] and graph.received(ACTION) == []


def test_a_state_fires_the_node_with_the_newest_velocity(graph, seed):
    runs = preprocess(graph)["runs"]
    for _ in range(3):
        velocity = torch.randn(3)
        graph.publish({"preprocess/velocity": velocity})
        graph.wait_received()  # the node holds this velocity from now on
        for _ in range(STATES_PER_VELOCITY):
            state = torch.randn(6) * 2
            out = graph.step({"preprocess/state": state}, outputs=[ACTION])
            _, expected = eager_seed(seed, state, velocity)
            torch.testing.assert_close(out[ACTION], expected, rtol=1e-5, atol=1e-5)
    status = preprocess(graph)
    assert status["runs"] == runs + 3 * STATES_PER_VELOCITY, "every state ran"
    assert status["stale"] == 1, "only the set before the first velocity was skipped"


def test_a_newest_value_input_older_than_max_input_age_skips_the_set(graph, seed):
    graph.publish({"preprocess/velocity": torch.randn(3)})
    before = preprocess(graph)  # the node holds the velocity from now on (or earlier)
    answers = len(graph.received(ACTION))
    graph.spin(MAX_AGE_S + 0.5)  # what is tested: the velocity grows older than allowed
    graph.publish({"preprocess/state": torch.randn(6)})
    after = preprocess(graph)
    assert after["stale"] == before["stale"] + 1, "the stale set is counted"
    assert after["runs"] == before["runs"] and len(graph.received(ACTION)) == answers
    # a fresh velocity, and the next state runs on it
    state, velocity = torch.randn(6), torch.randn(3)
    graph.publish({"preprocess/velocity": velocity})
    graph.wait_received()
    out = graph.step({"preprocess/state": state}, outputs=[ACTION])
    torch.testing.assert_close(out[ACTION], eager_seed(seed, state, velocity)[1])
