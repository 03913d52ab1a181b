"""Fused mode over real DDS: one leapp_fused node runs the whole seed pipeline per tick, answers
like eager PyTorch, leaves the intermediate topics out when asked, drops malformed and
non-finite inputs without dying, passes leapp-ros verify --fused; and the ways to start it
refuse what does not fit (composed, a choice of nodes)."""

from __future__ import annotations

import array
import math

import pytest
import torch
from support.ros import check_obs_only_while_echoed, eager_seed, exited, ros_graph
from support.runner import SeedIO

from leapp.spec import load
from leapp_ros.plan.pipeline import PlanError, make_plan
from leapp_ros.run.processes import plan_processes
from leapp_ros.testing import GraphUnderTest, Probe, reserve_domain_id
from leapp_ros.tools.cli import main

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module")
def fused_graph(seed):
    with GraphUnderTest(seed.path, fused=True) as graph:
        yield graph


def fused_args(spec_path, *parameters: str) -> list[str]:
    args = ["--ros-args", "-r", "__ns:=/torch_pipeline", "-p", f"spec_path:={spec_path}"]
    for parameter in parameters:
        args += ["-p", parameter]
    return args


def test_a_fused_graph_answers_every_tick_like_eager_pytorch(fused_graph, seed):
    for _ in range(20):
        state, velocity = torch.randn(6) * 3, torch.randn(3)
        out = fused_graph.step({"preprocess/state": state, "preprocess/velocity": velocity})
        obs, action = eager_seed(seed, state, velocity)
        torch.testing.assert_close(out["preprocess/obs"], obs, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out["policy/action"], action, rtol=1e-5, atol=1e-5)


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


def test_verify_fused_replays_the_examples_through_one_node(seed, capsys):
    assert main(["verify", str(seed.path), "--fused"]) == 0
    report = capsys.readouterr().out
    assert "one node running the whole pipeline (fused)" in report


def test_fused_takes_neither_composed_nor_a_choice_of_nodes(seed):
    plan = make_plan(load(seed.path))
    for options in ({"composed": True}, {"nodes": ["policy"]}):
        with pytest.raises(PlanError, match="fused mode runs every node of the pipeline"):
            plan_processes(plan, fused=True, **options)
    (process,) = plan_processes(plan, fused=True, nodes=["preprocess", "policy"])
    assert (process.executable, process.node_name) == ("leapp_fused", "leapp_fused")
    assert process.pipeline_nodes == ("preprocess", "policy")


def test_run_refuses_fused_with_composed(seed, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["run", str(seed.path), "--fused", "--composed"])
    assert caught.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
