"""leapp_ros.testing over real DDS: GraphUnderTest runs the nodes at their deployed QoS (best
effort subscriptions), steps the seed pipeline over its topics in every mode equal to eager
PyTorch, uses every input of a recurrent graph exactly once, checks topics against the plan,
reports status, names silent topics on a timeout, fails when a node dies or cannot start, and
leaves no process behind."""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

import pytest
import torch
from support.ros import eager_seed
from support.runner import pid_alive

import leapp
from leapp import annotate
from leapp import session as session_module
from leapp.errors import PipelineError
from leapp.spec import load
from leapp_ros.plan.pipeline import make_plan
from leapp_ros.testing import (
    DOMAIN_IDS,
    Deployment,
    GraphAssertionError,
    GraphUnderTest,
    Probe,
    StepTimeoutError,
    claim_domain_id,
    graph_fixture,
    reserve_domain_id,
)
from leapp_ros.testing.delivery import connection_gaps, receipt_gaps
from leapp_ros.testing.probe import LOCK_FOLDER, SHELL_DOMAIN_IDS
from leapp_ros.testing.topics import driven_outputs

pytestmark = pytest.mark.ros

graph = graph_fixture(
    lambda request: request.getfixturevalue("seed").path, deployments=list(Deployment)
)


def seed_inputs(state=None, velocity=None) -> dict[str, torch.Tensor]:
    state = torch.randn(6) * 3 if state is None else state
    velocity = torch.randn(3) if velocity is None else velocity
    return {"preprocess/state": state, "preprocess/velocity": velocity}


# --- what the harness derives from the plan (no ROS) ------------------------------------------


def test_driven_outputs_are_those_of_every_node_that_fires(seed):
    plan = make_plan(load(seed.path))
    both = ["preprocess/state", "preprocess/velocity"]
    assert driven_outputs(plan, both) == ["preprocess/obs", "policy/action"]
    assert driven_outputs(plan, ["preprocess/state"]) == []


OBS, ACTION = "/torch_pipeline/preprocess/obs", "/torch_pipeline/policy/action"
STATE, VELOCITY = "/torch_pipeline/preprocess/state", "/torch_pipeline/preprocess/velocity"
PACKED = "/torch_pipeline/preprocess/packed_inputs"


def seed_records(obs_readers=1, obs_writers=1, probe_readers=1, inputs=1):
    """Status records of the seed's two nodes with the given matched counts."""
    return {
        "preprocess": {
            "subscribers": {OBS: obs_readers},
            "publishers": {STATE: inputs, VELOCITY: inputs},
        },
        "policy": {"subscribers": {ACTION: probe_readers}, "publishers": {OBS: obs_writers}},
    }


def test_a_hop_is_connected_once_matched_on_both_sides():
    probe_publishers, probe_subscriptions = [(STATE, 1), (VELOCITY, 1)], [(OBS, 1), (ACTION, 1)]
    # policy and the probe read obs: its publisher must count two subscriptions
    assert (
        connection_gaps(seed_records(obs_readers=2), probe_publishers, probe_subscriptions) == []
    )
    assert connection_gaps(seed_records(obs_readers=1), probe_publishers, probe_subscriptions) == [
        f"{OBS}: node 'preprocess' matched 1 of 2 subscriptions"
    ]
    # the probe's publisher counts preprocess, but preprocess has not matched the probe yet
    assert connection_gaps(seed_records(obs_readers=2, inputs=0), probe_publishers) == [
        f"{STATE}: node 'preprocess' matched 0 of 1 publishers",
        f"{VELOCITY}: node 'preprocess' matched 0 of 1 publishers",
    ]
    assert connection_gaps(
        seed_records(obs_readers=2, obs_writers=0), [(STATE, 0), (VELOCITY, 1)], [(ACTION, 0)]
    ) == [
        f"{OBS}: node 'policy' matched 0 of 1 publishers",
        f"{STATE}: the test's publisher matched 0 of 1 subscriptions",
        f"{ACTION}: the test's subscription matched 0 of 1 publishers",
    ]


def test_a_message_is_taken_once_the_status_counts_it_on_its_topic():
    def records(state, velocity, obs, runs):
        return {
            "preprocess": {"runs": runs, "subscribers": {OBS: 2},
                           "received_on": {STATE: state, VELOCITY: velocity}},
            "policy": {"runs": 0, "subscribers": {ACTION: 1}, "received_on": {OBS: obs}},
        }  # fmt: skip

    sent = {STATE: 3, VELOCITY: 3}
    assert receipt_gaps(records(3, 3, 3, runs=3), sent) == []
    assert receipt_gaps(records(3, 2, 2, runs=2), sent) == [
        f"{VELOCITY}: node 'preprocess' took 2 of 3 messages"
    ]
    # every input taken, and the run it caused not yet taken by the node fed by it
    assert receipt_gaps(records(3, 3, 2, runs=3), sent) == [
        f"{OBS}: node 'policy' took 2 of 3 messages"
    ]


def test_the_records_of_a_fused_node_count_only_when_they_are_of_one_tick():
    fused = {"fused": "/torch_pipeline/leapp_fused"}
    records = {
        "preprocess": {**fused, "ticks": 3, "runs": 3, "received_on": {STATE: 3, VELOCITY: 3}},
        "policy": {**fused, "ticks": 2, "runs": 2, "received_on": {}},
    }
    assert receipt_gaps(records, {STATE: 3, VELOCITY: 3}) == [
        "/torch_pipeline/leapp_fused: records of ticks [2, 3]"
    ]
    records["policy"].update(ticks=3, runs=3)
    assert receipt_gaps(records, {STATE: 3, VELOCITY: 3}) == []


def test_an_endpoint_must_match_every_endpoint_discovered_on_its_topic():
    # a killed policy's subscription stays discovered (and matched) until its lease ends: the
    # restarted policy's counts only once preprocess matched it too, beside the dead one
    records = seed_records(obs_readers=2)
    discovered = {OBS: (1, 3)}  # the probe, the restarted policy, the dead one
    assert connection_gaps(records, discovered=discovered) == [
        f"{OBS}: node 'preprocess' matched 2 of 3 subscriptions"
    ]
    assert connection_gaps(seed_records(obs_readers=3), discovered=discovered) == []


# --- the seed pipeline, in every mode ----------------------------------------------------------


def test_the_nodes_keep_their_deployed_qos(graph):
    """No parameter of the harness changes a node: its subscriptions are best effort and
    volatile, its publishers reliable, as deployed (DESIGN.md "QoS"; discovery does not carry
    the depth)."""
    from rclpy.qos import DurabilityPolicy, ReliabilityPolicy

    node = graph.probe.node
    subscribed = [STATE, VELOCITY] + ([] if graph.fused else [OBS])
    for topic in subscribed:
        ours = [e for e in node.get_subscriptions_info_by_topic(topic)
                if e.node_name != node.get_name()]  # fmt: skip
        assert ours, topic
        for endpoint in ours:
            assert endpoint.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT, topic
            assert endpoint.qos_profile.durability == DurabilityPolicy.VOLATILE, topic
    for topic in (OBS, ACTION):
        (endpoint,) = node.get_publishers_info_by_topic(topic)
        assert endpoint.qos_profile.reliability == ReliabilityPolicy.RELIABLE, topic


def test_step_returns_every_output_of_the_graph_equal_to_eager(graph, seed):
    for _ in range(50):
        inputs = seed_inputs()
        out = graph.step(inputs, timeout_s=5)
        obs, action = eager_seed(seed, inputs["preprocess/state"], inputs["preprocess/velocity"])
        assert set(out) == {"preprocess/obs", "policy/action"}
        torch.testing.assert_close(out["preprocess/obs"], obs, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out["policy/action"], action, rtol=1e-5, atol=1e-5)


def test_each_step_yields_exactly_one_message_per_output(graph):
    before = {key: len(graph.received(key)) for key in graph.outputs}
    for _ in range(10):
        graph.step(seed_inputs())
    graph.wait_received()  # every input taken: nothing more can come of them
    assert {key: len(graph.received(key)) - before[key] for key in graph.outputs} == {
        "preprocess/obs": 10,
        "policy/action": 10,
    }


def test_each_input_is_taken_exactly_once(graph):
    graph.step(seed_inputs())
    status = graph.wait_received()
    sent = graph.endpoints.sent
    expected = {STATE: sent[STATE], VELOCITY: sent[VELOCITY], PACKED: 0}  # packed: not used
    assert status["preprocess"]["received_on"] == expected
    if not graph.fused:  # (fused: policy takes obs in memory)
        assert status["policy"]["received_on"] == {OBS: status["preprocess"]["runs"]}
    assert status["preprocess"]["runs"] == sent[STATE] == len(graph.received("preprocess/obs"))


def test_an_input_that_fires_nothing_is_counted_taken_and_answers_nothing(graph):
    before = graph.wait_received()
    published = {key: len(graph.received(key)) for key in graph.outputs}
    graph.publish({"preprocess/state": torch.randn(6)})  # its partner never comes
    after = graph.wait_received()
    assert (
        after["preprocess"]["received_on"][STATE] == before["preprocess"]["received_on"][STATE] + 1
    )
    assert after["preprocess"]["runs"] == before["preprocess"]["runs"]
    assert {key: len(graph.received(key)) for key in graph.outputs} == published
    out = graph.step(seed_inputs())  # the pair completes with the next velocity: a new set
    assert set(out) == {"preprocess/obs", "policy/action"}


def test_expect_topics_returns_the_planned_topics_and_types(graph, seed):
    assert graph.expect_topics() == dict(make_plan(load(seed.path)).topics())


def test_expect_topics_names_a_topic_the_plan_does_not_have(graph):
    from std_msgs.msg import Float32MultiArray

    rogue = graph.probe.publisher("/torch_pipeline/preprocess/rogue", Float32MultiArray)
    try:
        with pytest.raises(GraphAssertionError) as caught:
            graph.expect_topics(timeout_s=1.0)
    finally:
        graph.probe.node.destroy_publisher(rogue)
    assert str(caught.value).endswith(
        "\n  - /torch_pipeline/preprocess/rogue: not in the plan "
        "(types ['std_msgs/msg/Float32MultiArray'])"
    )


def test_status_counts_every_run_of_every_node(graph):
    graph.step(seed_inputs())
    status = graph.wait_received()
    published = {key.split("/")[0]: len(graph.received(key)) for key in graph.outputs}
    assert {node: s["runs"] for node, s in status.items()} == published
    assert all(s["state"] == "ready" and s["errors"] == s["dropped"] == 0 for s in status.values())
    # policy and the probe read obs (fused: the probe only, policy gets it in memory), the
    # probe reads action
    readers = 1 if graph.fused else 2
    assert status["preprocess"]["subscribers"] == {"/torch_pipeline/preprocess/obs": readers}
    assert status["policy"]["subscribers"] == {"/torch_pipeline/policy/action": 1}
    if graph.fused:
        assert {s["fused"] for s in status.values()} == {"/torch_pipeline/leapp_fused"}


def test_step_rejects_an_input_the_pipeline_does_not_have(graph):
    with pytest.raises(PipelineError) as caught:
        graph.step({"policy/obs": torch.zeros(9)})
    assert str(caught.value) == (
        "'policy/obs': not an external input of pipeline 'torch_pipeline'; its external "
        "inputs are preprocess/state, preprocess/velocity"
    )


def test_step_rejects_a_tensor_that_does_not_fit_its_port(graph):
    with pytest.raises(PipelineError, match=r"input 'preprocess/state': expected a float32 "):
        graph.step(seed_inputs(state=torch.zeros(5)))


def test_step_refuses_inputs_that_make_no_node_fire(graph):
    with pytest.raises(PipelineError, match=r"make no node of pipeline 'torch_pipeline' fire"):
        graph.step({"preprocess/state": torch.zeros(6)})


# --- a node that never publishes --------------------------------------------------------------


@pytest.fixture(scope="module")
def half_fed(tmp_path_factory):
    """``pipe``: preprocess(state) -> obs; policy(obs, command) -> action, in one process."""
    session_module._active = None
    leapp.start("pipe", save_path=tmp_path_factory.mktemp("pipe"))
    with torch.no_grad():
        state = annotate.input_tensors("preprocess", {"state": torch.randn(3)})
        obs = annotate.output_tensors("preprocess", {"obs": state * 2})
        obs, command = annotate.input_tensors("policy", {"obs": obs, "command": torch.randn(3)})
        annotate.output_tensors("policy", {"action": obs + command})
    leapp.stop()
    with GraphUnderTest(leapp.compile_graph().path, Deployment.COMPOSED) as started:
        yield started


def test_step_waits_only_for_the_outputs_its_inputs_drive(half_fed):
    state = torch.randn(3)
    out = half_fed.step({"preprocess/state": state})
    assert list(out) == ["preprocess/obs"]
    torch.testing.assert_close(out["preprocess/obs"], state * 2)


def test_step_timeout_names_the_silent_topic_and_what_arrived(half_fed):
    with pytest.raises(StepTimeoutError) as caught:
        half_fed.step({"preprocess/state": torch.ones(3)}, outputs=["policy/action"], timeout_s=1)
    assert isinstance(caught.value, AssertionError)
    assert str(caught.value) == (
        "no message on /pipe/policy/action within 1.0 s; received: /pipe/preprocess/obs (1)"
    )
    assert caught.value.missing == ("/pipe/policy/action",)


# --- failures and shutdown --------------------------------------------------------------------


def test_a_node_that_dies_fails_the_step_and_the_shutdown(seed):
    graph = GraphUnderTest(seed.path).start()
    try:
        os.kill(graph.pids["policy"], signal.SIGKILL)
        with pytest.raises(
            GraphAssertionError, match=r"'policy' \(pid \d+\) was killed by SIGKILL"
        ):
            graph.step(seed_inputs())
    finally:
        with pytest.raises(GraphAssertionError, match=r"stopped with exit code 1: .*'policy'"):
            graph.close()


def test_a_node_that_cannot_start_fails_the_start_with_its_error(tmp_path):
    session_module._active = None
    leapp.start("acc", save_path=tmp_path)
    with torch.no_grad():
        x = annotate.input_tensors("acc", {"x": torch.randn(2)})
        h = annotate.state_tensors("acc", {"h": torch.zeros(2)})
        annotate.update_state("acc", {"h": h + x})
        annotate.output_tensors("acc", {"total": (h + x).sum()})
    leapp.stop()
    export = leapp.compile_graph().path.parent
    (export / "acc_initial_values.safetensors").unlink()
    graph = GraphUnderTest(export, Deployment.COMPOSED)
    with pytest.raises(GraphAssertionError) as caught:
        graph.start()
    message = str(caught.value)
    assert message.startswith("graph /acc failed: /acc: 'acc' (pid ")
    assert "exited with code 2 unexpectedly" in message
    assert "feedback/state input(s) ['h'] need initial values" in message
    assert graph.pids == {}


def test_leaving_the_block_stops_every_process(seed):
    with GraphUnderTest(seed.path) as started:
        pids = list(started.pids.values())
        assert len(pids) == 2 and all(pid_alive(pid) for pid in pids)
    assert [pid for pid in pids if pid_alive(pid)] == []
    assert started.pids == {}


# --- isolation and priming of hand-made test graphs -------------------------------------------


def _free_ids(count: int) -> list[int]:
    """``count`` domain ids no one holds right now (other tests of this run hold some)."""
    claimed = [claim_domain_id() for _ in range(count)]
    for _, lock in claimed:
        lock.close()
    return [domain_id for domain_id, _ in claimed]


def test_a_reserved_domain_is_never_the_environments_own(monkeypatch):
    # Anything started without isolation (a shell's tool, a ros2 daemon) lands in the domain of
    # the environment: no test is handed that one.
    own, other = _free_ids(2)
    monkeypatch.setenv("ROS_DOMAIN_ID", str(own))
    for _ in range(5):
        with reserve_domain_id([own, other]) as domain_id:
            assert domain_id == other


def test_domain_locks_are_shared_by_runs_with_different_temporary_folders(monkeypatch, tmp_path):
    ids = _free_ids(2)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    tempfile.tempdir = None  # tempfile caches TMPDIR
    try:
        with reserve_domain_id(ids) as first:
            held, lock = claim_domain_id(ids)
            lock.close()
            assert held != first and (LOCK_FOLDER / f"{first}.lock").is_file()
    finally:
        tempfile.tempdir = None
    assert not LOCK_FOLDER.is_relative_to(tmp_path)


def test_the_shells_domains_are_outside_the_reserved_ones():
    assert not set(SHELL_DOMAIN_IDS) & set(DOMAIN_IDS)
    setup = (Path(__file__).parents[2] / "scripts" / "setup.sh").read_text()
    low, count = SHELL_DOMAIN_IDS.start, len(SHELL_DOMAIN_IDS)
    assert f"$(($$ % {count} + {low}))" in setup


def test_a_connection_waits_for_the_nodes_to_match_a_new_publisher(graph):
    from std_msgs.msg import Float32MultiArray

    probe = graph.probe
    extra = probe.publisher(STATE, Float32MultiArray)
    try:
        statuses = probe.wait_connected("/torch_pipeline", ["preprocess", "policy"])
        assert statuses["preprocess"]["publishers"][STATE] >= 2  # the harness's and this one
        assert extra.get_subscription_count() >= 1
    finally:
        probe.node.destroy_publisher(extra)


def test_a_connection_that_never_comes_names_what_is_missing_and_each_nodes_counters(graph):
    graph.step(seed_inputs())
    graph.wait_received()  # the records count everything: no input comes after
    with pytest.raises(AssertionError) as failure:
        graph.probe.wait_connected("/torch_pipeline", ["preprocess", "ghost"], timeout_s=0.5)
    message = str(failure.value)
    assert message.startswith("timed out after 0.5 s waiting for nodes ['ghost'] to be ready; ")
    for node, record in graph.status().items():
        assert record["runs"] > 0 and record["dropped"] == record["errors"] == 0
        counters = ", ".join(
            f"{name} {record[name]}"
            for name in ("runs", "received", "dropped", "stale", "incomplete_sets", "errors")
        )
        assert f"; /torch_pipeline/{node}: {counters}" in message, message


def test_waiting_for_a_connection_stops_as_soon_as_the_check_fails():
    def dead() -> None:
        raise AssertionError("the graph process exited with 1")

    with (
        reserve_domain_id() as domain_id,
        Probe(domain_id) as probe,
        pytest.raises(AssertionError, match="exited with 1"),
    ):
        probe.wait_connected("/nowhere", ["node"], timeout_s=30.0, check=dead)


def test_processes_started_by_the_tests_can_be_stopped_with_sigint():
    # conftest: a run started as a background job inherits SIGINT ignored; its children would
    # too, and ros2 launch (woken by Python's own SIGINT handler) would never stop.
    import subprocess
    import sys

    child = "import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)"
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
