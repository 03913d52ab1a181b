"""The running seed graph seen through the real ros2 CLI, as a ROS user would look at it.

One graph of the seed export (preprocess, jit -> policy, onnx, under /torch_pipeline) is started
once for the module with ``leapp-ros run EXPORT --params-file F``; the params file puts
``policy`` on a timer (``firing: timer``, ``rate_hz: 20``) and leaves ``preprocess`` firing on
its inputs. Every ``ros2`` command runs as a subprocess in this module's ROS domain with
localhost discovery, with ``--no-daemon`` where the verb accepts it (``topic pub``, ``topic hz``
and ``run`` take no such option and start no daemon), and with a bounded wait. Failures print
the command's output (and the graph's output where it helps).

ros2cli quirks worked around here:

- Without a daemon, a new ros2 process discovers the nodes of other processes 0.1-3 s after
  it starts (Fast DDS; plain rclpy nodes behave the same), but ros2cli's default
  ``--spin-time`` is 0.5 s: ``ros2 node list`` then prints nothing and ``ros2 param list``
  says "Node not found". Listing commands get a longer ``--spin-time`` and are repeated
  (bounded) until what they list appears; ``ros2 param get/set`` get ``--timeout``.
- ``ros2 topic echo`` without the message type must discover the topic's type within the
  same 0.5 s and otherwise fails ("Could not determine the type"): the type is passed.
- ``ros2 param set`` exits 0 when the node refuses the value: its output is checked.
- ``ros2 run`` relies on the terminal sending SIGINT to the whole process group (it does not
  forward the signal), so the test sends it to the group as Ctrl-C does.
"""

from __future__ import annotations

import array
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip(
    "ros2cli",
    reason="ros2cli is not installed: use a ROS 2 install, or run scripts/setup.sh with "
    "../shared/ros2-launch present (it installs ros2cli and the launch stack into .venv)",
)

import torch
import yaml
from std_msgs.msg import Float32MultiArray
from support.ros import eager_seed
from support.runner import Command, SeedIO, wait_until

from leapp_ros.plan.pipeline import STATUS_TOPIC
from leapp_ros.run.processes import load_plan
from leapp_ros.testing import Probe, reserve_domain_id, ros_env
from leapp_ros.tools.inspection import STATUS_MESSAGE_TYPE, topic_list

pytestmark = [pytest.mark.ros, pytest.mark.launch, pytest.mark.slow]

NAMESPACE = "/torch_pipeline"
NODES = ("preprocess", "policy")
FLOAT32 = "std_msgs/msg/Float32MultiArray"
ACTION = f"{NAMESPACE}/policy/action"
POLICY_RATE_HZ = 20.0  # the params file's rate for policy; the spec's frequency is 50 Hz
# Topics every ROS 2 graph has besides ours (inspect mentions them after its listing).
EVERY_GRAPH = [
    "/parameter_events [rcl_interfaces/msg/ParameterEvent]",
    "/rosout [rcl_interfaces/msg/Log]",
]
# Discovery time for listing commands without a daemon (see the module docstring).
NODE_DISCOVERY = ("--no-daemon", "--spin-time", "3")
TOPIC_DISCOVERY = ("--no-daemon", "--spin-time", "2")
BIN = Path(sys.executable).parent
ROS2 = str(BIN / "ros2") if (BIN / "ros2").is_file() else shutil.which("ros2")
# a generous bound on a CLI call's discovery: every wait ends on its event, not on this
CLI_TIMEOUT_S = 60.0

PARAMS = f"""\
{NAMESPACE}/policy:
  ros__parameters:
    firing: timer
    rate_hz: {POLICY_RATE_HZ}
"""


@dataclass(frozen=True, repr=False)
class CliRun:
    """One finished ``ros2`` command: what ran, its exit code and its output (shown in full
    by assertion messages)."""

    argv: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    def __repr__(self) -> str:
        command = " ".join(["ros2", *self.argv[1:]])
        return (
            f"$ {command}  (exit {self.code})\n--- stdout:\n{self.stdout}--- stderr:\n"
            f"{self.stderr}"
        )


def ros2(domain_id: int, *args: str, timeout_s: float = 30.0) -> CliRun:
    """Run ``ros2 args`` in ``domain_id`` to its end; fail (with its output) after
    ``timeout_s``."""
    return ros2_together(domain_id, [args], timeout_s=timeout_s)[0]


def ros2_together(
    domain_id: int, commands: Sequence[Sequence[str]], timeout_s: float = 30.0
) -> list[CliRun]:
    """Run several ``ros2`` commands at once (their discovery waits overlap) to their end;
    fail (with every output) when one is not done after ``timeout_s``."""
    if ROS2 is None:
        pytest.skip("the ros2 command is not installed (ros2cli)")
    started = []
    for args in commands:
        argv = (ROS2, *args)
        process = subprocess.Popen(
            argv,
            env=ros_env(domain_id),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        started.append((argv, process))
    deadline = time.monotonic() + timeout_s
    runs, late = [], False
    for argv, process in started:
        try:
            stdout, stderr = process.communicate(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            late = True
        runs.append(CliRun(argv, process.returncode, stdout, stderr))
    if late:
        outputs = "\n".join(str(run) for run in runs)
        raise AssertionError(f"ros2 did not finish within {timeout_s} s:\n{outputs}")
    return runs


def ros2_until(
    domain_id: int, args: Sequence[str], accept: Callable[[CliRun], bool], timeout_s: float
) -> CliRun:
    """Run ``ros2 args`` again until ``accept`` holds for a run (discovery without a daemon
    can miss what exists); that run, or fail with every run's output after ``timeout_s``."""
    runs: list[CliRun] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs.append(ros2(domain_id, *args, timeout_s=max(deadline - time.monotonic(), 5.0)))
        if accept(runs[-1]):
            return runs[-1]
    raise AssertionError(
        f"no run of ros2 {' '.join(args)} gave what was expected within {timeout_s} s:\n"
        + "\n".join(str(run) for run in runs)
    )


def lines(run: CliRun) -> list[str]:
    return [line.strip() for line in run.stdout.splitlines() if line.strip()]


def close(values: Sequence[float], expected: torch.Tensor) -> bool:
    got = torch.tensor(list(values), dtype=torch.float32)
    return got.shape == expected.shape and torch.allclose(got, expected, atol=1e-5)


def yaml_data(values: Sequence[float]) -> str:
    """``{data: [...]}``, as a user types it for ``ros2 topic pub``."""
    return "{data: [" + ", ".join(f"{value:g}" for value in values) + "]}"


def eager(seed: SimpleNamespace, state: Sequence[float], velocity: Sequence[float]) -> tuple:
    """``(obs, action)`` of the training code (eager PyTorch) for these inputs, as float32."""
    return eager_seed(
        seed, torch.tensor(state, dtype=torch.float32), torch.tensor(velocity, dtype=torch.float32)
    )


@dataclass
class Graph:
    """The module's running graph: its export, domain, runner command and test probe."""

    seed: SimpleNamespace
    export: Path
    domain_id: int
    runner: Command
    probe: Probe
    io: SeedIO
    actions: list

    def feed(
        self, state: Sequence[float], velocity: Sequence[float], resend_s: float | None = None
    ) -> torch.Tensor:
        """Publish the inputs from the probe (once, or again every ``resend_s``) until the
        graph's action answers them; that action."""
        _, expected = eager(self.seed, state, velocity)
        inputs = [torch.tensor(values, dtype=torch.float32) for values in (state, velocity)]
        try:
            return self.io.step(*inputs, expected, timeout_s=CLI_TIMEOUT_S, resend_s=resend_s)
        except AssertionError as error:
            raise AssertionError(f"{error}\ngraph output:\n{self.runner.output}") from None


@pytest.fixture(scope="module")
def graph(seed, tmp_path_factory):
    """``leapp-ros run EXPORT --params-file F`` of the seed export, ready, with a probe in its
    domain; stopped with SIGINT (as Ctrl-C) when the module ends."""
    params = tmp_path_factory.mktemp("params") / "params.yaml"
    params.write_text(PARAMS)
    with reserve_domain_id() as domain_id:
        argv = [sys.executable, "-m", "leapp_ros.tools.cli", "run", str(seed.path)]
        runner = Command([*argv, "--params-file", str(params)], ros_env(domain_id))
        probe = None
        try:
            runner.wait_for(r"graph ready", timeout_s=120)
            probe = Probe(domain_id)
            io = SeedIO(probe, NAMESPACE)
            actions = probe.subscribe(ACTION, Float32MultiArray)
            yield Graph(seed, seed.path, domain_id, runner, probe, io, actions)
        finally:
            if probe is not None:
                probe.close()
            runner.process.send_signal(signal.SIGINT)
            try:
                runner.wait(20)
            finally:
                runner.kill()


@pytest.fixture
def commands():
    """Commands a test starts in the background; killed (process group) when it ends."""
    started: list[Command] = []
    yield lambda argv, env: started.append(Command(argv, env)) or started[-1]
    for command in started:
        command.kill()


# --- nodes and topics --------------------------------------------------------------------


def test_ros2_node_list_shows_every_pipeline_node_under_the_namespace(graph):
    expected = {f"{NAMESPACE}/{node}" for node in NODES}
    run = ros2_until(
        graph.domain_id,
        ["node", "list", *NODE_DISCOVERY],
        lambda run: expected <= set(lines(run)),
        timeout_s=CLI_TIMEOUT_S,
    )
    assert run.code == 0, run


def test_ros2_topic_list_t_is_what_leapp_ros_inspect_lists(graph):
    plan = load_plan(graph.export)
    listed = topic_list(plan)  # the lines `leapp-ros inspect` prints
    # four data topics and the packed input topic of the node with more than one input
    assert len(listed) == 4 + len(plan.packed_topics()) == 5
    # and what every node publishes besides: /diagnostics, its lifecycle transition events
    operations = [f"{name} [{kind}]" for name, kind in plan.operation_topics()]
    run = ros2_until(
        graph.domain_id,
        ["topic", "list", "-t", *TOPIC_DISCOVERY],
        lambda run: set(listed + operations) <= set(lines(run)),
        timeout_s=CLI_TIMEOUT_S,
    )
    assert sorted(lines(run)) == sorted(listed + operations + EVERY_GRAPH), run


def test_ros2_topic_list_include_hidden_topics_adds_the_status_topic_inspect_announces(graph):
    plan = load_plan(graph.export)
    status = f"{plan.resolve(STATUS_TOPIC)} [{STATUS_MESSAGE_TYPE}]"
    expected = {status, *topic_list(plan)}
    run = ros2_until(  # discovery reports endpoints one by one: wait for all of them
        graph.domain_id,
        ["topic", "list", "-t", "--include-hidden-topics", *TOPIC_DISCOVERY],
        lambda run: set(lines(run)) >= expected,
        timeout_s=CLI_TIMEOUT_S,
    )
    assert set(lines(run)) >= expected, run


# --- data --------------------------------------------------------------------------------


def test_ros2_topic_echo_once_prints_the_action_eager_pytorch_computes(graph):
    state, velocity = [0.5, -1.0, 2.0, 0.25, -0.75, 1.5], [0.3, -0.2, 0.1]
    _, expected = eager(graph.seed, state, velocity)
    graph.feed(state, velocity)  # policy runs on its timer: it keeps publishing this action
    echo = ("topic", "echo", "--once", "--timeout", "15", "--no-daemon")
    run = ros2(graph.domain_id, *echo, ACTION, FLOAT32)  # with the type: see the docstring
    assert run.code == 0, run
    message = yaml.safe_load(run.stdout.split("---")[0])
    assert close(message["data"], expected), f"eager action {expected.tolist()}\n{run}"
    dims = message["layout"]["dim"]
    assert [(dim["size"], dim["stride"]) for dim in dims] == [(6, 6)], run
    assert message["layout"]["data_offset"] == 0, run


def test_ros2_topic_pub_of_plain_data_messages_gives_the_eager_action(graph, commands):
    state, velocity = [1.25, 0.5, -2.0, 3.0, -0.5, 0.0], [-0.4, 0.6, 0.05]
    _, expected = eager(graph.seed, state, velocity)
    graph.actions.clear()

    def answered() -> bool:
        return any(close(message.data, expected) for message in graph.actions)

    # As a user drives a topic by hand: `ros2 topic pub` at a rate. Its publisher waits for
    # its own side of a match only, and preprocess's subscriptions are best effort (as
    # deployed), so a single message may go before preprocess matched it; the same pair again
    # changes nothing (the seed keeps no state), so the answer is what is awaited.
    pubs = [
        commands(
            [ROS2, "topic", "pub", "-r", "2", f"{NAMESPACE}/preprocess/{port}", FLOAT32,
             yaml_data(values)],
            ros_env(graph.domain_id),
        )
        for port, values in (("state", state), ("velocity", velocity))
    ]  # fmt: skip
    try:
        graph.probe.spin_until(answered, 60, "an action equal to eager PyTorch's")
    except AssertionError:
        received = [list(message.data) for message in graph.actions[-3:]]
        outputs = "\n".join(pub.output for pub in pubs)
        raise AssertionError(
            f"no action equal to eager {expected.tolist()} (last received: {received})\n"
            f"{outputs}\ngraph output:\n{graph.runner.output}"
        ) from None
    for pub in pubs:
        pub.kill()


def test_ros2_topic_hz_of_a_timer_node_output_is_its_configured_rate(graph, commands):
    from diagnostic_msgs.msg import DiagnosticArray

    reports = graph.probe.subscribe("/diagnostics", DiagnosticArray)
    # A timer node publishes once every input has a value. The previous test's `ros2 topic
    # pub` processes are killed one after the other, so preprocess may hold one half of a set
    # (sets pair by arrival): a single new pair would then join that stale half and the half
    # after it. The seed keeps no state, so the pair is sent again until the answer comes.
    graph.feed([0.0] * 6, [0.0] * 3, resend_s=2.0)
    window = 40  # messages
    hz = commands([ROS2, "topic", "hz", "-w", str(window), ACTION], ros_env(graph.domain_id))
    hz.wait_for(rf"window: {window}\b", timeout_s=60)  # a report over a full window
    assert float(re.findall(r"average rate: ([0-9.]+)", hz.output)[-1]) > 0, hz.output

    # The rate itself by the node's own clock (runs between its periodic reports), not by
    # arrival times at another process: a timer never fires faster than its rate (a loaded
    # machine can make it slower, so no lower bound); 50 Hz (the spec's rate) is far above.
    def rates() -> list[float]:
        return [float(kv.value) for report in reports for status in report.status
                if status.name == f"{NAMESPACE}/policy" for kv in status.values
                if kv.key == "firing_rate_hz" and float(kv.value) > 0]  # fmt: skip

    graph.probe.spin_until(lambda: len(rates()) >= 2, 30, "the policy's firing rate")
    assert max(rates()) <= 1.5 * POLICY_RATE_HZ, rates()


# --- parameters --------------------------------------------------------------------------


def test_ros2_param_list_shows_every_leapp_node_parameter(graph):
    expected = {"spec_path", "pipeline_node", "firing", "rate_hz", "max_input_age"}
    run = ros2_until(
        graph.domain_id,
        ["param", "list", *NODE_DISCOVERY, f"{NAMESPACE}/policy"],
        lambda run: expected <= set(lines(run)),
        timeout_s=CLI_TIMEOUT_S,
    )
    assert run.code == 0, run
    overrides = f"qos_overrides.{ACTION}.publisher.reliability"
    assert overrides in lines(run), run


def test_ros2_param_get_reads_spec_path_and_the_params_files_firing(graph):
    firing, spec = ros2_together(
        graph.domain_id,
        [policy_param_args("get", "firing"), policy_param_args("get", "spec_path")],
    )
    assert firing.stdout.strip() == "String value is: timer", firing
    found = re.fullmatch(r"String value is: (.+)", spec.stdout.strip())
    assert found, spec
    assert Path(found.group(1)).resolve() == load_plan(graph.export).spec_path.resolve(), spec


def test_ros2_param_set_is_refused_because_parameters_are_read_once(graph):
    run = ros2(graph.domain_id, *policy_param_args("set", "rate_hz", "5.0"))
    # ros2 param set exits 0 even when the node refuses: the output says what happened
    said = run.stdout + run.stderr
    assert "Setting parameter failed" in said and "read-only" in said, run


def policy_param_args(verb: str, *args: str) -> list[str]:
    """``param VERB /torch_pipeline/policy ARGS``, waiting up to 10 s for the node."""
    return ["param", verb, "--no-daemon", "--timeout", "10", f"{NAMESPACE}/policy", *args]


# --- ros2 run ----------------------------------------------------------------------------


def test_ros2_run_starts_one_node_that_reports_ready_answers_and_exits_0_on_ctrl_c(seed, commands):
    namespace = "/ros2_run_check"
    argv = [
        ROS2, "run", "leapp_ros", "leapp_node", "--ros-args",
        "-r", "__node:=preprocess", "-r", f"__ns:={namespace}",
        "-p", f"spec_path:={seed.path}",
    ]  # fmt: skip
    state, velocity = [2.0, 1.0, 0.0, -1.0, -2.0, 0.5], [0.7, 0.8, 0.9]
    expected, _ = eager(seed, state, velocity)
    with reserve_domain_id() as domain_id, Probe(domain_id) as probe:
        node = commands(argv, ros_env(domain_id))
        node.wait_for(r"leapp node 'preprocess' ready", timeout_s=60)
        topics = [f"{namespace}/preprocess/{port}" for port in ("state", "velocity")]
        publishers = [probe.publisher(topic, Float32MultiArray) for topic in topics]
        observations = probe.subscribe(f"{namespace}/preprocess/obs", Float32MultiArray)
        probe.wait_connected(namespace, ["preprocess"])  # then one pair is enough
        for publisher, values in zip(publishers, (state, velocity), strict=True):
            publisher.publish(Float32MultiArray(data=array.array("f", values)))

        def answered() -> bool:
            return any(close(message.data, expected) for message in observations)

        try:
            probe.spin_until(answered, 20, "an obs equal to eager PyTorch's")
        except AssertionError:
            received = [list(message.data) for message in observations[-3:]]
            raise AssertionError(
                f"no obs equal to eager {expected.tolist()} (last received: {received}); "
                f"output:\n{node.output}"
            ) from None

        os.killpg(node.process.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole group
        code = node.wait(20)
    assert code == 0, node.output
    assert "leapp node 'preprocess' stopping" in node.output, node.output
    group_gone = wait_until(lambda: not group_alive(node.process.pid), timeout_s=5)
    assert group_gone, f"processes of ros2 run are left after it exited:\n{node.output}"


def group_alive(pgid: int) -> bool:
    """Whether any process of process group ``pgid`` is left."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
