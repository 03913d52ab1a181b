"""Recurrent state and feedback through the live ROS 2 graph: a GRU policy with explicit state
(jit and onnx) and a pipeline feeding its previous action back into its preprocessing, stepped
50 times over real topics (one process per node, composed and fused) equal the eager loop at
every step, and ``leapp-ros verify`` replays their recorded examples and random ticks after
them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from support.recurrent import feedback_loop, gru_loop

import leapp
from leapp import session as session_module
from leapp_ros.testing import Deployment, GraphUnderTest
from leapp_ros.tools.cli import main

pytestmark = pytest.mark.ros

FIRST_ACTION = torch.full((2,), 0.25)
STEPS = 50
TRACED_TICKS = 5


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
            lambda: feedback_loop([torch.randn(5) for _ in range(TRACED_TICKS)], FIRST_ACTION),
        ),
    }


@pytest.fixture(
    scope="module",
    params=[(b, d) for b in ("jit", "onnx") for d in Deployment],
    ids=lambda p: f"{p[0]}-{p[1]}",
)
def gru_graph(request, exports):
    backend, deployment = request.param
    with GraphUnderTest(exports[f"gru_{backend}"], deployment) as graph:
        yield graph, backend


@pytest.fixture(scope="module", params=list(Deployment), ids=str)
def loop_graph(request, exports):
    with GraphUnderTest(exports["loop"], request.param) as graph:
        yield graph


def assert_equal_within_1e_5(actual, expected, step: int) -> None:
    torch.testing.assert_close(
        actual, expected, rtol=0, atol=1e-5, msg=lambda text: f"step {step}: {text}"
    )


def test_gru_state_through_ros_equals_the_eager_loop_at_every_step(gru_graph):
    graph, backend = gru_graph
    state = "policy/h_out" if backend == "onnx" else "policy/h"  # LEAPP's ONNX name, its topic
    observations = [torch.randn(4) for _ in range(STEPS)]
    for step, (obs, (action, h)) in enumerate(
        zip(observations, gru_loop(observations, backend), strict=True)
    ):
        out = graph.step({"policy/obs": obs})
        assert set(out) == {"policy/action", state}
        assert_equal_within_1e_5(out["policy/action"], action, step)
        assert_equal_within_1e_5(out[state], h, step)


def test_previous_action_fed_back_through_ros_equals_the_eager_loop_at_every_step(loop_graph):
    states = [torch.randn(5) for _ in range(STEPS)]
    expected = feedback_loop(states, FIRST_ACTION)
    for step, (state, action) in enumerate(zip(states, expected, strict=True)):
        out = loop_graph.step({"preprocess/state": state})
        assert set(out) == {"preprocess/obs", "act/action"}
        assert_equal_within_1e_5(out["act/action"], action, step)


@pytest.mark.parametrize("name", ["gru_jit", "gru_onnx", "loop"])
def test_verify_replays_the_recorded_state_and_feedback_then_random_ticks(exports, name, capsys):
    """The recorded ticks, then 20 random ones against leapp.Pipeline continuing from the
    state and feedback the recorded ones left, in one run of the graph."""
    assert main(["verify", str(exports[name])]) == 0
    out = capsys.readouterr().out
    samples = TRACED_TICKS + 20
    assert f"{samples} of {samples} samples replayed" in out
    assert f"the recorded examples ({TRACED_TICKS} tick(s), eager PyTorch while tracing)" in out
    assert "verify passed" in out
