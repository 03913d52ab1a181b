"""Operating a graph as a robot needs, over real DDS, in every deployment mode: command limits,
the input watchdog and its safe action, the e-stop (service and latched topic), lifecycle
deactivate / activate (through ``ros2 lifecycle``), ``/diagnostics`` (through ``ros2 topic
echo``) and, in a graph started with ``autostart: false``, nothing published before the
lifecycle services activate it (the ``ros2 lifecycle`` CLI on such a graph:
test/tools/test_pipeline_launch.py).

The seed pipeline (preprocess -> policy, 50 Hz) runs with a params file that limits the
policy's ``action`` to [-0.5, 0.5] and makes its safe action fixed values; every command is
compared with eager PyTorch's (clamped), or with the safe values.
"""

from __future__ import annotations

import array
import os
import shutil
import subprocess
import time

import pytest
import torch
import yaml
from support.ros import eager_seed, exited, ros_graph

from leapp_ros.run.processes import load_plan, plan_processes
from leapp_ros.testing import ros_env
from leapp_ros.testing.probe import qos

pytestmark = [pytest.mark.ros, pytest.mark.slow]

NAMESPACE = "/torch_pipeline"
LIMIT = 0.5
SAFE = [0.1, -0.1, 0.2, -0.2, 0.0, 0.05]
TIMEOUT_MS = 200.0
ESTOP_TOPIC = "/ops_test/estop"
PERIOD_S = 1 / 50  # the export's frequency: the safe action's period
ROS2 = shutil.which("ros2")


def _params(path, **extra):
    document = {
        "/**": {
            "ros__parameters": {
                "input_timeout_ms": TIMEOUT_MS,
                "estop_topic": ESTOP_TOPIC,
                "ports": {"action": {"safe_values": SAFE, "min": -LIMIT, "max": LIMIT}},
                **extra,
            }
        }
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def params(tmp_path_factory):
    return _params(tmp_path_factory.mktemp("params") / "robot.yaml")


@pytest.fixture(scope="module", params=["processes", "composed", "fused"])
def live(request, seed, params):
    from leapp_ros.testing import MODES, GraphUnderTest

    with GraphUnderTest(seed.path, params_file=params, **MODES[request.param]) as started:
        yield started


def command_node(graph) -> str:
    return f"{NAMESPACE}/{'leapp_fused' if graph.fused else 'policy'}"


def floats(values):
    from std_msgs.msg import Float32MultiArray

    return Float32MultiArray(data=array.array("f", [float(v) for v in values]))


class Inputs:
    """The preprocess inputs published raw, and the commands that come back."""

    def __init__(self, graph, seed):
        from std_msgs.msg import Float32MultiArray

        self.graph, self.seed = graph, seed
        self.publishers = [
            graph.probe.publisher(f"{NAMESPACE}/preprocess/{port}", Float32MultiArray)
            for port in ("state", "velocity")
        ]
        for publisher in self.publishers:
            graph.probe.wait_matched(publisher)
        self.inbox, self._end = subscription(
            graph, f"{NAMESPACE}/policy/action", Float32MultiArray
        )
        self._late = None  # the answer of a pair sent twice by the last step

    def commands(self):
        return [torch.tensor(list(message.data)) for message in self.inbox]

    def send(self, values=None):
        """One random pair (or ``values``, a pair sent before); its eager action, clamped into
        the limits."""
        state, velocity = values or (torch.randn(6) * 3, torch.randn(3) * 3)
        self.last_sent = (state, velocity)
        for publisher, value in zip(self.publishers, (state, velocity), strict=True):
            publisher.publish(floats(value.tolist()))
        _, action = eager_seed(self.seed, state, velocity)
        return action.clamp(-LIMIT, LIMIT)

    def step(self, timeout_s=15.0, resend_s=2.0):
        """One pair, answered like eager PyTorch (clamped): returns the command. Safe actions
        may come before it (the watchdog of a graph left idle), never a wrong command.

        A pair not answered within ``resend_s`` is published again, the same values: the
        subscriptions are best effort, and a publisher's first message can be lost while the
        node's reader has not yet matched it (discovery completes on each side on its own). A
        duplicate answer that arrives late is skipped by the next step, which knows it.
        """
        before = len(self.inbox)
        expected = self.send()
        pair = self.last_sent
        stale, self._late = self._late, None
        if stale is not None and torch.allclose(stale, expected, rtol=1e-5, atol=1e-5):
            stale = None  # (both clamped alike: a duplicate would be this step's answer too)

        def answered():
            fresh = [c for c in self.commands()[before:] if not is_safe(c)]
            if stale is not None:
                fresh = [c for c in fresh if not torch.allclose(c, stale, rtol=1e-5, atol=1e-5)]
            return fresh[:1]

        deadline = time.monotonic() + timeout_s
        while True:
            resend_at = min(deadline, time.monotonic() + resend_s)
            self.graph.probe.spin_until(
                lambda at=resend_at: answered() or time.monotonic() > at, resend_s + 5, "a command"
            )
            if answered():
                break
            assert time.monotonic() < deadline, (
                f"timed out after {timeout_s} s waiting for a command"
            )
            self.send(pair)
            self._late = expected  # its answer may come after this step's
        (command,) = answered()
        torch.testing.assert_close(command, expected, rtol=1e-5, atol=1e-5)
        return command

    def close(self):
        for publisher in self.publishers:
            self.graph.probe.node.destroy_publisher(publisher)
        self._end()


def subscription(graph, topic, message_type):
    """A list receiving every message on ``topic``, and what ends the subscription."""
    inbox = []
    node = graph.probe.node
    handle = node.create_subscription(message_type, topic, inbox.append, qos(depth=1000))
    return inbox, lambda: node.destroy_subscription(handle)


@pytest.fixture
def inputs(live, seed):
    sender = Inputs(live, seed)
    yield sender
    sender.close()


def is_safe(command) -> bool:
    return torch.allclose(command, torch.tensor(SAFE), atol=1e-6)


def call_service(graph, service_type, name, request, probe=None, *, attempts=1, wait_s=10.0):
    """The answer of service ``name`` to ``request``. A service whose reply path is not yet
    matched when it answers (right after it appeared: the request can arrive first) loses
    that reply; ``attempts`` > 1 asks again after ``wait_s`` without one (for idempotent
    requests only)."""
    probe = probe or graph.probe
    client = probe.node.create_client(service_type, name)
    try:
        probe.spin_until(client.service_is_ready, 20, f"service {name}")
        for attempt in range(1, attempts + 1):
            future = client.call_async(request)
            try:
                probe.spin_until(future.done, wait_s, f"the answer of {name}")
            except AssertionError:
                client.remove_pending_request(future)
                if attempt == attempts:
                    raise
                continue
            return future.result()
    finally:
        probe.node.destroy_client(client)


TRANSITION_TARGETS = {
    "configure": "inactive",
    "activate": "active",
    "deactivate": "inactive",
    "cleanup": "unconfigured",
    "shutdown": "finalized",
}


def lifecycle_service(probe, node: str, transition: str | None = None) -> str:
    """What ``lifecycle`` does, through the lifecycle services themselves (the CLI takes
    seconds per call): the state's label, or after ``transition`` the new one. A transition
    whose answer was lost counts when the node is in its target state, else is asked again."""
    from lifecycle_msgs.srv import ChangeState, GetState

    def state() -> str:
        request = GetState.Request()
        answer = call_service(
            None, GetState, f"{node}/get_state", request, probe, attempts=4, wait_s=3.0
        )
        return answer.current_state.label

    if transition is not None:
        request = ChangeState.Request()
        request.transition.label = transition
        for attempt in range(3):
            try:
                answer = call_service(
                    None, ChangeState, f"{node}/change_state", request, probe, wait_s=5.0
                )
            except AssertionError:
                if state() == TRANSITION_TARGETS.get(transition):
                    break  # it happened; only its answer was lost
                if attempt == 2:
                    raise
                continue
            assert answer.success, f"{node}: transition {transition} refused"
            break
    return state()


def enable(graph, on: bool):
    from std_srvs.srv import SetBool

    answer = call_service(  # idempotent: asked again if its answer was lost
        graph,
        SetBool,
        f"{command_node(graph)}/enable",
        SetBool.Request(data=on),
        attempts=3,
        wait_s=4.0,
    )
    assert answer.success, answer.message


def ros2(domain_id: int, *args: str, timeout_s: float = 30.0) -> str:
    if ROS2 is None:
        pytest.skip("the ros2 CLI is not installed (scripts/setup.sh with ../shared/ros2-launch)")
    result = subprocess.run(
        [ROS2, *args],
        env=ros_env(domain_id),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert result.returncode == 0, f"ros2 {' '.join(args)}: {result.stdout}{result.stderr}"
    return result.stdout


def lifecycle(domain_id: int, node: str, transition: str | None = None) -> str:
    """``ros2 lifecycle get`` (or ``set`` with ``transition``), retried while the CLI has
    not discovered the node yet (no daemon: discovery takes up to a few seconds)."""
    verb = ["get", node] if transition is None else ["set", node, transition]
    deadline = time.monotonic() + 30
    while True:
        try:
            return ros2(domain_id, "lifecycle", *verb, "--no-daemon", "--spin-time", "2").strip()
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def drain(graph, inbox, quiet_s=0.3, timeout_s=10.0):
    """Spin until nothing arrived in ``inbox`` for ``quiet_s`` (a backlog queued while the
    test ran a CLI command is delivered)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        count = len(inbox)
        graph.spin(quiet_s)
        if len(inbox) == count:
            return
    raise AssertionError(f"messages kept coming for {timeout_s} s")


def wait_for_commands(inputs, count, what, timeout_s=5.0):
    inputs.graph.probe.spin_until(lambda: len(inputs.inbox) >= count, timeout_s, what)


# --- limits ---------------------------------------------------------------------------------


def test_commands_are_clamped_into_min_max_and_counted(live, inputs):
    for _ in range(5):
        inputs.step()  # compares with eager PyTorch's, clamped into [-0.5, 0.5]
    live.probe.spin_until(
        lambda: live.status()["policy"].get("clamped", 0) > 0, 5, "clamped runs counted"
    )
    assert all(abs(float(v)) <= LIMIT for c in inputs.commands() for v in c)


# --- watchdog -------------------------------------------------------------------------------


def test_a_stalled_input_brings_the_safe_action_within_a_period_and_commands_resume(live, inputs):
    inputs.step()
    stopped = time.monotonic()
    before = len(inputs.inbox)
    wait_for_commands(inputs, before + 1, "the safe action after the input timeout")
    arrived = time.monotonic() - stopped
    assert is_safe(inputs.commands()[before]), inputs.commands()[before]
    # the watchdog fires once the timeout passed, on the next tick of its period
    assert arrived < TIMEOUT_MS / 1000 + 10 * PERIOD_S + 0.2, f"safe action after {arrived:.3f} s"
    assert arrived >= TIMEOUT_MS / 1000 - 0.05, f"safe action too early: {arrived:.3f} s"
    live.spin(0.3)
    repeated = inputs.commands()[before:]
    assert len(repeated) >= 5 and all(is_safe(c) for c in repeated), "safe action every period"
    live.probe.spin_until(
        lambda: (
            live.status()["policy"].get("timeouts", 0) > 0
            and live.status()["policy"].get("safe_action")
        ),
        5,
        "timeouts counted and safe_action in the status",
    )
    for _ in range(3):
        inputs.step()  # normal commands, equal to eager, on the next set


# --- e-stop ---------------------------------------------------------------------------------


def test_the_enable_service_engages_the_estop_and_release_needs_a_fresh_set(live, inputs):
    inputs.step()
    before = len(inputs.inbox)
    engaged = time.monotonic()
    enable(live, False)
    wait_for_commands(inputs, before + 1, "the safe action on e-stop")
    assert time.monotonic() - engaged < 2.0
    for _ in range(5):  # inputs keep coming: only safe actions go out
        inputs.send()
        live.spin(0.05)
    assert all(is_safe(c) for c in inputs.commands()[before:])
    live.probe.spin_until(
        lambda: live.status()["policy"].get("estop") is True, 5, "estop in the status"
    )
    enable(live, True)
    for _ in range(3):
        inputs.step()  # the next set after the release is answered like eager
    live.probe.spin_until(lambda: live.status()["policy"].get("estop") is False, 5, "released")


def test_the_estop_topic_latched_or_plain_stops_every_node_until_released(live, inputs):
    from std_msgs.msg import Bool

    estop = live.probe.node.create_publisher(Bool, ESTOP_TOPIC, qos(transient_local=True, depth=1))
    try:
        inputs.step()
        before = len(inputs.inbox)
        estop.publish(Bool(data=True))
        wait_for_commands(inputs, before + 1, "the safe action on the e-stop topic")
        live.probe.spin_until(
            lambda: all(s.get("estop") for s in live.status().values()), 5, "every node stopped"
        )
        inputs.send()
        live.spin(0.2)
        assert all(is_safe(c) for c in inputs.commands()[before:])
        plain = live.probe.publisher(ESTOP_TOPIC, Bool)  # volatile, as `ros2 topic pub`
        live.probe.wait_matched(plain, 1 if live.fused else 2)
        plain.publish(Bool(data=False))
        live.probe.spin_until(
            lambda: not any(s.get("estop") for s in live.status().values()), 5, "released"
        )
        live.probe.node.destroy_publisher(plain)
        for _ in range(3):
            inputs.step()
    finally:
        live.probe.node.destroy_publisher(estop)


# --- lifecycle ------------------------------------------------------------------------------


def test_deactivate_publishes_the_safe_action_and_activate_resumes(live, inputs):
    node = command_node(live)
    inputs.step()
    assert lifecycle_service(live.probe, node) == "active"
    before = len(inputs.inbox)
    lifecycle(live.domain_id, node, "deactivate")
    wait_for_commands(inputs, before + 1, "the safe action on deactivate")
    assert all(is_safe(c) for c in inputs.commands()[before:])
    assert lifecycle(live.domain_id, node).startswith("inactive")
    drain(live, inputs.inbox)  # what was sent before the node deactivated
    assert all(is_safe(c) for c in inputs.commands()[before:])
    before = len(inputs.inbox)
    inputs.send()
    live.spin(0.5)  # inactive: no command, and no watchdog
    assert len(inputs.inbox) == before, "an inactive node published"
    assert lifecycle_service(live.probe, node, "activate") == "active"
    for _ in range(3):
        inputs.step()


# --- diagnostics ----------------------------------------------------------------------------


def test_diagnostics_name_every_pipeline_node_with_its_counters(live, inputs):
    from diagnostic_msgs.msg import DiagnosticArray

    inputs.step()
    arrays, end = subscription(live, "/diagnostics", DiagnosticArray)
    live.probe.spin_until(
        lambda: (
            {s.name for a in arrays for s in a.status}
            >= {f"{NAMESPACE}/preprocess", f"{NAMESPACE}/policy"}
        ),
        5,
        "a diagnostic status of every pipeline node",
    )
    status = next(s for a in arrays for s in a.status if s.name == f"{NAMESPACE}/policy")
    values = {kv.key: kv.value for kv in status.values}
    assert status.hardware_id == "torch_pipeline"
    for key in ("runs", "dropped", "timeouts", "clamped", "step_limited", "safe_actions"):
        assert key in values, values
    for key in ("firing_rate_hz", "last_set_age_s", "lifecycle", "estop"):
        assert key in values, values
    assert values["lifecycle"] == "active"
    end()
    echoed = ros2(
        live.domain_id,
        *("topic", "echo", "/diagnostics", "diagnostic_msgs/msg/DiagnosticArray"),
        *("--once", "--no-daemon", "--spin-time", "3", "--timeout", "20"),
    )
    document = yaml.safe_load(echoed.split("\n---")[0])
    names = {s["name"] for s in document["status"]}
    assert names & {f"{NAMESPACE}/preprocess", f"{NAMESPACE}/policy"}, echoed


def test_a_timeout_is_a_diagnostic_warning(live, inputs):
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

    inputs.step()
    arrays, end = subscription(live, "/diagnostics", DiagnosticArray)
    name = f"{NAMESPACE}/policy"
    live.probe.spin_until(
        lambda: any(
            s.name == name and s.level == DiagnosticStatus.WARN and "safe action" in s.message
            for a in arrays
            for s in a.status
        ),
        5,
        "a WARN saying the policy publishes its safe action",
    )
    # commands flow again: the first report of a period without timeouts says so
    deadline = time.monotonic() + 10
    seen = len(arrays)
    while True:
        inputs.step()
        live.spin(0.02)
        ours = [s for a in arrays[seen:] for s in a.status if s.name == name]
        # (clamped commands still warn: the inputs are large on purpose)
        if any("timeout" not in s.message and "safe action" not in s.message for s in ours):
            break
        assert time.monotonic() < deadline, f"timed out still: {[s.message for s in ours]}"
    end()


# --- autostart: false -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["processes", "composed", "fused"])
def test_with_autostart_false_nothing_is_published_until_lifecycle_activates(mode, seed, tmp_path):
    from std_msgs.msg import Float32MultiArray

    params = _params(tmp_path / "params.yaml", autostart=False)
    plan = load_plan(seed.path, params_file=params)
    processes = plan_processes(
        plan, composed=mode == "composed", fused=mode == "fused", params_file=params
    )
    starts = [(process.module, process.argv()[3:]) for process in processes]
    nodes = ["leapp_fused"] if mode == "fused" else ["preprocess", "policy"]
    with ros_graph(tmp_path, starts) as (probe, running, _domain_id):
        actions = probe.subscribe(f"{NAMESPACE}/policy/action", Float32MultiArray)
        publishers = [
            probe.publisher(f"{NAMESPACE}/preprocess/{port}", Float32MultiArray)
            for port in ("state", "velocity")
        ]
        # through the lifecycle services (the ros2 CLI on them: test_pipeline_launch, in each
        # mode, and the deactivate test above)

        def get(node):
            return lifecycle_service(probe, f"{NAMESPACE}/{node}")

        def change(node, transition):
            lifecycle_service(probe, f"{NAMESPACE}/{node}", transition)

        for node in nodes:
            assert get(node).startswith("unconfigured")
        exited(running)()

        def send():
            state, velocity = torch.randn(6), torch.randn(3)
            for publisher, value in zip(publishers, (state, velocity), strict=True):
                publisher.publish(floats(value.tolist()))
            return eager_seed(seed, state, velocity)[1].clamp(-LIMIT, LIMIT)

        for node in nodes:
            change(node, "configure")
            assert get(node).startswith("inactive")
        for publisher in publishers:
            probe.wait_matched(publisher)
        for _ in range(3):
            send()
            probe.spin_for(0.2)
        assert not actions, "a node published before activation"
        for node in nodes:
            change(node, "activate")
        probe.spin_for(0.5)  # (active and no inputs: the watchdog's safe action may come)
        for _ in range(3):
            before = len(actions)
            expected = send()

            def answered(b=before):
                received = [torch.tensor(list(m.data)) for m in actions[b:]]
                return [c for c in received if not is_safe(c)][:1]

            (got,) = probe.spin_until(answered, 10, "an action after activate")
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
        exited(running)()
    assert os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") in (None, "LOCALHOST")
