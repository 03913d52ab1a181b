"""Fused mode over real DDS: one leapp_fused node runs the whole seed pipeline per tick, answers
random inputs like eager PyTorch (and a fused graph of a perturbed weight matrix fails that
check), leaves the intermediate topics out when asked, drops malformed and non-finite inputs
without dying, passes leapp-ros verify --fused on the recorded example and random ticks (and
fails it, naming the topic, when the graph runs other weights); and the ways to start it refuse
what does not fit (another deployment as well, a choice of some nodes)."""

from __future__ import annotations

import array
import math
import re
import shutil
from pathlib import Path

import pytest
import torch
from support.ros import check_obs_only_while_echoed, eager_seed, exited, ros_graph
from support.runner import SeedIO
from support.weights import export_perturbed_seed, swap_artifact

from leapp.spec import load
from leapp_ros.plan.pipeline import PlanError, make_plan
from leapp_ros.run.deployment import Deployment, GraphOptions
from leapp_ros.run.processes import plan_processes
from leapp_ros.testing import GraphUnderTest, Probe, reserve_domain_id
from leapp_ros.tools.cli import main

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module")
def fused_graph(seed):
    with GraphUnderTest(seed.path, Deployment.FUSED) as graph:
        yield graph


def fused_args(spec_path, *parameters: str) -> list[str]:
    args = ["--ros-args", "-r", "__ns:=/torch_pipeline", "-p", f"spec_path:={spec_path}"]
    for parameter in parameters:
        args += ["-p", parameter]
    return args


def assert_answers_like_eager(graph: GraphUnderTest, seed, ticks: int = 20) -> None:
    """``ticks`` random state / velocity pairs, each answered with eager PyTorch's obs and
    action (else an AssertionError naming the tick and the output)."""
    for tick in range(ticks):
        state, velocity = torch.randn(6) * 3, torch.randn(3)
        out = graph.step({"preprocess/state": state, "preprocess/velocity": velocity})
        obs, action = eager_seed(seed, state, velocity)
        for key, expected in (("preprocess/obs", obs), ("policy/action", action)):
            where = f"tick {tick}, {key}"
            torch.testing.assert_close(out[key], expected, rtol=1e-5, atol=1e-5,
                                       msg=lambda m, w=where: f"{w}: {m}")  # fmt: skip


def test_a_fused_graph_answers_every_tick_like_eager_pytorch(fused_graph, seed):
    assert_answers_like_eager(fused_graph, seed)


def test_a_fused_graph_of_a_perturbed_weight_matrix_fails_the_eager_check(seed, tmp_path):
    """The same pipeline, the policy's weight matrix perturbed and its bias kept: the first
    random tick's action differs from eager PyTorch's."""
    other = export_perturbed_seed(tmp_path, seed).path
    wrong = r"^tick 0, policy/action: Tensor-likes are not close"
    with (
        GraphUnderTest(other, Deployment.FUSED) as graph,
        pytest.raises(AssertionError, match=wrong),
    ):
        assert_answers_like_eager(graph, seed)


def test_malformed_and_nonfinite_inputs_are_dropped_counted_and_the_node_goes_on(
    fused_graph, seed
):
    from std_msgs.msg import Float32MultiArray

    state_topic, velocity_topic = (f"/torch_pipeline/preprocess/{port}"
                                   for port in ("state", "velocity"))  # fmt: skip
    before = fused_graph.wait_received()["preprocess"]

    def send(topic: str, values, counter: str) -> None:
        """One message through the harness's publisher, taken and counted before the next
        (the input keeps only the last message: a second one sent at once could replace the
        first before the node takes it)."""
        fused_graph.publish({topic: Float32MultiArray(data=array.array("f", values))})
        after = fused_graph.wait_received()["preprocess"]
        assert after[counter] == before[counter] + 1, (counter, after)
        assert after["runs"] == before["runs"], "a spoilt set ran"
        before[counter] += 1

    # each bad state comes with its velocity, and the pair is dropped whole
    send(state_topic, [1.0] * 5, "dropped")  # 5 of 6 values
    send(velocity_topic, [0.0] * 3, "incomplete_sets")
    send(state_topic, [math.nan] * 6, "nonfinite_inputs")
    send(velocity_topic, [0.0] * 3, "incomplete_sets")
    state, velocity = torch.randn(6), torch.randn(3)
    out = fused_graph.step({"preprocess/state": state, "preprocess/velocity": velocity})
    torch.testing.assert_close(out["policy/action"], eager_seed(seed, state, velocity)[1])
    assert fused_graph.status()["preprocess"]["errors"] == 0


def test_publish_intermediate_false_leaves_the_intermediate_topics_out(seed, tmp_path):
    starts = [("leapp_ros.node.fused_node", fused_args(seed.path, "publish_intermediate:=false"))]
    with ros_graph(tmp_path, starts) as (probe, processes, _):
        probe.wait_ready("/torch_pipeline", ["preprocess", "policy"], check=exited(processes))
        state, velocity = torch.randn(6), torch.randn(3)
        expected = eager_seed(seed, state, velocity)[1]
        SeedIO(probe).step(state, velocity, expected, timeout_s=20)
        assert probe.node.count_publishers("/torch_pipeline/policy/action") == 1
        assert probe.node.count_publishers("/torch_pipeline/preprocess/obs") == 0


def test_an_intermediate_is_encoded_only_while_someone_subscribes(seed):
    """Over real DDS: with nobody on ``obs`` the fused node publishes no ``obs`` and its
    actions still match eager PyTorch; once an echo subscribes, it gets every ``obs``, equal to
    eager PyTorch's."""
    from rclpy.parameter import Parameter

    from leapp_ros.node.fused_node import FusedPipelineNode

    spec_path = str(next(seed.path.glob("*.yaml")))
    with (
        reserve_domain_id() as domain_id,
        Probe(domain_id) as probe,
        Probe(domain_id, "echo") as echo,
    ):
        node = FusedPipelineNode(
            namespace="/torch_pipeline",
            context=probe.context,
            parameter_overrides=[Parameter("spec_path", Parameter.Type.STRING, spec_path)],
        )
        try:
            probe.executor.add_node(node)
            (obs_publisher,) = [
                p for p in node._output_publishers if p.topic_name.endswith("/obs")
            ]
            check_obs_only_while_echoed(seed, probe, echo, obs_publisher, local_readers=0)
        finally:
            node.destroy_node()


def test_verify_fused_replays_the_example_and_random_ticks_through_one_node(seed, capsys):
    assert main(["verify", str(seed.path), "--fused"]) == 0
    report = capsys.readouterr().out
    assert "21 of 21 samples replayed on /torch_pipeline (fused) against" in report
    assert "then leapp.Pipeline on 20 random ticks within their range (seed 0)" in report


def test_verify_fused_fails_naming_the_topic_when_the_node_runs_other_weights(
    seed, tmp_path, capsys, monkeypatch
):
    """The fused node gets a policy whose weight matrix is perturbed (bias kept) once the
    reference is computed, as a stale model file would be deployed: the recorded all-zero
    example passes, every random tick fails on /torch_pipeline/policy/action."""
    other = export_perturbed_seed(tmp_path / "other", seed).path
    export = Path(shutil.copytree(seed.path, tmp_path / "torch_pipeline"))
    start = GraphUnderTest.start

    def start_on_the_other_policy(graph):
        swap_artifact(export, other, "policy.onnx")
        return start(graph)

    monkeypatch.setattr(GraphUnderTest, "start", start_on_the_other_policy)
    assert main(["verify", str(export), "--fused"]) == 1
    report = capsys.readouterr().out
    assert "verify FAILED: 1 of 2 topics failed" in report
    assert re.search(
        r"^  /torch_pipeline/policy/action: sample 1 \(random tick 0\): .*; 19 more sample",
        report,
        re.MULTILINE,
    ), report


def test_fused_takes_no_choice_of_some_nodes_but_all_of_them(seed):
    plan = make_plan(load(seed.path))
    with pytest.raises(PlanError, match="a fused deployment runs every node of the pipeline"):
        plan_processes(plan, GraphOptions(Deployment.FUSED, nodes=("policy",)))
    options = GraphOptions(Deployment.FUSED, nodes=("preprocess", "policy"))
    (process,) = plan_processes(plan, options)
    assert (process.executable, process.node_name) == ("leapp_fused", "leapp_fused")
    assert process.pipeline_nodes == ("preprocess", "policy")


TWO_DEPLOYMENTS = [["--fused", "--composed"], ["--deployment", "fused", "--composed"]]


@pytest.mark.parametrize("choice", TWO_DEPLOYMENTS)
def test_run_refuses_two_deployments(seed, capsys, choice):
    with pytest.raises(SystemExit) as caught:
        main(["run", str(seed.path), *choice])
    assert caught.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
