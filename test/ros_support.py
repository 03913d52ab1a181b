"""Helpers for tests over real DDS: domain ids, node processes, and a test-side ROS node.

Isolation rules every ROS test here follows:

- ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` in this process and in every child process;
- a ROS domain id of its own (:func:`reserve_domain_id`: ids 101..232, locked with a file lock so
  concurrent test runs on this machine never share one; the runner tests use 1..100), used by
  the test's own context (:class:`Probe`) and every process it starts (:class:`NodeProcess`);
- timeouts on every wait; child processes run in their own process group and are killed when
  the test (or fixture) ends.

:func:`ros_graph` bundles all three for a test or fixture; :meth:`Probe.wait_ready` waits for
the ``ready`` status of every node, :func:`prime` for every hop of a path to be matched (the
first messages after discovery can be lost: node subscriptions are best effort).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

import leapp
from leapp_ros.plan import STATUS_TOPIC

REPO = Path(__file__).resolve().parent.parent
DOMAIN_IDS = range(101, 233)  # Fast DDS allows up to 232; 1..100 belong to the runner tests
STARTUP_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 60.0

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"  # this process's own contexts too


@contextlib.contextmanager
def reserve_domain_id() -> Iterator[int]:
    """A ROS domain id no other test (in any process on this machine) holds meanwhile."""
    folder = Path(tempfile.gettempdir()) / "leapp_ros_test_domains"
    folder.mkdir(exist_ok=True)
    for domain_id in random.sample(list(DOMAIN_IDS), len(DOMAIN_IDS)):
        handle = open(folder / f"{domain_id}.lock", "w")  # noqa: SIM115 (held while in use)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        try:
            yield domain_id
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
        return
    raise RuntimeError(f"every ROS domain id in {DOMAIN_IDS} is in use by other tests")


def ros_env(domain_id: int) -> dict[str, str]:
    """The environment of a child process: this one's, plus ROS isolation."""
    return {
        **os.environ,
        "ROS_DOMAIN_ID": str(domain_id),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "PYTHONUNBUFFERED": "1",
        "RCUTILS_COLORIZED_OUTPUT": "0",
    }


class NodeProcess:
    """``python -m <module> <args>`` (``leapp_ros.node`` or ``leapp_ros.container``) in its own
    process group, in ``domain_id``, with stdout and stderr going to ``log``."""

    def __init__(self, module: str, args: Sequence[str], domain_id: int, log: Path):
        self.log = log
        self.args = [sys.executable, "-m", module, *args]
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                self.args,
                env=ros_env(domain_id),
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout_s: float) -> int:
        """The exit code, after at most ``timeout_s`` (then the process is killed)."""
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{self.args} did not exit within {timeout_s} s; output:\n{self.output}"
            ) from None

    def stop(self, signum: int = signal.SIGINT, timeout_s: float = 15.0) -> int:
        """Send ``signum`` to the process and return its exit code."""
        if self.running():
            self.process.send_signal(signum)
        return self.wait(timeout_s)

    def kill(self) -> None:
        """Kill the whole process group (no-op when it has ended)."""
        if self.running():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)


def node_args(spec_path: Path, node: str, namespace: str, *ros: str) -> list[str]:
    """Arguments of ``python -m leapp_ros.node`` running pipeline node ``node``."""
    return [
        "--ros-args",
        "-r",
        f"__node:={node}",
        "-r",
        f"__ns:={namespace}",
        "-p",
        f"spec_path:={spec_path}",
        *ros,
    ]


class Probe:
    """A test-side rclpy node on a private context in ``domain_id``, spun by the test itself.

    Subscriptions collect messages into lists; :meth:`spin_until` spins until a condition holds
    or fails the test after a timeout.
    """

    def __init__(self, domain_id: int, name: str = "leapp_test_probe"):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        self.context = Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.statuses: dict[str, dict[str, dict[str, Any]]] = {}  # namespace -> node -> status

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()

    def publisher(self, topic: str, message_type: Any) -> Any:
        """A reliable publisher (depth 10)."""
        return self.node.create_publisher(message_type, topic, _qos(reliable=True, depth=10))

    def subscribe(self, topic: str, message_type: Any, *, depth: int = 1000) -> list[Any]:
        """Every message that arrives on ``topic`` (reliable), appended to the returned list."""
        inbox: list[Any] = []
        self.node.create_subscription(
            message_type, topic, inbox.append, _qos(reliable=True, depth=depth)
        )
        return inbox

    def spin_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.executor.spin_once(timeout_sec=min(left, 0.05))

    def spin_until(self, condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
        """Spin until ``condition()`` is truthy (returned); fail the test after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = condition()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
            self.executor.spin_once(timeout_sec=0.02)

    def watch_status(self, namespace: str) -> dict[str, dict[str, Any]]:
        """Start collecting ``<namespace>/_leapp/status``; the latest status per node name."""
        from std_msgs.msg import String

        if namespace in self.statuses:
            return self.statuses[namespace]
        latest: dict[str, dict[str, Any]] = {}

        def on_status(message: Any) -> None:
            status = json.loads(message.data)
            latest[status["node"]] = status

        qos = _qos(reliable=True, depth=100, transient_local=True)
        topic = f"{namespace.rstrip('/')}/{STATUS_TOPIC}"
        self.node.create_subscription(String, topic, on_status, qos)
        self.statuses[namespace] = latest
        return latest

    def wait_ready(
        self,
        namespace: str,
        nodes: Sequence[str],
        processes: Sequence[NodeProcess] = (),
        timeout_s: float = STARTUP_TIMEOUT_S,
    ) -> dict[str, dict[str, Any]]:
        """Wait until every node in ``nodes`` reported ``ready`` on the status topic; fail
        early, with the output, when one of ``processes`` exits."""
        latest = self.watch_status(namespace)

        def ready() -> bool:
            for process in processes:
                if not process.running():
                    raise AssertionError(
                        f"{process.args} exited with {process.process.returncode} before "
                        f"ready:\n{process.output}"
                    )
            return all(latest.get(node, {}).get("state") == "ready" for node in nodes)

        self.spin_until(ready, timeout_s, f"nodes {list(nodes)} in {namespace} to be ready")
        return latest

    def wait_matched(self, publisher: Any, count: int = 1, timeout_s: float = 20.0) -> None:
        """Wait until ``publisher`` reaches ``count`` subscriptions."""
        self.spin_until(
            lambda: publisher.get_subscription_count() >= count,
            timeout_s,
            f"{count} subscription(s) on {publisher.topic_name}",
        )


def _qos(*, reliable: bool, depth: int, transient_local: bool = False) -> Any:
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=(
            DurabilityPolicy.TRANSIENT_LOCAL if transient_local else DurabilityPolicy.VOLATILE
        ),
    )


@contextlib.contextmanager
def ros_graph(
    tmp: Path, starts: Sequence[tuple[str, Sequence[str]]]
) -> Iterator[tuple[Probe, list[NodeProcess], int]]:
    """Reserve a domain, start ``(module, args)`` processes in it and open a :class:`Probe`;
    on exit close the probe and kill every process that is still running."""
    with reserve_domain_id() as domain_id:
        processes: list[NodeProcess] = []
        probe = None
        try:
            for index, (module, args) in enumerate(starts):
                log = tmp / f"process{index}.log"
                processes.append(NodeProcess(module, args, domain_id, log))
            probe = Probe(domain_id)
            yield probe, processes, domain_id
        finally:
            for process in processes:
                process.kill()
            if probe is not None:
                probe.close()


def prime(
    probe: Probe,
    publish: Callable[[], None],
    inboxes: Sequence[list[Any]],
    timeout_s: float = 30.0,
) -> None:
    """Publish until every inbox got a message (every hop of the path is matched), then drain
    the inboxes so counting starts from zero."""
    deadline_spins = int(timeout_s / 0.2)
    for _ in range(deadline_spins):
        publish()
        probe.spin_for(0.2)
        if all(inboxes):
            break
    else:
        raise AssertionError(f"no output within {timeout_s} s of publishing inputs")
    probe.spin_for(0.3)
    for inbox in inboxes:
        inbox.clear()


def run_to_exit(module: str, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run ``python -m module args`` to its end in a domain of its own (it must end in time)."""
    with reserve_domain_id() as domain_id:
        return subprocess.run(
            [sys.executable, "-m", module, *args],
            env=ros_env(domain_id),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=EXIT_TIMEOUT_S,
        )


def startup_error_line(result: subprocess.CompletedProcess[str], program: str) -> str:
    """The one ``<program>: error: ...`` line of a run that must have exited with code 2."""
    lines = [line for line in result.stderr.splitlines() if line.startswith(f"{program}: error:")]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    return lines[0]


def export_seed(save_path: Path) -> SimpleNamespace:
    """Trace examples/torch_pipeline.py (weights seeded) into ``save_path``: the export folder
    as ``path``, and ``policy`` and ``module`` to compute the eager results with."""
    from leapp import session as session_module

    sys.path.insert(0, str(REPO / "examples"))
    try:
        import torch_pipeline as module
    finally:
        sys.path.remove(str(REPO / "examples"))
    session_module._active = None
    torch.manual_seed(0)
    policy = module.Policy().eval()
    leapp.start(name="torch_pipeline", save_path=save_path)
    module.run_policy(policy, module.preprocess(torch.zeros(6), torch.zeros(3)))
    leapp.stop()
    compiled = leapp.compile_graph(graph_configs=leapp.GraphConfigs(frequency=50))
    return SimpleNamespace(path=compiled.path.parent, policy=policy, module=module)


def eager_seed(seed: SimpleNamespace, state: Any, velocity: Any) -> tuple[Any, Any]:
    """``(obs, action)`` of the seed pipeline, computed eagerly by PyTorch."""
    with torch.no_grad():
        obs = seed.module.preprocess(state, velocity)
        return obs, seed.module.run_policy(seed.policy, obs)
