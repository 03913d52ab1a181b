"""Operating a graph as a robot needs, over real DDS, in every deployment mode: command limits,
the input watchdog and its safe action, the e-stop (service and latched topic), lifecycle
deactivate / activate (through ``ros2 lifecycle``), ``/diagnostics`` (through ``ros2 topic
echo``) and, in a graph started with ``autostart: false``, nothing published before the
lifecycle services activate it (the ``ros2 lifecycle`` CLI on such a graph:
test/tools/test_pipeline_launch.py).

The seed pipeline (preprocess -> policy, 50 Hz) runs with a params file that limits the
policy's ``action`` to [-0.5, 0.5] and makes its safe action fixed values; every command is
compared with eager PyTorch (clamped), or with the safe values.

The nodes run at their deployed QoS (best-effort subscriptions of depth 1): the harness sends
each input pair once, on hops matched both ways, and waits for its command before the next.
What must *not* happen (a command while e-stopped or inactive) is checked once the nodes'
statuses count the input as taken (``wait_received``), never after a pause; timing is the
node's own (the age of the last set when the watchdog fired), never the test's clock.
"""

from __future__ import annotations

import array
import collections
import os
import shutil
import subprocess
import time

import pytest
import torch
import yaml
from support.ros import eager_seed, exited, ros_graph

from leapp_ros.run.deployment import Deployment, GraphOptions
from leapp_ros.run.processes import load_plan, plan_processes
from leapp_ros.testing import ros_env
from leapp_ros.testing.probe import qos

pytestmark = [pytest.mark.ros, pytest.mark.slow]

NAMESPACE = "/torch_pipeline"
LIMIT = 0.5
SAFE = [0.1, -0.1, 0.2, -0.2, 0.0, 0.05]
TIMEOUT_MS = 200.0
ESTOP_TOPIC = "/ops_test/estop"
ROS2 = shutil.which("ros2")
WAIT_S = 20.0  # a generous bound on any one event


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


@pytest.fixture(scope="module", params=list(Deployment), ids=str)
def live(request, seed, params):
    from leapp_ros.testing import GraphUnderTest

    with GraphUnderTest(seed.path, GraphOptions(request.param, params_file=params)) as started:
        yield started


def command_node(graph) -> str:
    return f"{NAMESPACE}/{'leapp_fused' if graph.fused else 'policy'}"


def floats(values):
    from std_msgs.msg import Float32MultiArray

    return Float32MultiArray(data=array.array("f", [float(v) for v in values]))


class Inputs:
    """The preprocess inputs, sent through the harness (each pair once, on hops matched both
    ways), and the commands that come back."""

    def __init__(self, graph, seed):
        self.graph, self.seed = graph, seed
        self.inbox = graph.endpoints.output("policy/action")[2]

    def commands(self):
        return [torch.tensor(list(message.data)) for message in self.inbox]

    def send(self):
        """One random pair; its eager action, clamped into the limits."""
        state, velocity = torch.randn(6) * 3, torch.randn(3) * 3
        self.graph.publish({"preprocess/state": state, "preprocess/velocity": velocity})
        _, action = eager_seed(self.seed, state, velocity)
        return action.clamp(-LIMIT, LIMIT)

    def step(self):
        """One pair, answered like eager PyTorch (clamped): returns the command. Safe actions
        may come before it (the watchdog of a graph left idle), never a wrong command."""
        before = len(self.inbox)
        expected = self.send()

        def answered():
            return [c for c in self.commands()[before:] if not is_safe(c)][:1]

        try:
            (command,) = self.graph.probe.spin_until(answered, WAIT_S, "a command")
        except AssertionError as error:  # what each node received and did, for the record
            statuses = self.graph.probe.watch_status(self.graph.plan.namespace)
            raise AssertionError(f"{error}; statuses: {statuses}") from None
        torch.testing.assert_close(command, expected, rtol=1e-5, atol=1e-5)
        return command

    def send_unanswered(self):
        """One pair the graph must not answer (e-stopped, inactive): once every node took it
        (their statuses count it), no command has come of it and the policy did not run."""
        runs = self.graph.wait_received()["policy"]["runs"]
        before = len(self.inbox)
        self.send()
        status = self.graph.wait_received()
        assert status["policy"]["runs"] == runs, "the policy ran"
        assert all(is_safe(c) for c in self.commands()[before:]), "a command went out"
        return status


def subscription(graph, topic, message_type):
    """A list receiving every message on ``topic``, and what ends the subscription."""
    inbox = []
    node = graph.probe.node
    handle = node.create_subscription(message_type, topic, inbox.append, qos(depth=1000))
    return inbox, lambda: node.destroy_subscription(handle)


@pytest.fixture
def inputs(live, seed):
    return Inputs(live, seed)


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


def wait_for_commands(inputs, count, what):
    inputs.graph.probe.spin_until(lambda: len(inputs.inbox) >= count, WAIT_S, what)


def policy_reports(graph):
    """Every ``/diagnostics`` status of the policy node from now on, and what ends them."""
    from diagnostic_msgs.msg import DiagnosticArray

    arrays, end = subscription(graph, "/diagnostics", DiagnosticArray)
    name = f"{NAMESPACE}/policy"
    return (lambda: [s for a in arrays for s in a.status if s.name == name]), end


# --- limits ---------------------------------------------------------------------------------


def test_commands_are_clamped_into_min_max_and_counted(live, inputs):
    for _ in range(5):
        inputs.step()  # compares with eager PyTorch's, clamped into [-0.5, 0.5]
    live.probe.spin_until(
        lambda: live.status()["policy"].get("clamped", 0) > 0, WAIT_S, "clamped runs counted"
    )
    assert all(abs(float(v)) <= LIMIT for c in inputs.commands() for v in c)


# --- watchdog -------------------------------------------------------------------------------


def test_a_stalled_input_brings_the_safe_action_after_the_timeout_and_commands_resume(
    live, inputs
):
    from diagnostic_msgs.msg import DiagnosticStatus

    reports, end = policy_reports(live)
    inputs.step()
    before = len(inputs.inbox)
    wait_for_commands(inputs, before + 5, "the safe action after the input timeout")
    repeated = inputs.commands()[before:]
    assert all(is_safe(c) for c in repeated), "only the safe action, every period"
    status = live.probe.spin_until(
        lambda: (s := live.status()["policy"]).get("timeouts", 0) > 0 and s["safe_action"] and s,
        WAIT_S,
        "timeouts counted and safe_action in the status",
    )

    # not too early, by the node's own clock: the report it sent as the watchdog fired (the
    # first to count this timeout) gives the age of the last set at that moment
    def ages():
        values = [
            {kv.key: kv.value for kv in s.values}
            for s in reports()
            if s.level == DiagnosticStatus.WARN and "safe action" in s.message
        ]
        return [float(v["last_set_age_s"]) for v in values
                if v["timeouts"] == str(status["timeouts"])]  # fmt: skip

    age = min(live.probe.spin_until(ages, WAIT_S, "the WARN of the timeout"))
    assert age >= TIMEOUT_MS / 1000, f"the watchdog fired {age:.3f} s after the last set"
    end()
    for _ in range(3):
        inputs.step()  # normal commands, equal to eager, on the next set


# --- e-stop ---------------------------------------------------------------------------------


def test_the_enable_service_engages_the_estop_and_release_needs_a_fresh_set(live, inputs):
    inputs.step()
    before = len(inputs.inbox)
    enable(live, False)
    wait_for_commands(inputs, before + 1, "the safe action on e-stop")
    for _ in range(3):  # inputs keep coming: each taken, none answered
        assert inputs.send_unanswered()["policy"]["estop"] is True
    assert all(is_safe(c) for c in inputs.commands()[before:])
    enable(live, True)
    for _ in range(3):
        inputs.step()  # the next set after the release is answered like eager
    live.probe.spin_until(
        lambda: live.status()["policy"].get("estop") is False, WAIT_S, "released"
    )


def test_the_estop_topic_latched_or_plain_stops_every_node_until_released(live, inputs):
    from std_msgs.msg import Bool

    estop = live.probe.node.create_publisher(Bool, ESTOP_TOPIC, qos(transient_local=True, depth=1))
    try:
        inputs.step()
        before = len(inputs.inbox)
        estop.publish(Bool(data=True))
        wait_for_commands(inputs, before + 1, "the safe action on the e-stop topic")
        live.probe.spin_until(
            lambda: all(s.get("estop") for s in live.status().values()),
            WAIT_S,
            "every node stopped",
        )
        status = inputs.send_unanswered()
        assert all(record["estop"] for record in status.values())
        assert all(is_safe(c) for c in inputs.commands()[before:])
        plain = live.probe.publisher(ESTOP_TOPIC, Bool)  # volatile, as `ros2 topic pub`
        # the e-stop subscriptions are reliable: matched on the publisher's side, they ask for
        # what they missed
        live.probe.wait_matched(plain, 1 if live.fused else 2)
        plain.publish(Bool(data=False))
        live.probe.spin_until(
            lambda: not any(s.get("estop") for s in live.status().values()), WAIT_S, "released"
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
    inactive = live.probe.spin_until(
        lambda: (s := live.status()["policy"])["lifecycle"] == "inactive" and s,
        WAIT_S,
        "an inactive status",
    )
    status = inputs.send_unanswered()  # taken, not answered
    # nor a safe action since it went inactive: no watchdog (by the node's own count; the
    # probe may still be receiving what the watchdog sent before, during the CLI calls)
    assert status["policy"]["safe_actions"] == inactive["safe_actions"]
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
        WAIT_S,
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
        WAIT_S,
        "a WARN saying the policy publishes its safe action",
    )
    # commands flow again: the first report of a period without timeouts says so
    seen = len(arrays)

    def recovered():
        inputs.step()  # one pair, answered, each time the condition is asked
        ours = [s for a in arrays[seen:] for s in a.status if s.name == name]
        # (clamped commands still warn: the inputs are large on purpose)
        return any("timeout" not in s.message and "safe action" not in s.message for s in ours)

    live.probe.spin_until(recovered, WAIT_S, "a report without the timeout")
    end()


# --- autostart: false -----------------------------------------------------------------------


@pytest.mark.parametrize("deployment", list(Deployment), ids=str)
def test_with_autostart_false_nothing_is_published_until_lifecycle_activates(
    deployment, seed, tmp_path
):
    from std_msgs.msg import Float32MultiArray

    params = _params(tmp_path / "params.yaml", autostart=False)
    plan = load_plan(seed.path, params_file=params)
    processes = plan_processes(plan, GraphOptions(deployment, params_file=params))
    starts = [(process.module, process.argv()[3:]) for process in processes]
    fused = deployment is Deployment.FUSED
    nodes = ["leapp_fused"] if fused else ["preprocess", "policy"]
    with ros_graph(tmp_path, starts) as (probe, running, _domain_id):
        actions = probe.subscribe(f"{NAMESPACE}/policy/action", Float32MultiArray)
        publishers = [
            probe.publisher(f"{NAMESPACE}/preprocess/{port}", Float32MultiArray)
            for port in ("state", "velocity")
        ]
        sent = collections.Counter()
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
                sent[publisher.topic_name] += 1
            return eager_seed(seed, state, velocity)[1].clamp(-LIMIT, LIMIT)

        for node in nodes:
            change(node, "configure")
            assert get(node).startswith("inactive")
        probe.wait_connected(NAMESPACE, ["preprocess", "policy"], check=exited(running))
        for _ in range(3):  # each pair taken (the statuses count it), none answered
            send()
            status = probe.wait_received(NAMESPACE, sent, check=exited(running))
            assert status["preprocess"]["runs"] == status["policy"]["runs"] == 0
        assert not actions, "a node published before activation"
        for node in nodes:
            change(node, "activate")
        for _ in range(3):  # (active and no inputs: the watchdog's safe action may come too)
            before = len(actions)
            expected = send()

            def answered(b=before):
                received = [torch.tensor(list(m.data)) for m in actions[b:]]
                return [c for c in received if not is_safe(c)][:1]

            (got,) = probe.spin_until(answered, WAIT_S, "an action after activate")
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
        exited(running)()
    assert os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") in (None, "LOCALHOST")
