"""launch_testing test of launch/pipeline.launch.py with the seed export, in the three
deployment shapes (one process per node, composed, and fused), each started as it is by default
and with ``autostart:=false``: then the nodes wait, unconfigured and silent, until the test
configures and activates every one with the ``ros2 lifecycle`` CLI, as a user would; one more
run with ``autostart:=false`` is activated by launch's own lifecycle events instead
(launch_ros's ChangeState and OnStateTransition, which reach LifecycleNode actions only).
Every run, once its nodes are active, answers state / velocity pairs with the action eager
PyTorch computes (examples/torch_pipeline.py's functions, traced into the export in this
process).

It needs the ROS 2 launch stack (launch, launch_ros, launch_testing, pytest < 9): a full ROS 2
install, or scripts/setup.sh with ../shared/ros2-launch present (as on CI). Run it with
``python -m pytest test/tools/test_pipeline_launch.py`` (pytest puts test/ and examples/ on the
path). Without the launch stack it is skipped (test/tools/test_runner.py covers the same graph
through ``leapp-ros run``).
"""

import pytest

pytest.importorskip(
    "launch_testing.actions",
    reason="launch_testing is not installed (ROS 2 from pip wheels has no launch stack): use a "
    "ROS 2 install, or run scripts/setup.sh with ../shared/ros2-launch present",
)

import array
import atexit
import shutil
import subprocess
import tempfile
import time
import unittest
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import launch_testing
import launch_testing.actions
import launch_testing.asserts
import rclpy.node
import torch
from launch.actions import (
    EmitEvent,
    IncludeLaunchDescription,
    OpaqueFunction,
    RegisterEventHandler,
    SetEnvironmentVariable,
)
from launch.events import matches_action
from launch.launch_description import LaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from lifecycle_msgs.msg import Transition
from support.ros import Probe, eager_seed, export_seed
from support.runner import SeedIO, claim_domain_id, ros_env

from leapp_ros.run.deployment import Deployment

pytestmark = [pytest.mark.ros, pytest.mark.launch, pytest.mark.slow]

LAUNCH_FILE = Path(__file__).resolve().parents[2] / "launch" / "pipeline.launch.py"
NODES = ("preprocess", "policy")
NAMESPACE = "/torch_pipeline"  # the launch file's default: the pipeline's name
_seeds: list[SimpleNamespace] = []


def traced_seed() -> SimpleNamespace:
    """The seed traced once per run into a temporary folder: ``path`` (the export) and the
    eager PyTorch functions it was traced from (``module``, ``policy``)."""
    if not _seeds:
        folder = tempfile.mkdtemp(prefix="leapp_ros_launch_test_")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _seeds.append(export_seed(Path(folder)))
    return _seeds[0]


_LOCKS: list = []  # the domain ids' lock files (a lock held by a local would end with it)

AUTOSTART = "autostart"  # the default: every node configures and activates itself
ROS2_LIFECYCLE = "ros2 lifecycle"  # autostart:=false, then the ros2 CLI, in the test
LAUNCH_EVENTS = "launch events"  # autostart:=false, then launch's lifecycle events
RUNS = [
    *((deployment, start) for start in (AUTOSTART, ROS2_LIFECYCLE) for deployment in Deployment),
    (Deployment.PROCESSES, LAUNCH_EVENTS),  # LifecycleNode actions: per node (and fused)
]
OUTPUTS = ("preprocess/obs", "policy/action")  # every output topic of the seed
ROS2 = shutil.which("ros2")
CLI_TIMEOUT_S = 30.0


@pytest.mark.launch_test
@launch_testing.parametrize("deployment, start", RUNS)
def generate_test_description(deployment, start):
    seed = traced_seed()
    export = seed.path
    domain_id, lock = claim_domain_id()
    _LOCKS.append(lock)  # held until this test process ends: the launched processes use it
    arguments = {"pipeline": str(export), "deployment": deployment.value}
    if start != AUTOSTART:
        arguments["autostart"] = "false"
    pipeline = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_FILE)), launch_arguments=arguments.items()
    )
    description = LaunchDescription(
        [
            # Every process of this run stays on this machine and in a domain of its own.
            SetEnvironmentVariable("ROS_DOMAIN_ID", str(domain_id)),
            SetEnvironmentVariable("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST"),
            pipeline,
            *(configure_and_activate_by_launch_events() if start == LAUNCH_EVENTS else ()),
            # The processes are starting; the active test waits for their ready status.
            launch_testing.actions.ReadyToTest(),
        ]
    )
    return description, {"domain_id": domain_id, "export": export, "seed": seed}


def configure_and_activate_by_launch_events() -> list:
    """What a robot's launch file adds to a graph started with autostart:=false to bring it
    up itself: configure every lifecycle node, and activate each once it is inactive."""

    def activate(context):
        node = context.locals.event.action  # the LifecycleNode that became inactive
        transition = Transition.TRANSITION_ACTIVATE
        event = ChangeState(lifecycle_node_matcher=matches_action(node), transition_id=transition)
        return [EmitEvent(event=event)]

    return [
        RegisterEventHandler(
            OnStateTransition(goal_state="inactive", entities=[OpaqueFunction(function=activate)])
        ),
        EmitEvent(
            event=ChangeState(
                lifecycle_node_matcher=lambda node: True,  # every LifecycleNode of this launch
                transition_id=Transition.TRANSITION_CONFIGURE,
            )
        ),
    ]


def answer_like_eager(probe: Probe, seed: SimpleNamespace) -> None:
    """Three state / velocity pairs, each answered with the action eager PyTorch computes."""
    io = SeedIO(probe, NAMESPACE)
    for _ in range(3):
        state, velocity = torch.randn(6) * 2, torch.randn(3)
        _, expected = eager_seed(seed, state, velocity)
        action = io.step(state, velocity, expected, timeout_s=20)
        torch.testing.assert_close(action, expected)


def ros2_lifecycle(domain_id: int, nodes: list[str], *transition: str) -> list[str]:
    """``ros2 lifecycle get NODE`` (or ``set NODE TRANSITION``) for each of ``nodes`` at once,
    as a user runs it, in the test's domain; their outputs. Each is retried while the CLI has
    not discovered its node yet (no daemon: each call discovers the graph afresh)."""
    assert ROS2 is not None, "the ros2 CLI is not installed (scripts/setup.sh installs it)"
    with ThreadPoolExecutor(len(nodes)) as pool:
        return list(pool.map(lambda node: _ros2_lifecycle(domain_id, node, *transition), nodes))


def _ros2_lifecycle(domain_id: int, node: str, *transition: str) -> str:
    verb = ["set", node, *transition] if transition else ["get", node]
    argv = [ROS2, "lifecycle", *verb, "--no-daemon", "--spin-time", "2"]
    deadline = time.monotonic() + CLI_TIMEOUT_S
    while True:
        done = subprocess.run(
            argv, env=ros_env(domain_id), capture_output=True, text=True, timeout=CLI_TIMEOUT_S
        )
        if done.returncode == 0 or "Node not found" not in done.stderr:
            break
        if time.monotonic() > deadline:
            break
    assert done.returncode == 0, f"{' '.join(argv[1:])}: {done.stdout}{done.stderr}"
    if transition:  # `set` exits 0 also when the transition failed
        assert "Transitioning successful" in done.stdout, done.stdout + done.stderr
    return done.stdout.strip()


class TestSeedPipeline(unittest.TestCase):
    def test_the_nodes_come_up_as_started_then_answer_like_eager_pytorch(
        self, domain_id, seed, deployment, start
    ):
        """autostart: every node becomes active by itself; launch events: once launch's
        lifecycle events configured and activated it; ros2 lifecycle: nothing is published
        until the test configures and activates every node with the ros2 CLI. Then the
        actions equal eager PyTorch's."""
        probe = Probe(domain_id)
        try:
            if start == ROS2_LIFECYCLE:
                statuses = bring_up_with_ros2_lifecycle(self, probe, domain_id, deployment)
            else:
                statuses = probe.wait_ready(NAMESPACE, NODES, timeout_s=60)
            probe.spin_until(
                lambda: all(statuses[n].get("lifecycle") == "active" for n in NODES),
                20,
                "every node active",
            )
            answer_like_eager(probe, seed)
        finally:
            probe.close()


def bring_up_with_ros2_lifecycle(
    case: unittest.TestCase, probe: Probe, domain_id: int, deployment: Deployment
) -> dict:
    """Nodes started with autostart:=false: unconfigured and silent (no output, no status)
    while inputs arrive; configured with the ros2 CLI: ready and inactive, still silent;
    then activated with the ros2 CLI. The nodes' status records."""
    from std_msgs.msg import Float32MultiArray

    fused = deployment is Deployment.FUSED
    names = ["leapp_fused"] if fused else NODES  # the ROS nodes: one, or two
    nodes = [f"{NAMESPACE}/{name}" for name in names]
    published = {
        topic: probe.subscribe(f"{NAMESPACE}/{topic}", Float32MultiArray) for topic in OUTPUTS
    }
    statuses = probe.watch_status(NAMESPACE)
    inputs = [
        probe.publisher(f"{NAMESPACE}/preprocess/{port}", Float32MultiArray)
        for port in ("state", "velocity")
    ]

    topics = [f"{NAMESPACE}/preprocess/{port}" for port in ("state", "velocity")]
    sent = dict.fromkeys(topics, 0)

    def send(pairs: int = 5, taken: bool = True) -> None:
        """``pairs`` input pairs; with ``taken``, each only once the nodes took the one before
        (their subscriptions keep the newest message only, as deployed)."""
        for _ in range(pairs):
            for publisher, size in zip(inputs, (6, 3), strict=True):
                values = array.array("f", torch.randn(size).tolist())
                publisher.publish(Float32MultiArray(data=values))
                sent[publisher.topic_name] += 1
            if taken:
                probe.wait_received(NAMESPACE, sent, timeout_s=30)

    states = ros2_lifecycle(domain_id, nodes)
    case.assertEqual([state.split()[0] for state in states], ["unconfigured"] * len(nodes))

    # Unconfigured, a node has its lifecycle services and no data subscription: once the probe
    # sees the services (the node's endpoints discovered), no input topic may list the node,
    # so what is sent now cannot reach it.
    def discovered() -> bool:
        for name in names:
            try:
                services = probe.node.get_service_names_and_types_by_node(name, NAMESPACE)
            except rclpy.node.NodeNameNonExistentError:
                return False
            if f"{NAMESPACE}/{name}/change_state" not in {service for service, _ in services}:
                return False
        return True

    probe.spin_until(discovered, 30, "the probe to discover the unconfigured nodes")
    for topic in topics:
        readers = {info.node_name for info in probe.node.get_subscriptions_info_by_topic(topic)}
        case.assertFalse(readers & set(names), f"an unconfigured node subscribes to {topic}")
    send(taken=False)  # to no one: no node subscribes
    case.assertEqual({t: len(m) for t, m in published.items()}, dict.fromkeys(OUTPUTS, 0))
    case.assertEqual(statuses, {}, "a node published its status before configure")

    # (each `set` checks "Transitioning successful"; the states from then on are read from
    # the nodes' status records: a `get` costs seconds of discovery)
    ros2_lifecycle(domain_id, nodes, "configure")
    probe.wait_ready(NAMESPACE, NODES, timeout_s=30)  # configured: status "ready"
    probe.spin_until(
        lambda: not probe.connection_gaps(NAMESPACE), 30, "every hop matched both ways"
    )  # the nodes subscribe once configured
    sent = dict.fromkeys(topics, 0)  # the nodes count what they took since they subscribed
    send()  # inactive, the nodes take every input (their records count it) and answer none
    case.assertEqual({t: len(m) for t, m in published.items()}, dict.fromkeys(OUTPUTS, 0))
    case.assertEqual({statuses[n].get("lifecycle") for n in NODES}, {"inactive"})

    ros2_lifecycle(domain_id, nodes, "activate")
    return statuses


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_every_process_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)

    def test_no_parameters_file_is_left_in_the_temporary_folder(self, export):
        """launch_ros writes a node's dict parameters to a launch_params_* file it never
        removes; the launch file gives them as -p rules (composed: to the container, which
        pre-loads the nodes)."""
        left = [path for path in Path(tempfile.gettempdir()).glob("launch_params_*")
                if str(export) in _text(path)]  # fmt: skip
        self.assertEqual(left, [], "a parameters file of this run's nodes was left behind")


def _text(path: Path) -> str:
    """``path``'s text, empty if it has gone meanwhile (another run's file)."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
