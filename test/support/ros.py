"""Helpers for the node tests over real DDS: node processes started by hand, startup errors,
and the seed export.

Isolation (a domain id of its own, localhost discovery, a private probe context, bounded waits)
comes from :mod:`leapp_ros.testing`: :func:`ros_graph` reserves a domain, starts
``(module, args)`` processes in it (:class:`NodeProcess`) and opens a
:class:`~leapp_ros.testing.Probe`; :func:`exited` lets :meth:`Probe.wait_ready` fail early, with
the output, when a node process ends; :func:`~leapp_ros.testing.prime` proves every hop of a
path is matched (node subscriptions are best effort, so the first messages can be lost).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

import leapp
from leapp_ros.testing import Probe, reserve_domain_id, ros_env

__all__ = [
    "NodeProcess",
    "Probe",
    "eager_seed",
    "exited",
    "export_seed",
    "node_args",
    "ros_graph",
    "run_to_exit",
    "startup_error_line",
]

REPO = Path(__file__).resolve().parents[2]
ROS2 = shutil.which("ros2")  # the ros2 CLI (scripts/setup.sh installs it with the launch stack)
EXIT_TIMEOUT_S = 60.0

# In-process node mains (leapp_ros.node.pipeline_node.main) read the discovery range from the
# environment.
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"


class NodeProcess:
    """``python -m <module> <args>`` (``leapp_ros.node.pipeline_node`` or
    ``leapp_ros.run.container``) in its own process group, in ``domain_id``, with stdout and stderr
    going to ``log``."""

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

    def end(self, grace_s: float = 5.0) -> None:
        """SIGINT to the process group, then SIGKILL after ``grace_s``: a node that exits
        cleanly leaves no DDS participant, and no shared-memory segments, behind it."""
        if self.running():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=grace_s)
        self.kill()


def node_args(spec_path: Path, node: str, namespace: str, *ros: str) -> list[str]:
    """Arguments of ``python -m leapp_ros.node.pipeline_node`` running pipeline node ``node``."""
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


def exited(processes: Sequence[NodeProcess]) -> Callable[[], None]:
    """A check for :meth:`Probe.wait_ready`: fails, with its output, once a process ended."""

    def check() -> None:
        for process in processes:
            if not process.running():
                raise AssertionError(
                    f"{process.args} exited with {process.process.returncode} before "
                    f"ready:\n{process.output}"
                )

    return check


@contextlib.contextmanager
def ros_graph(
    tmp: Path, starts: Sequence[tuple[str, Sequence[str]]]
) -> Iterator[tuple[Probe, list[NodeProcess], int]]:
    """Reserve a domain, start ``(module, args)`` processes in it and open a :class:`Probe`;
    on exit close the probe and end every process that is still running (SIGINT, then
    SIGKILL), before the domain id is released."""
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
                process.end()
            if probe is not None:
                probe.close()


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


def export_example(
    save_path: Path, name: str, inputs: Callable[[Any], tuple[Any, ...]], *, no_grad: bool = False
) -> SimpleNamespace:
    """Trace ``examples/<name>.py`` (``run_policy(policy, preprocess(*inputs(module)))``,
    weights seeded) into ``save_path``: the export folder as ``path``, and ``policy`` and
    ``module`` to compute the eager results with."""
    from leapp import session as session_module

    module = importlib.import_module(name)  # examples/ is on pytest's path
    session_module._active = None
    torch.manual_seed(0)
    policy = module.Policy().eval()
    leapp.start(name=name, save_path=save_path)
    with torch.no_grad() if no_grad else contextlib.nullcontext():
        module.run_policy(policy, module.preprocess(*inputs(module)))
    leapp.stop()
    compiled = leapp.compile_graph(graph_configs=leapp.GraphConfigs(frequency=50))
    return SimpleNamespace(path=compiled.path.parent, policy=policy, module=module)


def export_seed(save_path: Path) -> SimpleNamespace:
    """examples/torch_pipeline.py exported (see :func:`export_example`)."""
    return export_example(save_path, "torch_pipeline", lambda _: (torch.zeros(6), torch.zeros(3)))


def eager_seed(seed: SimpleNamespace, state: Any, velocity: Any) -> tuple[Any, Any]:
    """``(obs, action)`` of the seed pipeline, computed eagerly by PyTorch."""
    with torch.no_grad():
        obs = seed.module.preprocess(state, velocity)
        return obs, seed.module.run_policy(seed.policy, obs)


def check_obs_only_while_echoed(
    seed: SimpleNamespace, probe: Probe, echo: Probe, obs_publisher: Any, local_readers: int
) -> None:
    """Drive the seed's nodes, spun by ``probe`` and publishing ``obs`` on ``obs_publisher``,
    over real DDS at their deployed QoS: with only ``local_readers`` subscribed to ``obs``, no
    ``obs`` goes to the middleware and every action equals eager PyTorch's; once ``echo``
    subscribes, it gets every ``obs``, equal to eager PyTorch's."""
    import time

    from std_msgs.msg import Float32MultiArray

    def wait(condition: Callable[[], Any], what: str) -> None:
        deadline = time.monotonic() + 20.0
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            probe.executor.spin_once(timeout_sec=0.01)
            echo.executor.spin_once(timeout_sec=0.0)

    sent: list = []
    publish = obs_publisher.publish
    obs_publisher.publish = lambda message: (sent.append(message), publish(message))
    actions = probe.subscribe("/torch_pipeline/policy/action", Float32MultiArray)
    inputs = [
        probe.publisher(f"/torch_pipeline/preprocess/{port}", Float32MultiArray)
        for port in ("state", "velocity")
    ]
    probe.wait_connected("/torch_pipeline", ["preprocess", "policy"])  # both ways

    def exchange(count: int, seen: list | None = None) -> list:
        """``count`` input pairs, each until its action (and, given ``seen``, the echo's obs)
        arrived; their eager ``(obs, action)``."""
        expected = []
        for _ in range(count):
            state, velocity = torch.randn(6), torch.randn(3)
            target = (len(actions) + 1, 0 if seen is None else len(seen) + 1)
            for publisher, value in zip(inputs, (state, velocity), strict=True):
                publisher.publish(Float32MultiArray(data=value.tolist()))
            wait(lambda t=target: (len(actions), len(seen or ())) >= t, "the answers")
            expected.append(eager_seed(seed, state, velocity))
        return expected

    expected = exchange(5)
    for message, (_, action) in zip(actions[-5:], expected, strict=True):
        assert torch.allclose(torch.tensor(message.data), action, atol=1e-5)
    assert sent == [] and obs_publisher.get_subscription_count() == local_readers

    seen = echo.subscribe("/torch_pipeline/preprocess/obs", Float32MultiArray)
    # both ways (the echo is reliable: it asks for what it missed once it matched)
    wait(
        lambda: obs_publisher.get_subscription_count() == local_readers + 1 and seen.matched(),
        "the echo",
    )
    expected = exchange(5, seen)
    assert len(sent) == 5
    for message, (obs, _) in zip(seen[-5:], expected, strict=True):
        assert torch.allclose(torch.tensor(message.data), obs, atol=1e-6)


def waiting_topics(context: Any, subscriptions: Sequence[Any]) -> list[str]:
    """The topics of ``subscriptions`` (rclpy, of ``context``) with a message waiting in their
    reader, asked of an rcl wait set on them alone: nothing is taken, and whoever spins them
    does not (a test that must know messages are queued, not how long they take to be)."""
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

    with contextlib.ExitStack() as stack:
        handles = [subscription.handle for subscription in subscriptions]
        for handle in handles:
            stack.enter_context(handle)
        stack.enter_context(context.handle)
        wait_set = _rclpy.WaitSet(len(handles), 0, 0, 0, 0, 0, context.handle)
        wait_set.clear_entities()
        for handle in handles:
            wait_set.add_subscription(handle)
        wait_set.wait(0)
        ready = wait_set.get_ready_entities("subscription")
        return [s.topic_name for s, h in zip(subscriptions, handles, strict=True)
                if h.pointer in ready]  # fmt: skip
