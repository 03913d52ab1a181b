"""The runner and ``leapp-ros run``: process plans, supervision (with stand-in nodes that
publish status records), readiness from the status records at any log level, and the real seed
graph over real DDS (stopped by signals, a killed node, restarts, composed)."""

from __future__ import annotations

import importlib.util
import io
import os
import py_compile
import signal
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from support.ros import eager_seed
from support.runner import (
    FAKE_NODE,
    REPO,
    Command,
    SeedIO,
    pid_alive,
    wait_until,
)

import leapp
from leapp_ros.plan.pipeline import PlanError, make_plan
from leapp_ros.run.deployment import Deployment, GraphOptions
from leapp_ros.run.processes import ProcessPlan, load_plan, plan_processes
from leapp_ros.run.runner import RunningGraph
from leapp_ros.run.supervised_process import RestartPolicy
from leapp_ros.testing import Probe, reserve_domain_id, ros_env

LAUNCH_FILE = REPO / "launch" / "pipeline.launch.py"
NODES = ("preprocess", "policy")


@pytest.fixture
def domain_id():
    """A ROS domain of this test's own (locked against concurrent test runs)."""
    with reserve_domain_id() as domain:
        yield domain


@pytest.fixture
def fake_env(tmp_path, domain_id) -> dict[str, str]:
    """The stand-in nodes' environment: the fake on the path, the test's own ROS domain (the
    runner watches their status records there)."""
    (tmp_path / "fake_node.py").write_text(FAKE_NODE)
    return ros_env(domain_id, base={"PYTHONPATH": str(tmp_path)})


@pytest.fixture
def commands():
    """Commands a test starts; killed (with every node they started) when it ends."""
    started: list[Command] = []
    yield lambda argv, env=None: started.append(Command(argv, env)) or started[-1]
    for command in started:
        command.kill()


def fakes(*modes: str) -> list[ProcessPlan]:
    names = "abcdef"
    return [
        ProcessPlan(names[i], "fake", "fake_node", (names[i],), (names[i], mode))
        for i, mode in enumerate(modes)
    ]


def leapp_ros_run(export: Path | str, *options: str) -> list[str]:
    return [sys.executable, "-m", "leapp_ros.tools.cli", "run", str(export), *options]


# --- process plans ----------------------------------------------------------------------


def test_processes_run_each_node_in_its_own_process_under_the_namespace(seed):
    plan = load_plan(seed.path)
    processes = plan_processes(plan, GraphOptions(namespace="robot/policy", log_level="WARN"))
    assert [p.label for p in processes] == list(NODES)
    argv = processes[1].argv("python")
    spec = str(plan.spec_path.absolute())
    assert argv == [
        "python", "-m", "leapp_ros.node.pipeline_node", "--ros-args",
        "-r", "__node:=policy", "-r", "__ns:=/robot/policy",
        "-p", f"spec_path:='{spec}'", "-p", "pipeline_node:='policy'",
        "--log-level", "warn",
    ]  # fmt: skip


def test_processes_composed_is_one_container_that_hosts_every_node(seed, tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("/**:\n  ros__parameters: {}\n")
    options = GraphOptions(Deployment.COMPOSED, params_file=params)
    (container,) = plan_processes(load_plan(seed.path), options)
    assert container.executable == "leapp_container"
    assert container.pipeline_nodes == NODES
    assert container.argv("python")[3:] == [
        str(make_plan(leapp.spec.load(seed.path)).spec_path.absolute()),
        "--namespace", "/torch_pipeline", "--ros-args", "-r", "__node:=leapp_container",
        "-r", "__ns:=/torch_pipeline", "--params-file", str(params),
    ]  # fmt: skip


def test_options_reject_an_unknown_log_level():
    with pytest.raises(PlanError, match="unknown log level 'loud'"):
        GraphOptions(log_level="loud")


def test_options_reject_a_missing_params_file(tmp_path):
    with pytest.raises(PlanError, match=r"nope\.yaml does not exist"):
        GraphOptions(params_file=tmp_path / "nope.yaml")


def test_default_params_file_sets_every_node_parameter():
    import yaml

    document = yaml.safe_load((REPO / "config" / "leapp_ros.yaml").read_text())
    parameters = document["/**"]["ros__parameters"]
    from leapp_ros.plan.settings import PARAMETERS

    set_by_runner = {"spec_path", "pipeline_node", "stand_in"}
    defaults = {  # unset arrays (cpu_affinity, triggers) are examples in comments
        name: value
        for name, value, _ in PARAMETERS
        if name not in set_by_runner and value not in ((), [])
    }
    assert parameters == defaults


def test_launch_file_compiles(tmp_path):
    py_compile.compile(str(LAUNCH_FILE), cfile=str(tmp_path / "launch.pyc"), doraise=True)


@pytest.mark.launch
def test_launch_file_describes_the_pipeline_when_launch_is_installed():
    # launch.actions, not launch: the repository's own launch/ folder imports as "launch"
    pytest.importorskip("launch.actions", reason="ROS 2 launch is not installed (pip-only ROS)")
    pytest.importorskip("launch_ros.actions", reason="launch_ros is not installed")
    spec = importlib.util.spec_from_file_location("pipeline_launch", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    names = [getattr(a, "name", None) for a in description.entities]
    assert {"pipeline", "deployment", "namespace", "log_level", "params_file"} <= set(names)


# --- supervision, with stand-in nodes -----------------------------------------------------


@pytest.mark.ros
def test_stop_sends_sigint_to_every_process_and_exits_0(fake_env, capfd):
    graph = RunningGraph(fakes("ok", "ok"), env=fake_env).start()
    assert graph.wait_ready(30), graph.failure
    pids = list(graph.pids.values())
    assert graph.stop(10) == 0
    assert not any(pid_alive(pid) for pid in pids)
    out, _ = capfd.readouterr()
    assert "[a] a: stopping on SIGINT" in out and "[b] b: some output" in out


@pytest.mark.ros
def test_stop_escalates_to_sigterm_when_a_process_ignores_sigint(fake_env, caplog):
    graph = RunningGraph(fakes("ok", "stubborn"), env=fake_env, stop_timeout_s=0.5).start()
    assert graph.wait_ready(30), graph.failure
    assert graph.stop(10) == 0
    assert "'b' still running; sending SIGTERM" in caplog.text


@pytest.mark.ros
def test_a_ready_record_counts_only_from_the_process_itself(fake_env):
    # The impostor publishes a ready record naming "a" with another pid (a record left by an
    # earlier start, or another process), then one naming "a_seen" with its own.
    impostor = ProcessPlan("a", "fake", "fake_node", ("a", "a_seen"), ("a", "impostor"))
    graph = RunningGraph([impostor], env=fake_env).start()
    try:
        assert wait_until(lambda: graph.ready_nodes()["a"] == ("a_seen",), 30), graph.failure
        assert not graph.is_ready()
    finally:
        assert graph.stop(10) == 0


@pytest.mark.ros
def test_a_process_without_status_records_is_running_but_not_ready(fake_env):
    graph = RunningGraph(fakes("ok", "silent"), env=fake_env).start()
    try:
        assert wait_until(lambda: graph.ready_nodes() == {"a": ("a",), "b": ()}, 30)
        assert all(graph.pids.values()) and not graph.is_ready()
    finally:
        assert graph.stop(10) == 0


@pytest.mark.ros
def test_a_failed_process_is_reported_and_the_others_are_stopped(fake_env, capfd, caplog):
    graph = RunningGraph(fakes("ok", "crash"), env=fake_env).start()
    assert graph.wait(10) == 1
    assert "'b' (pid" in graph.failure and "exited with code 3 unexpectedly" in graph.failure
    assert "b: boom" in graph.failure  # its last stderr lines
    assert "[a] a: stopping on SIGINT" in capfd.readouterr().out
    assert "stopping the graph" in caplog.text


@pytest.mark.ros
def test_restart_gives_up_after_the_limit(fake_env, caplog):
    policy = RestartPolicy(max_restarts=2, backoff_s=0.05)
    graph = RunningGraph(fakes("ok", "crash"), env=fake_env, restart=True,
                         restart_policy=policy).start()  # fmt: skip
    assert graph.wait(20) == 1
    assert caplog.text.count("restarting it in") == 2
    assert "it was restarted 2 times within 60 s already; stopping the graph" in caplog.text


@pytest.mark.ros
def test_restart_skips_a_process_that_exits_with_code_2_and_the_graph_exits_2(fake_env, caplog):
    graph = RunningGraph(fakes("ok", "config"), env=fake_env, restart=True).start()
    assert graph.wait(10) == 2
    assert "exit code 2 is a configuration problem, not restarting" in caplog.text


@pytest.mark.ros
def test_the_graph_is_ready_from_the_status_records_at_log_level_error(seed, domain_id):
    # At level error the nodes log nothing of being ready: the records alone say so.
    lines = io.StringIO()
    options = GraphOptions(log_level="error")
    processes = plan_processes(load_plan(seed.path), options)
    env = ros_env(domain_id, base={})
    graph = RunningGraph(processes, env=env, stdout=lines, stderr=lines).start()
    try:
        assert graph.wait_ready(60), f"{graph.failure}\n{lines.getvalue()}"
        assert graph.ready_nodes() == {"preprocess": ("preprocess",), "policy": ("policy",)}
    finally:
        assert graph.stop(30) == 0
    assert "ready" not in lines.getvalue()


@pytest.mark.ros
def test_processes_get_sigterm_when_the_runner_is_killed(fake_env, commands):
    script = textwrap.dedent("""
        import time
        from leapp_ros.run.processes import ProcessPlan
        from leapp_ros.run.runner import RunningGraph
        plan = ProcessPlan("a", "fake", "fake_node", ("a",), ("a", "ok"))
        graph = RunningGraph([plan]).start()
        graph.wait_ready(30)
        print("child", graph.pids["a"], flush=True)
        time.sleep(60)  # (the child only has to stay alive until the test kills its runner)
    """)
    runner = commands([sys.executable, "-c", script], fake_env)
    pid = int(runner.wait_for(r"child (\d+)", 60).group(1))
    runner.extra_pids.add(pid)
    os.kill(runner.process.pid, signal.SIGKILL)
    assert wait_until(lambda: not pid_alive(pid), 10), "the node outlived its runner"


# --- leapp-ros run, with the real nodes over real DDS ------------------------------------


def start_graph(commands, domain_id: int, export: Path, *options: str, nodes=NODES) -> Command:
    """``leapp-ros run export options`` in ``domain_id``, once its graph is ready."""
    run = commands(leapp_ros_run(export, *options), ros_env(domain_id))
    run.wait_for(r"graph ready", 60)
    assert set(run.started_pids()) == set(nodes)
    return run


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
@pytest.mark.ros
def test_run_stops_every_node_and_exits_0_on(sig, seed, domain_id, commands):
    run = start_graph(commands, domain_id, seed.path)
    pids = run.started_pids()
    os.kill(run.process.pid, sig)
    assert run.wait(30) == 0, run.output
    assert not [label for label, pid in pids.items() if pid_alive(pid)]
    assert "every process stopped cleanly" in run.output


@pytest.mark.ros
def test_run_reports_a_killed_node_and_stops_the_others(seed, domain_id, commands):
    run = start_graph(commands, domain_id, seed.path)
    pids = run.started_pids()
    os.kill(pids["policy"], signal.SIGKILL)
    assert run.wait(30) == 1
    assert "'policy' (pid" in run.output and "was killed by SIGKILL" in run.output
    assert not pid_alive(pids["preprocess"])


@pytest.fixture
def probe(domain_id):
    """The test's own rclpy node in ``domain_id``."""
    probe = Probe(domain_id)
    yield probe
    probe.close()


def endpoint_ids(probe, topics, node_name: str) -> set[bytes]:
    """The ids of the publishers and subscriptions of nodes named ``node_name`` that the probe
    has discovered on ``topics``."""
    node = probe.node
    return {
        bytes(endpoint.endpoint_gid)
        for topic in topics
        for endpoint in [*node.get_publishers_info_by_topic(topic),
                         *node.get_subscriptions_info_by_topic(topic)]
        if endpoint.node_name == node_name
    }  # fmt: skip


@pytest.mark.ros
def test_run_with_restart_brings_a_killed_node_back(seed, domain_id, commands, probe):
    run = start_graph(commands, domain_id, seed.path, "--restart")
    io = SeedIO(probe)
    state, velocity = torch.randn(6), torch.randn(3)
    _, expected = eager_seed(seed, state, velocity)
    torch.testing.assert_close(io.step(state, velocity, expected, timeout_s=60), expected)
    topics = ["/torch_pipeline/preprocess/obs", "/torch_pipeline/policy/action"]
    killed = endpoint_ids(probe, topics, "policy")
    old = run.started_pids()["policy"]
    os.kill(old, signal.SIGKILL)
    mark = len(run.lines)
    run.wait_for(r"'policy' \(pid \d+\) was killed by SIGKILL.*restarting it", 10, mark)
    probe.watch_status("/torch_pipeline").pop("policy", None)
    run.wait_for(r"'policy' is ready again", 60, mark)
    assert run.started_pids()["policy"] != old
    # The killed policy's endpoints stay discovered, and matched by preprocess, until their
    # lease ends (about 20 s): until then a count of matches cannot tell them from the
    # restarted policy's, so the pair goes once they are gone (an event, however long).
    probe.spin_until(
        lambda: not killed & endpoint_ids(probe, topics, "policy"), 60, "the lease to end"
    )
    # Once in a full CI run on Fast DDS 2.14 (Jazzy), the first obs preprocess published to
    # the restarted policy never arrived although both sides counted the match. Measured with
    # plain rclpy (scripts/restart_loss_window.py): a subscriber started in place of a
    # SIGKILLed one loses best-effort messages sent in the first seconds after its match, on
    # Fast DDS 2.14 and 3.2, over shared memory and over UDPv4 alike, and never after a clean
    # exit; a loss after the lease ended, as here, was not reproduced. So the pair is sent
    # again each second until the answer comes (the seed keeps no state): what this test
    # proves is that the restarted node answers, not that its first input cannot be lost.
    state, velocity = torch.randn(6), torch.randn(3)
    _, expected = eager_seed(seed, state, velocity)
    answer = io.step(state, velocity, expected, timeout_s=60, resend_s=1.0)
    torch.testing.assert_close(answer, expected)
    os.kill(run.process.pid, signal.SIGINT)
    assert run.wait(30) == 0, run.output


@pytest.mark.ros
def test_run_takes_the_documented_params_file_and_a_namespace(seed, domain_id, commands, probe):
    params = REPO / "config" / "leapp_ros.yaml"
    options = ("--params-file", str(params), "--namespace", "robot1/pipe")
    run = start_graph(commands, domain_id, seed.path, *options)
    probe.wait_ready("/robot1/pipe", NODES, timeout_s=20)
    os.kill(run.process.pid, signal.SIGINT)
    assert run.wait(30) == 0, run.output


@pytest.mark.ros
def test_run_composed_starts_one_process_for_every_node(seed, domain_id, commands, probe):
    options = ("--deployment", "composed")
    run = start_graph(commands, domain_id, seed.path, *options, nodes=["torch_pipeline"])
    probe.wait_ready("/torch_pipeline", NODES, timeout_s=20)
    os.kill(run.process.pid, signal.SIGINT)
    assert run.wait(30) == 0, run.output


@pytest.mark.ros
def test_run_with_a_missing_export_exits_2_and_says_so(tmp_path, commands):
    run = commands(leapp_ros_run(tmp_path / "nowhere"))
    assert run.wait(30) == 2
    assert "nowhere: no such export folder or spec file" in run.output


@pytest.mark.ros
def test_run_with_a_bad_spec_exits_2_with_the_spec_problems(seed, tmp_path, commands):
    broken = tmp_path / "torch_pipeline"
    broken.mkdir()
    for file in seed.path.iterdir():
        (broken / file.name).write_bytes(file.read_bytes())
    (broken / "policy.onnx").write_bytes(b"not the exported model")
    run = commands(leapp_ros_run(broken))
    assert run.wait(30) == 2
    assert "leapp-ros run:" in run.output and "policy.onnx" in run.output


@pytest.mark.ros
def test_run_with_an_unknown_log_level_exits_2(seed, commands):
    run = commands(leapp_ros_run(seed.path, "--log-level", "loud"))
    assert run.wait(30) == 2
    assert "invalid choice: 'loud'" in run.output


def test_main_returns_2_for_a_missing_export(tmp_path, capsys):
    from leapp_ros.tools.cli import main

    assert main(["run", str(tmp_path / "nowhere")]) == 2
    assert "no such export folder" in capsys.readouterr().err
