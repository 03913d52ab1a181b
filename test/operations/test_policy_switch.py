"""Switching policies on a running graph over real DDS, in every deployment mode, at the
deployed QoS (best-effort subscriptions of depth 1).

The arm of :mod:`support.sim` (preprocess: JointState + Imu -> obs; policy: obs ->
joint_targets, 50 Hz, ``ports.joint_targets.blend_s`` 0.1 s: 5 commands) runs policy A; B has
other weights (:mod:`support.switch_policies`), F gives NaN. One graph per mode, switched
A -> B (parameter ``load`` set on every node, as ``ros2 param set`` does), refused an export
with other ports, B -> F (rolled back), then B -> A with ``leapp-ros switch``, then deactivate
/ activate.

Ticks are sent one at a time while a switch loads and each must be answered (no missed tick).
Every command before the take-over (the run the status names, ``first_run``) equals eager
PyTorch of the old policy, command ``k`` from it on ``last + (k / N) * (eager_new_k - last)``
(``last`` the command before, ``k = 1 .. N``), then eager PyTorch of the new policy, value by
value within 1e-5. Every wait ends on an event (a command, a status record), within a
generous overall timeout; ``pytest -s`` prints the take-over run and the commands checked.
"""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest
import yaml
from support.sim import (
    REFERENCE,
    TICK_S,
    Reading,
    eager_targets,
    export_arm_policy,
    imu_message,
    joint_state_message,
)
from support.switch_policies import export_arm_variant

from leapp_ros.testing import Deployment, GraphOptions, GraphUnderTest
from leapp_ros.testing.probe import qos, ros_env

pytestmark = [pytest.mark.ros, pytest.mark.slow]

BLEND_S = 0.1
COMMANDS = 5  # ceil(BLEND_S * 50 Hz)
SAFE = [0.2, -0.4, 0.3]
TOLERANCE = 1e-5
WAIT_S = 30.0  # a generous bound on any one event
OUTCOME_S = 120.0  # a generous bound on a switch's outcome (ticks flow meanwhile)
JOINTS_ORDER = ("elbow", "wrist", "shoulder")


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    found = {
        "A": export_arm_policy(tmp_path_factory.mktemp("a")),
        "B": export_arm_variant(tmp_path_factory.mktemp("b"), seed=11),
        "F": export_arm_variant(tmp_path_factory.mktemp("f"), seed=13, failing=True),
    }
    for label, export in found.items():
        export.label = label
    return found


@pytest.fixture(scope="module", params=list(Deployment), ids=str)
def rig(request, exports, tmp_path_factory):
    path = tmp_path_factory.mktemp("params") / "switch.yaml"
    ports = {"joint_targets": {"safe_values": SAFE, "blend_s": BLEND_S}}
    document = {"/**": {"ros__parameters": {"rate_hz": 1 / TICK_S, "ports": ports}}}
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    options = GraphOptions(request.param, params_file=path)
    with GraphUnderTest(exports["A"].path, options) as graph:
        yield Rig(graph, request.param, exports["A"])


class Rig:
    """The arm's sensor messages sent through ``graph`` one tick at a time, the commands and
    diagnostics that come back, and the nodes' ``load`` parameters."""

    def __init__(self, graph: GraphUnderTest, deployment: Deployment, running):
        from diagnostic_msgs.msg import DiagnosticArray
        from lifecycle_msgs.srv import ChangeState

        self.graph, self.deployment = graph, deployment
        ns = graph.plan.namespace
        self.nodes = [f"{ns}/leapp_fused"] if graph.fused else [f"{ns}/preprocess", f"{ns}/policy"]
        probe = graph.probe
        self.inbox = graph.endpoints.output("policy/joint_targets")[2]
        self.diagnostics: list = []
        probe.node.create_subscription(
            DiagnosticArray, "/diagnostics", self.diagnostics.append, qos(depth=1000)
        )
        self.change_state = probe.node.create_client(ChangeState, f"{self.nodes[-1]}/change_state")
        probe.spin_until(self.change_state.service_is_ready, WAIT_S, "the lifecycle service")
        probe.spin_until(lambda: not probe.connection_gaps(ns), WAIT_S, "every hop matched")
        self.rng = np.random.default_rng(3)
        self.ticks = 0
        self.clients: dict = {}
        self.running = running  # the export the graph runs (a test that switches sets it)

    def reading(self) -> Reading:
        return Reading(
            position=np.asarray(REFERENCE) + self.rng.normal(0.0, 0.1, 3),
            velocity=self.rng.normal(0.0, 0.5, 3),
            gyro=self.rng.normal(0.0, 0.3, 3),
            accel=np.array([0.0, 0.0, 9.81]) + self.rng.normal(0.0, 0.2, 3),
            quat=np.array([1.0, 0.0, 0.0, 0.0]),
        )

    def step(self) -> tuple[Reading, np.ndarray]:
        """One tick that must be answered: (its reading, the command)."""
        ns, before, reading = self.graph.plan.namespace, len(self.inbox), self.reading()
        stamp = self.ticks * TICK_S
        self.graph.publish(
            {
                f"{ns}/preprocess/imu": imu_message(reading, stamp),
                f"{ns}/preprocess/joint_states": joint_state_message(reading, stamp, JOINTS_ORDER),
            }
        )
        self.ticks += 1
        self.graph.probe.spin_until(lambda: len(self.inbox) > before, WAIT_S, "a command")
        return reading, np.asarray(self.inbox[before].data, dtype=np.float64)

    def settle(self, policy) -> None:
        """Ticks until two commands in a row equal eager PyTorch of ``policy``."""
        settled = 0
        for _ in range(6 * COMMANDS):
            reading, command = self.step()
            eager = eager_targets(policy, reading)
            settled = settled + 1 if np.allclose(command, eager, rtol=0, atol=TOLERANCE) else 0
            if settled == 2:
                return
        raise AssertionError("commands never settled on eager PyTorch's")

    def quiet(self) -> None:
        """Ticks until no node has a switch in progress (a node that took over in a test
        before finishes its probation: it runs on ticks)."""
        busy = ("loading", "ready", "probation")
        deadline = time.monotonic() + OUTCOME_S

        def states():
            return [(r.get("switch") or {}).get("state") for r in self.graph.status().values()]

        while any(state in busy for state in states()):
            assert time.monotonic() < deadline, f"a switch never ended: {self.graph.status()}"
            self.step()

    def runs(self) -> int:
        return self.graph.wait_received()["policy"]["runs"]

    def switch(self) -> dict:
        return self.graph.status()["policy"].get("switch") or {}

    def ask(self, node: str, path) -> object:
        """Set ``load`` of ROS node ``node`` (as ``ros2 param set`` does); the answer's
        future (its result: ``results[0]``)."""
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter

        probe = self.graph.probe
        client = self.clients.get(node)
        if client is None:
            client = self.clients[node] = probe.node.create_client(
                SetParameters, f"{node}/set_parameters"
            )
        probe.spin_until(client.service_is_ready, WAIT_S, f"{node}/set_parameters")
        load = Parameter("load", Parameter.Type.STRING, str(path)).to_parameter_msg()
        return client.call_async(SetParameters.Request(parameters=[load]))

    def request(self, node: str, path) -> object:
        """:meth:`ask`, waiting for the answer."""
        future = self.ask(node, path)
        self.graph.probe.spin_until(future.done, WAIT_S, "the answer to load")
        return future.result().results[0]

    def transition(self, transition_id: int) -> None:
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState

        request = ChangeState.Request(transition=Transition(id=transition_id))
        future = self.change_state.call_async(request)
        self.graph.probe.spin_until(future.done, WAIT_S, "the lifecycle transition")
        assert future.result().success

    def diagnostic(self, condition, what: str):
        def found():
            for array in self.diagnostics:
                for status in array.status:
                    if condition(status):
                        return status
            return None

        return self.graph.probe.spin_until(found, WAIT_S, what)


def tick_through_switch(rig: Rig, done) -> list[tuple[Reading, np.ndarray]]:
    """Ticks, each answered, until ``done()`` (the switch's outcome) and two more."""
    rows, deadline = [], time.monotonic() + OUTCOME_S
    while not done():
        rows.append(rig.step())
        assert time.monotonic() < deadline, f"no outcome of the switch: {rig.switch()}"
    rows += [rig.step(), rig.step()]
    return rows


def check_commands(rows, old, new, first: int, runs_before: int, last: np.ndarray) -> int:
    """Commands before run ``first`` equal eager ``old``, from it on ``new`` blended in from
    the command before; the number of commands checked."""
    start = first - runs_before - 1  # the position of the first command of the new policy
    assert 0 <= start < len(rows), (first, runs_before, len(rows))
    for position, (reading, command) in enumerate(rows):
        if position < start:
            expected = eager_targets(old, reading)
        else:
            if position == start:
                last = rows[position - 1][1] if position else last
            k = position - start + 1
            target = eager_targets(new, reading).astype(np.float64)
            expected = last + min(k / COMMANDS, 1.0) * (target - last)
        np.testing.assert_allclose(
            command, expected, rtol=0, atol=TOLERANCE, err_msg=f"command {position}"
        )
    return len(rows)


def test_a_switch_takes_over_at_a_run_and_every_command_is_eager_blended(rig, exports):
    old, new = rig.running, exports["B" if rig.running is exports["A"] else "A"]
    rig.quiet()
    rig.settle(old.policy)
    runs_before, last = rig.runs(), np.asarray(rig.inbox[-1].data, dtype=np.float64)
    asked = {n: (r.get("switch") or {}).get("request", 0) for n, r in rig.graph.status().items()}
    answers = [rig.ask(node, new.path) for node in rig.nodes]  # ticks go on meanwhile

    def every_node_switched() -> bool:  # (each node's probation runs on ticks of its own)
        switches = {n: r.get("switch") or {} for n, r in rig.graph.status().items()}
        return all(s.get("state") == "switched" and s["request"] > asked[n]
                   for n, s in switches.items())  # fmt: skip

    rows = tick_through_switch(rig, every_node_switched)
    assert all(answer.result().results[0].successful for answer in answers)
    switch = rig.switch()
    first = switch["first_run"]["policy"]
    rig.running = new
    checked = check_commands(rows, old.policy, new.policy, first,
                             runs_before, last)  # fmt: skip
    assert rig.runs() == runs_before + len(rows), "a set went unanswered"
    rig.diagnostic(lambda s: "policy switched to" in s.message or "switched to" in
                   dict((v.key, v.value) for v in s.values).get("switch", ""),
                   "diagnostics naming the switch")  # fmt: skip
    print(f"\n[{rig.deployment}] switch {old.label} -> {new.label} took over at run {first} (tick "
          f"{switch['tick']}): {checked} commands checked, wrong: 0")  # fmt: skip


def test_an_export_with_other_ports_is_refused_with_the_differences(rig, exports, seed):
    result = rig.request(rig.nodes[-1], seed.path)
    assert not result.successful
    assert "does not fit the running graph" in result.reason
    assert "outputs ['joint_targets'] -> ['action']" in result.reason
    assert "policy/obs: shape [15] -> [9]" in result.reason
    rig.settle(rig.running.policy)  # still running what it ran


def test_a_policy_giving_nan_is_rolled_back_without_a_missed_tick(rig, exports):
    rig.quiet()
    running = rig.running.policy
    rig.settle(running)
    runs_before, last = rig.runs(), np.asarray(rig.inbox[-1].data, dtype=np.float64)
    answers = [rig.ask(node, exports["F"].path) for node in rig.nodes]
    rows = tick_through_switch(rig, lambda: rig.switch().get("state") == "rolled_back")
    assert all(answer.result().results[0].successful for answer in answers)
    switch = rig.switch()
    assert "NaN/inf in output(s) ['joint_targets']" in switch["reason"]
    first = switch["first_run"]["policy"]
    # the failing set is answered by B, blended in again from the last command
    check_commands(rows, running, running, first, runs_before, last)
    assert rig.runs() == runs_before + len(rows), "a set went unanswered"
    status = rig.diagnostic(
        lambda s: s.level == b"\x02" and s.name.endswith("/policy") and "rolled back" in s.message,
        "an ERROR of the policy node: rolled back",
    )
    assert "NaN/inf in output(s) ['joint_targets']" in status.message


def test_a_switch_asked_while_inactive_takes_over_at_the_first_run_after_activate(rig, exports):
    from lifecycle_msgs.msg import Transition

    old, new = rig.running, exports["B" if rig.running is exports["A"] else "A"]
    rig.quiet()
    rig.settle(old.policy)
    before = len(rig.inbox)
    rig.transition(Transition.TRANSITION_DEACTIVATE)
    rig.graph.probe.spin_until(lambda: len(rig.inbox) > before, WAIT_S, "the safe action")
    np.testing.assert_allclose(rig.inbox[-1].data, SAFE, rtol=0, atol=1e-6)
    for node in rig.nodes:
        result = rig.request(node, new.path)
        assert result.successful, result.reason
    rig.graph.probe.spin_until(
        lambda: all((r.get("switch") or {}).get("state") == "ready"
                    for r in rig.graph.status().values()),
        WAIT_S, "every node warm, waiting for a run",
    )  # fmt: skip
    runs_before = rig.runs()
    rig.transition(Transition.TRANSITION_ACTIVATE)
    rows = tick_through_switch(rig, lambda: rig.switch().get("state") == "switched")
    rig.running = new
    first = rig.switch()["first_run"]["policy"]
    assert first == runs_before + 1, "the first run after activation was the new policy's"
    check_commands(rows, old.policy, new.policy, first, runs_before, np.asarray(SAFE))


def test_leapp_ros_switch_switches_the_graph_and_lifecycle_goes_on(rig, exports):
    from lifecycle_msgs.msg import Transition

    old, new = rig.running, exports["B" if rig.running is exports["A"] else "A"]
    rig.quiet()
    rig.settle(old.policy)
    runs_before, last = rig.runs(), np.asarray(rig.inbox[-1].data, dtype=np.float64)
    command = [sys.executable, "-m", "leapp_ros.tools.cli", "switch", str(old.path), str(new.path),
               "--timeout", str(WAIT_S)]  # fmt: skip
    process = subprocess.Popen(
        command,
        env=ros_env(rig.graph.domain_id),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        rows = tick_through_switch(rig, lambda: process.poll() is not None)
    except AssertionError as e:
        process.kill()
        raise AssertionError(
            f"leapp-ros switch gave no outcome: {process.communicate()[0]}"
        ) from e
    output = process.communicate()[0]
    assert process.returncode == 0, output
    assert "switched to" in output
    first = rig.switch()["first_run"]["policy"]
    rig.running = new
    check_commands(rows, old.policy, new.policy, first, runs_before, last)
    rig.transition(Transition.TRANSITION_DEACTIVATE)
    rig.transition(Transition.TRANSITION_ACTIVATE)
    rig.settle(new.policy)


def test_leapp_ros_switch_to_a_failing_policy_exits_1_and_switches_the_others_back(rig, exports):
    rig.quiet()
    running = rig.running
    rig.settle(running.policy)
    command = [sys.executable, "-m", "leapp_ros.tools.cli", "switch", str(running.path),
               str(exports["F"].path), "--timeout", str(WAIT_S)]  # fmt: skip
    process = subprocess.Popen(
        command,
        env=ros_env(rig.graph.domain_id),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        tick_through_switch(rig, lambda: process.poll() is not None)
    except AssertionError as e:
        process.kill()
        output = process.communicate()[0]
        raise AssertionError(f"leapp-ros switch gave no outcome: {output}") from e
    output = process.communicate()[0]
    assert process.returncode == 1, output
    assert f"{rig.nodes[-1]}: rolled back: NaN/inf in output(s) ['joint_targets']" in output
    if not rig.graph.fused:  # preprocess switched (its model is A's), then went back
        assert f"then back to {running.path.resolve()}" in output, output
        rig.graph.probe.spin_until(
            lambda: (
                rig.graph.status()["preprocess"]["switch"]["export"] == str(running.path.resolve())
            ),
            WAIT_S,
            "preprocess switched back",
        )
    rig.settle(running.policy)
