"""leapp_ros.testing over real DDS: GraphUnderTest steps the seed pipeline over its topics (one
process per node and composed) equal to eager PyTorch, checks topics against the plan, reports
status, names silent topics on a timeout, fails when a node dies or cannot start, and leaves no
process behind."""

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
    GraphAssertionError,
    GraphUnderTest,
    Probe,
    StepTimeoutError,
    claim_domain_id,
    graph_fixture,
    prime,
    reserve_domain_id,
)
from leapp_ros.testing.probe import LOCK_FOLDER, SHELL_DOMAIN_IDS
from leapp_ros.testing.topics import (
    driven_outputs,
    harness_parameters,
    starved_nodes,
    unready,
)

pytestmark = pytest.mark.ros

graph = graph_fixture(
    lambda request: request.getfixturevalue("seed").path, modes=["processes", "composed", "fused"]
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


def test_a_fed_node_that_did_not_publish_is_starved(seed):
    plan = make_plan(load(seed.path))
    given = {"preprocess/state", "preprocess/velocity"}
    assert starved_nodes(plan, given, {"preprocess/obs"}) == ["policy"]
    assert starved_nodes(plan, given, {"preprocess/obs", "policy/action"}) == []
    assert starved_nodes(plan, given, set()) == []


class _SeesEverything:
    """An rclpy node stand-in that has discovered every endpoint."""

    def count_publishers(self, topic):
        return 1

    def count_subscribers(self, topic):
        return 9


def test_graph_is_not_ready_until_each_node_reports_its_outputs_matched(seed):
    plan = make_plan(load(seed.path))
    ready = {"state": "ready"}
    statuses = {
        "preprocess": {**ready, "subscribers": {"/torch_pipeline/preprocess/obs": 1}},
        "policy": {**ready, "subscribers": {"/torch_pipeline/policy/action": 1}},
    }
    late = unready(plan, _SeesEverything(), statuses, {})
    assert late == ["/torch_pipeline/preprocess/obs (its publisher matched 1 of 2 subscriptions)"]
    statuses["preprocess"]["subscribers"]["/torch_pipeline/preprocess/obs"] = 2
    assert unready(plan, _SeesEverything(), statuses, {}) == []


def test_harness_parameters_make_node_subscriptions_reliable_and_keep_the_users(seed, tmp_path):
    import yaml

    user = tmp_path / "user.yaml"
    user.write_text(
        "/**:\n  ros__parameters:\n    max_input_age: 0.5\n    qos_overrides:\n"
        "      /torch_pipeline/preprocess/state: {subscription: {reliability: best_effort}}\n"
    )
    written = harness_parameters(make_plan(load(seed.path)), tmp_path / "harness.yaml", user)
    parameters = yaml.safe_load(written.read_text())["/**"]["ros__parameters"]
    assert parameters == {
        "max_input_age": 0.5,
        "qos_overrides": {
            f"/torch_pipeline/{topic}": {"subscription": {"reliability": reliability}}
            for topic, reliability in (
                ("preprocess/state", "best_effort"),
                ("preprocess/velocity", "reliable"),
                ("preprocess/obs", "reliable"),
            )
        },
    }


# --- the seed pipeline, one process per node and composed ------------------------------------


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
    graph.spin(0.3)
    assert {key: len(graph.received(key)) - before[key] for key in graph.outputs} == {
        "preprocess/obs": 10,
        "policy/action": 10,
    }


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
    published = {key.split("/")[0]: len(graph.received(key)) for key in graph.outputs}
    graph.probe.spin_until(
        lambda: {node: s["runs"] for node, s in graph.status().items()} == published,
        3,
        f"statuses with every run {published}",
    )
    status = graph.status()
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
    with GraphUnderTest(leapp.compile_graph().path, composed=True) as started:
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
    graph = GraphUnderTest(export, composed=True)
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


def test_priming_that_gets_no_answer_names_each_silent_topic():
    from std_msgs.msg import Float32MultiArray

    with reserve_domain_id() as domain_id, Probe(domain_id) as probe:
        answered = probe.subscribe("/primed/answered", Float32MultiArray)
        silent = probe.subscribe("/primed/silent", Float32MultiArray)
        echo = probe.publisher("/primed/answered", Float32MultiArray)
        probe.wait_matched(echo)
        with pytest.raises(AssertionError) as failure:
            prime(probe, lambda: echo.publish(Float32MultiArray()), [answered, silent], 1.0)
    assert str(failure.value) == (
        "no output within 1.0 s of publishing inputs on /primed/silent (0 publishers), "
        "(1 of 2 inboxes received)"
    )


def test_priming_that_gets_no_answer_names_each_nodes_counters(graph):
    graph.step(seed_inputs())  # each node has run
    probe = graph.probe
    probe.spin_for(1.3)  # a status record (one a second) of each node since its last run
    with pytest.raises(AssertionError) as failure:
        prime(probe, lambda: None, [[]], 0.5)  # no input: nothing fires
    message = str(failure.value)
    assert message.startswith("no output within 0.5 s of publishing inputs on ")
    for node, record in graph.status().items():  # no input since: the same counters
        assert record["runs"] > 0 and record["dropped"] == record["errors"] == 0
        counters = ", ".join(
            f"{name} {record[name]}"
            for name in ("runs", "received", "dropped", "stale", "incomplete_sets", "errors")
        )
        assert f"; /torch_pipeline/{node}: {counters}" in message, message


def test_priming_stops_as_soon_as_the_check_fails():
    from std_msgs.msg import Float32MultiArray

    def dead() -> None:
        raise AssertionError("the graph process exited with 1")

    with reserve_domain_id() as domain_id, Probe(domain_id) as probe:
        silent = probe.subscribe("/primed/silent", Float32MultiArray)
        with pytest.raises(AssertionError, match="exited with 1"):
            prime(probe, lambda: None, [silent], 30.0, check=dead)


def test_processes_started_by_the_tests_can_be_stopped_with_sigint():
    # conftest: a run started as a background job inherits SIGINT ignored; its children would
    # too, and ros2 launch (woken by Python's own SIGINT handler) would never stop.
    import subprocess
    import sys

    child = "import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)"
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
