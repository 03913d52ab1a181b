"""Ramp-in and out-of-domain guards over real DDS, in every deployment mode, at the deployed
QoS (best-effort subscriptions of depth 1).

The arm policy of :mod:`support.sim` (preprocess: JointState + Imu -> obs; policy: obs ->
joint_targets, 50 Hz) runs with ``ports.joint_targets.blend_s`` 0.1 s (5 commands) read from
``blend_from: joint_pos``, fixed safe values, and ``ports.joint_vel.min`` / ``max`` of
+-2 rad/s with ``on_out_of_domain`` ``safe`` (one graph) or ``drop`` (another).

Ramp-in: the joints are held far from where the policy wants them; after an e-stop release,
after deactivate / activate and after a watchdog recovery, command ``k`` of the blend
(``k = 1 .. N``) must equal ``min(m + (k / N) * (eager_k - m), max)`` (``m`` the measured
position, ``eager_k`` eager PyTorch on the inputs of that tick, ``max`` the port's limit,
which binds on the shoulder's first commands) value by value within 1e-5, the ``N``-th and
later eager itself, and ``/diagnostics`` says "blending" while it lasts; on a port played at
200 Hz every target lies between the previous blended result and the new one. Guards: one
tick whose ``elbow`` velocity is 12.5 rad/s trips the guard; ``safe`` answers it with the safe
action before the next tick and gives no command until ``~/enable`` true (or deactivate /
activate), ``drop`` drops exactly that set (counted); ``/diagnostics`` names the port, the
element and the value.

Every wait ends on an event (a message, a status record counting the inputs), within a
generous overall timeout; ``pytest -s`` prints the largest published step of each ramp-in and
the ticks from the spike to the safe action.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from support.sim import (
    JOINTS,
    REFERENCE,
    TICK_S,
    Reading,
    eager_targets,
    export_arm_policy,
    imu_message,
    joint_state_message,
)

from leapp_ros.testing import Deployment, GraphOptions, GraphUnderTest
from leapp_ros.testing.probe import qos

pytestmark = [pytest.mark.ros, pytest.mark.slow]

BLEND_S = 0.1
COMMANDS = 5  # ceil(BLEND_S * 50 Hz): the commands of one blend
FAR = np.asarray(REFERENCE) + np.array([0.6, -0.5, 0.45])  # where the joints are held
VELOCITY_MAX = 2.0
SPIKE = 12.5  # rad/s on the elbow
SAFE = [0.2, -0.4, 0.3]
MAX = np.array([0.7, 10.0, 10.0])  # limits on top: the shoulder's first blended commands
TOLERANCE = 1e-5
WAIT_S = 20.0  # a generous bound on any one event
WATCHDOG_MS = 1000.0  # long: no test pauses this long between ticks
PLAYED_HZ = 200.0  # 4 targets per 50 Hz result
ORDERS = (("elbow", "wrist", "shoulder", "finger"), ("shoulder", "finger", "elbow", "wrist"))


def params(path, action: str, **extra):
    document = {
        "/**": {
            "ros__parameters": {
                "rate_hz": 1 / TICK_S,
                "ports": {
                    "joint_targets": {
                        "safe_values": SAFE,
                        "max": MAX.tolist(),
                        "blend_s": BLEND_S,
                        "blend_from": "joint_pos",
                    },
                    "joint_vel": {
                        "min": -VELOCITY_MAX,
                        "max": VELOCITY_MAX,
                        "on_out_of_domain": action,
                    },
                },
            }
        }
    }
    parameters = document["/**"]["ros__parameters"]
    for key, value in extra.items():
        if key in ("output_rate_hz", "interpolate"):
            parameters["ports"]["joint_targets"][key] = value
        else:
            parameters[key] = value
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def arm(tmp_path_factory):
    return export_arm_policy(tmp_path_factory.mktemp("arm"))


@pytest.fixture(scope="module", params=list(Deployment), ids=str)
def deployment(request):
    return request.param


def start(arm, deployment, tmp_path_factory, action, **extra):
    path = params(tmp_path_factory.mktemp("params") / f"{action}.yaml", action, **extra)
    return GraphUnderTest(arm.path, GraphOptions(deployment, params_file=path))


@pytest.fixture(scope="module")
def safe_graph(arm, deployment, tmp_path_factory):
    with start(arm, deployment, tmp_path_factory, "safe") as graph:
        yield Rig(graph, arm.policy, guarded="safe")


@pytest.fixture(scope="module")
def drop_graph(arm, deployment, tmp_path_factory):
    with start(arm, deployment, tmp_path_factory, "drop") as graph:
        yield Rig(graph, arm.policy)


@pytest.fixture(scope="module")
def watchdog_graph(arm, deployment, tmp_path_factory):
    with start(arm, deployment, tmp_path_factory, "drop", input_timeout_ms=WATCHDOG_MS) as graph:
        yield Rig(graph, arm.policy)


@pytest.fixture(scope="module")
def played_graph(arm, deployment, tmp_path_factory):
    extra = {"output_rate_hz": PLAYED_HZ, "interpolate": "linear"}
    with start(arm, deployment, tmp_path_factory, "drop", **extra) as graph:
        yield Rig(graph, arm.policy)


class Rig:
    """The arm's sensor messages sent through ``graph`` one tick at a time (the joints held at
    :data:`FAR`, velocities and IMU random), the commands and diagnostics that come back."""

    def __init__(self, graph: GraphUnderTest, policy, *, guarded=""):
        from diagnostic_msgs.msg import DiagnosticArray
        from lifecycle_msgs.srv import ChangeState
        from std_srvs.srv import SetBool

        self.graph, self.policy, self.guarded = graph, policy, guarded
        self.namespace = graph.plan.namespace
        probe = graph.probe
        self.command_node = f"{self.namespace}/{'leapp_fused' if graph.fused else 'policy'}"
        self.inbox = graph.endpoints.output("policy/joint_targets")[2]
        self.diagnostics: list = []
        probe.node.create_subscription(
            DiagnosticArray, "/diagnostics", self.diagnostics.append, qos(depth=1000)
        )
        self.enable = probe.node.create_client(SetBool, f"{self.command_node}/enable")
        self.change_state = probe.node.create_client(
            ChangeState, f"{self.command_node}/change_state"
        )
        for client in (self.enable, self.change_state):
            probe.spin_until(client.service_is_ready, WAIT_S, f"service {client.srv_name}")
        probe.spin_until(
            lambda: not probe.connection_gaps(self.namespace), WAIT_S, "every hop matched"
        )
        self.rng = np.random.default_rng(5)
        self.ticks = 0
        # the measured position (always FAR) reaches the ramps; the tick may go unanswered:
        # a blend waits for its first measured position, which can come after the set
        self.send(self.reading())

        def measured():
            return any(sum(r.get("measured_on", {}).values()) for r in graph.status().values())

        probe.spin_until(measured, WAIT_S, "the measured position at the command node")

        def guard_linked():  # a trip of the guarded node reaches the command node
            links = graph.status().get("policy", {}).get("guard_links")
            return links is not None and links >= 1

        if self.guarded == "safe":
            probe.spin_until(guard_linked, WAIT_S, "the command node to hear guard trips")

    # --- ticks ------------------------------------------------------------------------------

    def reading(self, spike: bool = False) -> Reading:
        velocity = self.rng.normal(0.0, 0.5, 3)
        if spike:
            velocity[JOINTS.index("elbow")] = SPIKE
        return Reading(
            position=FAR,
            velocity=velocity,
            gyro=self.rng.normal(0.0, 0.3, 3),
            accel=np.array([0.0, 0.0, 9.81]) + self.rng.normal(0.0, 0.2, 3),
            quat=np.array([1.0, 0.0, 0.0, 0.0]),
        )

    def send(self, reading: Reading) -> np.ndarray:
        """Publish one tick (Imu, then JointState); eager PyTorch's targets for it."""
        stamp = self.ticks * TICK_S
        order = ORDERS[self.ticks % len(ORDERS)]
        self.graph.publish(
            {
                f"{self.namespace}/preprocess/imu": imu_message(reading, stamp),
                f"{self.namespace}/preprocess/joint_states": joint_state_message(
                    reading, stamp, order
                ),
            }
        )
        self.ticks += 1
        return eager_targets(self.policy, reading).astype(np.float64)

    def next_message(self, before: int) -> np.ndarray:
        self.graph.probe.spin_until(lambda: len(self.inbox) > before, WAIT_S, "a command")
        return np.asarray(self.inbox[before].data, dtype=np.float64)

    def step(self) -> tuple[np.ndarray, np.ndarray]:
        """One tick that must be answered: (eager targets, the command)."""
        before = len(self.inbox)
        eager = self.send(self.reading())
        return eager, self.next_message(before)

    def answer_after_hold(self) -> tuple[np.ndarray, np.ndarray]:
        """One tick sent while the node holds its safe action (e-stop, watchdog): (eager
        targets, the command answering it). A held node publishes the safe action every period
        until the tick's set reaches it, so safe actions may come first and are skipped; the
        one tick sent is the only thing another value can answer (a node answering it with the
        safe action fails the wait)."""
        before = len(self.inbox)
        eager = self.send(self.reading())

        def answered():
            for position in range(before, len(self.inbox)):
                if not np.allclose(self.inbox[position].data, SAFE, rtol=0, atol=1e-6):
                    return position + 1
            return None

        position = self.graph.probe.spin_until(answered, WAIT_S, "a command of the tick") - 1
        return eager, np.asarray(self.inbox[position].data, dtype=np.float64)

    def settle(self) -> None:
        """Ticks until two commands in a row equal eager PyTorch (a blend in progress, such
        as the one after the graph's activation, is over: its last command is eager's)."""
        settled = 0
        for _ in range(4 * COMMANDS):
            eager, command = self.step()
            settled = settled + 1 if np.allclose(command, eager, rtol=0, atol=TOLERANCE) else 0
            if settled == 2:
                return
        raise AssertionError("commands never settled on eager PyTorch's")

    # --- operations -------------------------------------------------------------------------

    def call(self, client, request):
        future = client.call_async(request)
        self.graph.probe.spin_until(future.done, WAIT_S, f"the answer of {client.srv_name}")
        return future.result()

    def set_enabled(self, enabled: bool) -> None:
        from std_srvs.srv import SetBool

        assert self.call(self.enable, SetBool.Request(data=enabled)).success

    def transition(self, transition_id: int) -> None:
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState

        request = ChangeState.Request(transition=Transition(id=transition_id))
        assert self.call(self.change_state, request).success

    def wait_safe(self, before: int) -> int:
        """Wait for the safe action among the messages after ``before``; its position."""

        def found():
            for position in range(before, len(self.inbox)):
                if np.allclose(self.inbox[position].data, SAFE, rtol=0, atol=1e-6):
                    return position + 1
            return None

        return self.graph.probe.spin_until(found, WAIT_S, "the safe action") - 1

    def diagnostic(self, condition, what: str):
        """The first DiagnosticStatus (from now on, or already received) meeting
        ``condition``."""

        def found():
            for array in self.diagnostics:
                for status in array.status:
                    if condition(status):
                        return status
            return None

        return self.graph.probe.spin_until(found, WAIT_S, what)

    def messages_since(self, before: int) -> list[np.ndarray]:
        return [np.asarray(m.data, dtype=np.float64) for m in self.inbox[before:]]


def ramp_in(rig: Rig, release) -> float:
    """Hold the joints at FAR, ``release()`` (what starts the blend), and check each command
    of the blend against the formula and its step against what the blend allows (the
    weight's step towards eager, plus the weight times eager's own change); the largest
    step published during the blend."""
    rig.diagnostics.clear()
    release()
    previous, previous_eager, largest = np.minimum(FAR, MAX), None, 0.0
    for k in range(1, COMMANDS + 3):
        eager, command = rig.answer_after_hold() if k == 1 else rig.step()
        weight = min(k / COMMANDS, 1.0)
        expected = np.minimum(FAR + weight * (eager - FAR), MAX)  # the limits on top
        np.testing.assert_allclose(
            command, expected, rtol=0, atol=TOLERANCE, err_msg=f"command {k} of the blend"
        )
        if k <= COMMANDS:
            step = float(np.max(np.abs(command - previous)))
            moved = 0.0 if previous_eager is None else np.max(np.abs(eager - previous_eager))
            allowed = np.max(np.abs(eager - FAR)) / COMMANDS + (k - 1) / COMMANDS * moved
            assert step <= allowed + 2 * TOLERANCE, f"step {k}: {step} > {allowed}"
            largest = max(largest, step)
        previous, previous_eager = command, eager
        if k == 1:
            rig.diagnostic(lambda s: "blending" in s.message, "diagnostics saying blending")
    return largest


def measured_received(rig: Rig) -> None:
    """Send one tick the command node must not answer, and wait until every node took it."""
    rig.send(rig.reading())
    rig.graph.wait_received()


def test_an_estop_release_ramps_in_from_the_measured_position(safe_graph, deployment):
    from lifecycle_msgs.msg import Transition

    rig = safe_graph
    rig.settle()
    before = len(rig.inbox)
    rig.set_enabled(False)
    rig.wait_safe(before)
    measured_received(rig)
    largest = ramp_in(rig, lambda: rig.set_enabled(True))
    print(f"\n[{deployment}] ramp-in after e-stop release: largest step {largest:.4f} rad")

    before = len(rig.inbox)
    rig.transition(Transition.TRANSITION_DEACTIVATE)
    rig.wait_safe(before)
    measured_received(rig)
    largest = ramp_in(rig, lambda: rig.transition(Transition.TRANSITION_ACTIVATE))
    print(f"[{deployment}] ramp-in after activate: largest step {largest:.4f} rad")


def test_a_velocity_spike_latches_the_safe_action_until_released(safe_graph, deployment):
    from lifecycle_msgs.msg import Transition

    rig = safe_graph
    rig.settle()
    for release in ("enable", "lifecycle"):
        rig.diagnostics.clear()
        before = len(rig.inbox)
        spike_tick = rig.ticks
        rig.send(rig.reading(spike=True))
        first = rig.wait_safe(before)
        assert first == before, "a command came before the safe action"
        ticks_to_safe = rig.ticks - 1 - spike_tick  # ticks sent after the spike's
        print(f"\n[{deployment}] spike -> safe action: {ticks_to_safe} ticks after the spike")
        assert ticks_to_safe == 0
        status = rig.diagnostic(
            lambda s: s.level == b"\x02" and "joint_vel[elbow] = 12.5" in s.message,
            "an ERROR naming joint_vel[elbow] = 12.5",
        )
        assert "latched" in status.message
        for _ in range(3):  # latched: normal ticks get no command
            rig.send(rig.reading())
            rig.graph.wait_received()
        assert all(np.allclose(m, SAFE, atol=1e-6) for m in rig.messages_since(before))
        if release == "enable":
            measured_received(rig)
            ramp_in(rig, lambda: rig.set_enabled(True))
        else:
            rig.transition(Transition.TRANSITION_DEACTIVATE)
            measured_received(rig)
            ramp_in(rig, lambda: rig.transition(Transition.TRANSITION_ACTIVATE))


def test_a_velocity_spike_drops_exactly_its_set(drop_graph, deployment):
    rig = drop_graph
    rig.settle()
    guard_node = "preprocess"
    counted = rig.graph.wait_received()[guard_node]["out_of_domain"]
    before = len(rig.inbox)
    rig.send(rig.reading(spike=True))
    status = rig.graph.wait_received()
    assert status[guard_node]["out_of_domain"] == counted + 1
    assert status[guard_node]["last_out_of_domain"]["element"] == "elbow"
    assert len(rig.inbox) == before, "the spike's set was answered"
    eager, command = rig.step()
    np.testing.assert_allclose(command, eager, rtol=0, atol=TOLERANCE)
    diagnostic = rig.diagnostic(
        lambda s: s.level == b"\x01" and "joint_vel[elbow] = 12.5" in s.message,
        "a WARN naming joint_vel[elbow] = 12.5",
    )
    assert diagnostic.name.endswith("/preprocess")


def test_a_watchdog_recovery_ramps_in_from_the_measured_position(watchdog_graph, deployment):
    rig = watchdog_graph
    rig.settle()
    before = len(rig.inbox)
    rig.wait_safe(before)  # no tick for input_timeout_ms: the watchdog's safe action
    largest = ramp_in(rig, lambda: None)  # the next tick resumes commands, blended in
    print(f"\n[{deployment}] ramp-in after a watchdog recovery: largest step {largest:.4f} rad")


def test_a_played_port_interpolates_between_blended_results(played_graph, deployment):
    """Each result is blended (the formula above), the player then moves to it in 4 targets
    in a straight line from the target published before: every target lies between the
    previous result and the new one, the last of each period on the new one."""
    from std_srvs.srv import SetBool

    rig = played_graph

    def reaches(value):
        def found():
            for position in range(len(rig.inbox) - 1, -1, -1):
                if np.allclose(rig.inbox[position].data, value, rtol=0, atol=TOLERANCE):
                    return position + 1
            return None

        return found

    assert rig.call(rig.enable, SetBool.Request(data=False)).success
    rig.wait_safe(len(rig.inbox) - 1)
    rig.send(rig.reading())
    rig.graph.wait_received()
    assert rig.call(rig.enable, SetBool.Request(data=True)).success
    previous, largest = np.asarray(SAFE), 0.0
    for k in range(1, COMMANDS + 2):
        before = len(rig.inbox)
        eager = rig.send(rig.reading())
        raw = FAR + min(k / COMMANDS, 1.0) * (eager - FAR)  # blended
        result = np.minimum(raw, MAX)  # where the targets end: the limit applies to each
        end = rig.graph.probe.spin_until(reaches(result), WAIT_S, f"blended result {k}")
        targets = rig.messages_since(before)[: end - before]
        low, high = np.minimum(previous, result), np.maximum(previous, result)
        for target in targets:
            assert np.all(target >= low - TOLERANCE) and np.all(target <= high + TOLERANCE)
        steps = np.abs(np.diff(np.vstack([previous, *targets]), axis=0))
        largest = max(largest, float(steps.max()))
        assert steps.max() <= np.max(np.abs(raw - previous)) / 4 + TOLERANCE
        previous = result
    print(f"\n[{deployment}] played ramp-in: largest step between targets {largest:.4f} rad")
