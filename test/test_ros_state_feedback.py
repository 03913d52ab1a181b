"""Recurrent state and feedback through the live ROS 2 graph: a GRU policy with explicit state
(jit and onnx) and a pipeline feeding its previous action back into its preprocessing, stepped
50 times over real topics (one process per node and composed) equal the eager loop at every
step, and ``leapp-ros verify`` replays their recorded examples."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import leapp
from leapp import annotate
from leapp import session as session_module
from leapp_ros.cli import main
from leapp_ros.testing import GraphUnderTest

torch.manual_seed(7)
GRU = torch.nn.GRUCell(4, 6).eval()
HEAD = torch.nn.Linear(6, 2).eval()
ENCODER = torch.nn.Linear(5 + 2, 5).eval()
FIRST_ACTION = torch.full((2,), 0.25)
STEPS = 50
TRACED_TICKS = 5
MODES = {"processes": False, "composed": True}


def gru_policy(obs, h, backend="jit"):
    """One tick of a recurrent policy with explicit state ``h``."""
    obs = annotate.input_tensors("policy", {"obs": obs})
    h = annotate.state_tensors("policy", {"h": h})
    h_next = GRU(obs.unsqueeze(0), h.unsqueeze(0)).squeeze(0)
    action = torch.tanh(HEAD(h_next))
    h_next = annotate.update_state("policy", {"h": h_next})
    annotate.output_tensors("policy", {"action": action}, export_with=backend)
    return action, h_next


def preprocess(state, previous_action):
    state, previous_action = annotate.input_tensors(
        "preprocess", {"state": state, "previous_action": previous_action}
    )
    obs = ENCODER(torch.cat([state, previous_action * 0.5]))
    annotate.output_tensors("preprocess", {"obs": obs}, export_with="jit")
    return obs


def act(obs):
    obs = annotate.input_tensors("act", {"obs": obs})
    action = torch.tanh(obs[:2] * 2.0)
    annotate.output_tensors("act", {"action": action}, export_with="onnx")
    return action


def gru_loop(observations, backend="jit"):
    """``[(action, h)]`` of the eager GRU loop from h = 0 (outside a session: plain PyTorch)."""
    h, results = torch.zeros(6), []
    with torch.no_grad():
        for obs in observations:
            action, h = gru_policy(obs, h, backend)
            results.append((action, h))
    return results


def feedback_loop(states):
    """The actions of the eager loop that feeds each action back into the next preprocess."""
    action, actions = FIRST_ACTION, []
    with torch.no_grad():
        for state in states:
            action = act(preprocess(state, action))
            actions.append(action)
    return actions


def export(save_path: Path, name: str, run) -> Path:
    session_module._active = None
    leapp.start(name, save_path=save_path)
    run()
    leapp.stop()
    return leapp.compile_graph().path.parent


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    def observations():
        return [torch.randn(4) for _ in range(TRACED_TICKS)]

    return {
        "gru_jit": export(
            tmp_path_factory.mktemp("gru_jit"), "gru", lambda: gru_loop(observations(), "jit")
        ),
        "gru_onnx": export(
            tmp_path_factory.mktemp("gru_onnx"), "gru", lambda: gru_loop(observations(), "onnx")
        ),
        "loop": export(
            tmp_path_factory.mktemp("loop"),
            "loop",
            lambda: feedback_loop([torch.randn(5) for _ in range(TRACED_TICKS)]),
        ),
    }


@pytest.fixture(
    scope="module",
    params=[(b, m) for b in ("jit", "onnx") for m in MODES],
    ids=lambda p: f"{p[0]}-{p[1]}",
)
def gru_graph(request, exports):
    backend, mode = request.param
    with GraphUnderTest(exports[f"gru_{backend}"], composed=MODES[mode]) as graph:
        yield graph, backend


@pytest.fixture(scope="module", params=list(MODES))
def loop_graph(request, exports):
    with GraphUnderTest(exports["loop"], composed=MODES[request.param]) as graph:
        yield graph


def assert_equal_within_1e_5(actual, expected, step: int) -> None:
    torch.testing.assert_close(
        actual, expected, rtol=0, atol=1e-5, msg=lambda text: f"step {step}: {text}"
    )


def test_gru_state_through_ros_equals_the_eager_loop_at_every_step(gru_graph):
    graph, backend = gru_graph
    observations = [torch.randn(4) for _ in range(STEPS)]
    for step, (obs, (action, h)) in enumerate(
        zip(observations, gru_loop(observations, backend), strict=True)
    ):
        out = graph.step({"policy/obs": obs})
        assert set(out) == {"policy/action", "policy/h"}
        assert_equal_within_1e_5(out["policy/action"], action, step)
        assert_equal_within_1e_5(out["policy/h"], h, step)


def test_previous_action_fed_back_through_ros_equals_the_eager_loop_at_every_step(loop_graph):
    states = [torch.randn(5) for _ in range(STEPS)]
    for step, (state, action) in enumerate(zip(states, feedback_loop(states), strict=True)):
        out = loop_graph.step({"preprocess/state": state})
        assert set(out) == {"preprocess/obs", "act/action"}
        assert_equal_within_1e_5(out["act/action"], action, step)


@pytest.mark.parametrize("name", ["gru_jit", "gru_onnx", "loop"])
def test_verify_replays_the_recorded_state_and_feedback(exports, name, capsys):
    assert main(["verify", str(exports[name])]) == 0
    out = capsys.readouterr().out
    assert f"{TRACED_TICKS} of {TRACED_TICKS} samples replayed" in out
    assert "verify passed" in out
