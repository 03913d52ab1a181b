"""The rules of the stand-in without ROS: which dead nodes it covers and until when
(:mod:`leapp_ros.run.coverage`), which outputs and safe actions it publishes
(:mod:`leapp_ros.run.safe_outputs`), when the graph has one (``plan_processes``), how it learns
that a process ended (:mod:`leapp_ros.run.process_watch`), and the hold of a node's commands
until the stand-in watches it (:class:`~leapp_ros.node.safety.CommandGate`); the same over
real DDS: test_stand_in.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
import yaml

from leapp_ros.node.safety import CommandGate
from leapp_ros.plan.pipeline import PlanError
from leapp_ros.run.coverage import Coverage
from leapp_ros.run.deployment import Deployment, GraphOptions
from leapp_ros.run.process_watch import ProcessWatch, exit_of
from leapp_ros.run.processes import load_plan, plan_processes
from leapp_ros.run.safe_outputs import plan_safe_outputs


def record(node="policy", pid=10, state="ready", lifecycle="active"):
    return {"node": node, "pid": pid, "state": state, "lifecycle": lifecycle}


# --- coverage -----------------------------------------------------------------------------


def test_an_active_node_whose_process_ends_is_covered_until_a_new_process_is_active():
    coverage = Coverage(["preprocess", "policy"])
    coverage.take(record(pid=10))
    assert coverage.ended(10, 1.0, "was killed by SIGKILL") == ["policy"]
    assert coverage.covers["policy"].pid == 10
    assert coverage.covers["policy"].how == "was killed by SIGKILL"
    assert coverage.take(record(pid=11, lifecycle="inactive")) == [], "configured, not active"
    assert coverage.ended(11, 2.0) == [], "a restart that dies again: still the one cover"
    assert coverage.covers["policy"].pid == 10
    assert coverage.take(record(pid=12)) == ["policy"]
    assert not coverage.covers


@pytest.mark.parametrize(
    "last",
    [
        record(state="stopping"),  # SIGINT, SIGTERM, an unload, a lifecycle shutdown
        record(lifecycle="inactive"),  # deactivated: commanded nothing
        record(lifecycle="unconfigured"),
    ],
    ids=["said-stopping", "inactive", "unconfigured"],
)
def test_a_node_that_said_goodbye_or_was_not_active_is_not_covered(last):
    coverage = Coverage(["policy"])
    coverage.take(last)
    assert coverage.ended(10, 1.0) == []
    assert not coverage.covers


def test_an_exit_with_code_0_is_a_goodbye():
    coverage = Coverage(["policy"])
    coverage.take(record())
    assert coverage.ended(10, 1.0, "exited with code 0", orderly=True) == []


def test_a_goodbye_taken_after_the_end_ends_the_cover():
    coverage = Coverage(["policy"])
    coverage.take(record())
    assert coverage.ended(10, 1.0) == ["policy"]
    assert coverage.take(record(state="stopping")) == ["policy"]
    assert not coverage.covers


def test_every_commanding_node_of_a_process_is_covered_and_other_hosts_are_ignored():
    coverage = Coverage(["preprocess", "policy"])
    coverage.take(record("preprocess", pid=7))
    coverage.take(record("policy", pid=7))
    coverage.take(record("planner", pid=7))  # runs on another host
    assert coverage.pids() == {7: ("policy", "preprocess")}
    assert coverage.ended(7, 1.0) == ["policy", "preprocess"]
    assert coverage.take(record("policy", pid=8)) == ["policy"]
    assert set(coverage.covers) == {"preprocess"}, "each node comes back on its own"


def test_records_without_a_pid_or_node_are_ignored():
    coverage = Coverage(["policy"])
    assert coverage.take({"node": "policy", "state": "ready"}) == []
    assert coverage.take({"pid": 3, "state": "ready"}) == []
    assert coverage.pids() == {}


# --- the outputs it covers ------------------------------------------------------------------


def params_file(tmp_path, sections):
    path = tmp_path / "params.yaml"
    document = {key: {"ros__parameters": value} for key, value in sections.items()}
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def test_outputs_with_a_hold_or_values_safe_action_are_covered_at_the_nodes_period(seed, tmp_path):
    params = params_file(
        tmp_path,
        {
            "/**": {"ports": {"action": {"safe_values": [0.5] * 6}}, "input_timeout_ms": 80},
            "/**/preprocess": {"ports": {"obs": {"safe_action": "hold"}}, "rate_hz": 25.0},
        },
    )
    plan = load_plan(seed.path, params_file=params)
    found = plan_safe_outputs(plan, GraphOptions(params_file=params))
    assert [(s.node, s.output.port, s.action) for s in found] == [
        ("preprocess", "obs", "hold"),
        ("policy", "action", "values"),
    ]
    preprocess, policy = found
    assert preprocess.period_s == pytest.approx(1 / 25.0)
    expected = (
        1 / plan.node("policy").firing.rate_hz if plan.node("policy").firing.rate_hz else 0.08
    )
    assert policy.period_s == pytest.approx(expected)
    assert policy.limits.safe_values.dtype == np.float32, "the port's dtype"


def test_a_fused_stand_in_covers_the_pipeline_outputs_only(seed, tmp_path):
    params = params_file(tmp_path, {"/**": {"ports": {"obs": {"safe_values": [0.0] * 9}}}})
    plan = load_plan(seed.path, params_file=params)
    assert plan_safe_outputs(plan, GraphOptions(Deployment.FUSED, params_file=params)) == ()
    assert plan_safe_outputs(plan, GraphOptions(Deployment.PROCESSES, params_file=params))


def test_silent_outputs_and_nodes_of_other_hosts_are_not_covered(seed, tmp_path):
    params = params_file(tmp_path, {"/**": {"ports": {"action": {"safe_action": "silent"}}}})
    assert plan_safe_outputs(load_plan(seed.path), GraphOptions(params_file=params)) == ()
    params = params_file(tmp_path, {"/**": {"ports": {"action": {"safe_action": "hold"}}}})
    options = GraphOptions(params_file=params, nodes=("preprocess",))
    assert plan_safe_outputs(load_plan(seed.path), options) == ()


def test_an_invalid_safe_action_is_refused_before_anything_starts(seed, tmp_path):
    params = params_file(
        tmp_path, {"/**/policy": {"ports": {"action": {"safe_action": "values"}}}}
    )
    with pytest.raises(PlanError, match=r"node 'policy'.*safe_values is not set"):
        plan_processes(load_plan(seed.path), GraphOptions(params_file=params))


@pytest.mark.parametrize("deployment", list(Deployment), ids=str)
def test_the_graph_has_a_stand_in_only_when_an_output_has_a_safe_action(
    seed, tmp_path, deployment
):
    plan = load_plan(seed.path)
    plain = plan_processes(plan, GraphOptions(deployment))
    assert "leapp_stand_in" not in [p.executable for p in plain]
    assert all("stand_in" not in dict(p.parameters) for p in plain)
    params = params_file(tmp_path, {"/**": {"ports": {"action": {"safe_action": "hold"}}}})
    *nodes, stand_in = plan_processes(plan, GraphOptions(deployment, params_file=params))
    assert stand_in.executable == "leapp_stand_in" and stand_in.pipeline_nodes == ()
    assert stand_in.node_name == "_leapp_stand_in"
    assert "--params-file" in stand_in.arguments and deployment.value in stand_in.arguments
    assert all(dict(p.parameters)["stand_in"] == "_leapp_stand_in" for p in nodes)


# --- how it learns that a process ended -----------------------------------------------------


def test_exit_of_reads_a_signal_or_an_exit_code_before_the_process_is_reaped():
    for argv, how, orderly in (
        (["sleep", "30"], "was killed by SIGKILL", False),
        ([sys.executable, "-c", "raise SystemExit(3)"], "exited with code 3", False),
        ([sys.executable, "-c", "pass"], "exited with code 0", True),
    ):
        child = subprocess.Popen(argv)
        pidfd = os.pidfd_open(child.pid)
        if argv[0] == "sleep":
            os.kill(child.pid, signal.SIGKILL)
        os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOWAIT)  # ended, not reaped
        assert exit_of(child.pid) == (how, orderly)
        child.wait()
        os.close(pidfd)
        assert exit_of(child.pid) == ("ended", False), "reaped: nothing left to read"


def test_the_watch_reports_a_process_that_ended_and_keeps_its_owners_deadlines():
    ended, ticks, done = [], [], threading.Event()

    def on_ended(pid, how, orderly):
        ended.append((pid, how, orderly))
        done.set()

    def on_tick():
        ticks.append(1)
        return None

    child = subprocess.Popen(["sleep", "30"])
    watch = ProcessWatch(on_ended, on_tick)
    try:
        watch.want({child.pid})
        os.kill(child.pid, signal.SIGKILL)
        assert done.wait(30), "the end of the process was not reported"
    finally:
        watch.close()
        child.wait()
    assert ended[0][0] == child.pid and ended[0][2] is False
    assert ticks, "the owner's tick runs on every turn"


# --- the hold of a node's commands ----------------------------------------------------------


def test_a_held_gate_admits_no_set_and_its_watchdog_sleeps_until_the_hold_ends():
    gate = CommandGate(timeout_s=0.1)
    gate.activate(1.0)
    gate.hold()
    assert not gate.admit(2.0, {"a": 1.5}, ["a"])
    assert not gate.overdue(5.0) and not gate.safe, "the stand-in speaks meanwhile"
    assert gate.unhold(6.0)
    assert not gate.admit(6.05, {"a": 5.9}, ["a"]), "a set from before the end of the hold"
    assert gate.admit(6.1, {"a": 6.05}, ["a"])
    assert not gate.unhold(7.0), "nothing held"


def test_a_node_waits_until_its_stand_in_watches_its_process_and_no_longer_stands_in():
    from types import SimpleNamespace

    from leapp_ros.node.stand_in_handshake import StandInHandshake

    taken = []
    node = SimpleNamespace(create_subscription=lambda *args: None)
    handshake = StandInHandshake(node, lambda: ["policy"], lambda: taken.append(1))

    def take(**record):
        record = {"name": "/ns/_leapp_stand_in", "nodes": ["policy"], **record}
        handshake._take(SimpleNamespace(data=json.dumps(record)))

    me, dead = os.getpid(), 1
    assert not handshake.clear(), "no record yet"
    take(name="/ns/_leapp_stand_in_preprocess", nodes=["preprocess"], watching={}, covering={})
    assert not handshake.clear(), "only another host's stand-in spoke"
    take(watching={"policy": dead}, covering={"policy": {"pid": dead}})
    assert not handshake.clear(), "watching the dead process"
    take(watching={"policy": me}, covering={"policy": {"pid": dead}})
    assert not handshake.clear(), "still standing in"
    take(watching={"policy": me}, covering={})
    assert handshake.clear() and len(taken) == 4
    take(name="/ns/_leapp_stand_in_preprocess", nodes=["preprocess"], watching={}, covering={})
    assert handshake.clear(), "another host's stand-in, for other nodes, changes nothing"
    take(watching={"policy": dead}, covering={"policy": {"pid": dead}})
    assert not handshake.clear()
