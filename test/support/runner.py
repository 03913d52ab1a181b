"""Helpers for the runner and launch tests: the seed export, watching a command, the seed's
topics from a probe.

Every ROS process a test starts gets ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and a
``ROS_DOMAIN_ID`` of its own (:func:`~leapp_ros.testing.ros_env`, with the id from
:func:`~leapp_ros.testing.reserve_domain_id` or :func:`~leapp_ros.testing.claim_domain_id`,
re-exported here); :class:`Command` runs a command in its own process group, collects its
merged output line by line, and kills it (and every pid it was told about) when the test ends.
"""

from __future__ import annotations

import array
import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from leapp_ros.testing import Probe, claim_domain_id, reserve_domain_id, ros_env
from support import ros as ros_support

__all__ = [
    "FAKE_NODE",
    "REPO",
    "Command",
    "SeedIO",
    "claim_domain_id",
    "export_seed",
    "pid_alive",
    "reserve_domain_id",
    "ros_env",
    "wait_until",
]

REPO = Path(__file__).resolve().parents[2]
_suppress_missing = contextlib.suppress(
    ProcessLookupError, PermissionError, subprocess.TimeoutExpired
)

# A stand-in for a leapp node, for testing the supervision alone: `python -m fake_node NAME
# MODE`, MODE one of ok (exits 0 on SIGINT/SIGTERM), stubborn (ignores SIGINT), crash (exits 3
# after 0.3 s), config (exits 2 at once, as a node with a bad spec does), silent (publishes no
# status), impostor (publishes a ready record naming it, but with another process's pid, then
# one of its own for the node NAME_seen). Otherwise it publishes a ready status record as the
# real node does (reliable, transient local, on _leapp/status; with its pid) and logs nothing
# of it: the runner must know it is ready from the record alone.
FAKE_NODE = """
import json, os, signal, sys, time
name, mode = sys.argv[1], sys.argv[2]
def stop(signum, frame):
    print(f"{name}: stopping on {signal.Signals(signum).name}", flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, signal.SIG_IGN if mode == "stubborn" else stop)
print(f"{name}: some output", flush=True)
if mode == "config":
    print(f"{name}: bad spec", file=sys.stderr, flush=True)
    sys.exit(2)
if mode != "silent":
    import rclpy
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from rclpy.signals import SignalHandlerOptions
    from std_msgs.msg import String
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("fake_" + name)
    qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
    status = node.create_publisher(String, "_leapp/status", qos)
    def record(node_name, pid):
        text = json.dumps({"node": node_name, "state": "ready", "pid": pid})
        status.publish(String(data=text))
    if mode == "impostor":  # both records reach the runner: wait until it is matched
        while status.get_subscription_count() < 1:
            time.sleep(0.01)
        record(name, os.getpid() + 100000)
        record(name + "_seen", os.getpid())
    else:
        record(name, os.getpid())
if mode == "crash":  # crashes a moment after it reported ready (the pause is no assertion)
    time.sleep(0.3)
    print(f"{name}: boom", file=sys.stderr, flush=True)
    sys.exit(3)
while True:
    time.sleep(0.05)
"""


def export_seed(save_path: Path) -> Path:
    """Trace examples/torch_pipeline.py into ``save_path``; the export folder."""
    return ros_support.export_seed(save_path).path


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists (zombies count as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def wait_until(condition, timeout_s: float, interval_s: float = 0.05) -> bool:
    """Poll ``condition()`` until it is true (True) or ``timeout_s`` passed (False)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval_s)


class Command:
    """A command run in its own process group with stdout and stderr merged and collected."""

    def __init__(
        self, argv: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None
    ):
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self.extra_pids: set[int] = set()
        self.process = subprocess.Popen(
            list(argv),
            env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
            cwd=REPO if cwd is None else cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def output(self) -> str:
        with self._changed:
            return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout_s: float, start: int = 0) -> re.Match[str]:
        """The first line from index ``start`` on matching ``pattern``; fails after
        ``timeout_s`` or when the output ends without one."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                for line in self.lines[start:]:
                    found = regex.search(line)
                    if found:
                        return found
                left = deadline - time.monotonic()
                ended = not self._reader.is_alive()
                if left <= 0 or ended:
                    raise AssertionError(
                        f"no line matching {pattern!r} within {timeout_s} s"
                        f"{' (the output ended)' if ended else ''}; output so far:\n"
                        + "\n".join(self.lines)
                    )
                self._changed.wait(min(left, 0.2))

    def started_pids(self) -> dict[str, int]:
        """``label -> pid`` from the runner's ``started 'label' (pid N)`` lines (latest)."""
        found = {}
        for line in list(self.lines):
            match = re.search(r"started '([^']+)' \(pid (\d+)\)", line)
            if match:
                found[match.group(1)] = int(match.group(2))
        self.extra_pids.update(found.values())
        return found

    def wait(self, timeout_s: float) -> int:
        code = self.process.wait(timeout_s)
        self._reader.join(5)
        return code

    def kill(self) -> None:
        """Kill the command's process group and every pid it reported starting."""
        self.started_pids()
        with _suppress_missing:
            os.killpg(self.process.pid, signal.SIGKILL)
        for pid in self.extra_pids:
            with _suppress_missing:
                os.killpg(pid, signal.SIGKILL)
            with _suppress_missing:
                os.kill(pid, signal.SIGKILL)
        with _suppress_missing:
            self.process.wait(5)


class SeedIO:
    """Feeds the seed pipeline under ``namespace`` and reads its action, through a
    :class:`ros_support.Probe` (spun by the caller's thread, in the caller's domain), at the
    nodes' deployed QoS: each pair goes out once, on hops matched both ways."""

    def __init__(self, probe: Probe, namespace: str = "/torch_pipeline"):
        from std_msgs.msg import Float32MultiArray

        self.probe = probe
        self.namespace = namespace
        self._message = Float32MultiArray
        self._state = probe.publisher(f"{namespace}/preprocess/state", Float32MultiArray)
        self._velocity = probe.publisher(f"{namespace}/preprocess/velocity", Float32MultiArray)
        self._actions = probe.subscribe(f"{namespace}/policy/action", Float32MultiArray)

    def connected(self) -> list[str]:
        """What is missing before a pair can go out: a node that reads the inputs or writes
        the action (by the status records), or a hop not matched both ways."""
        ready = [s for s in self.probe.watch_status(self.namespace).values()
                 if s.get("state") == "ready"]  # fmt: skip
        read = {topic for record in ready for topic in record.get("publishers", {})}
        written = {topic for record in ready for topic in record.get("subscribers", {})}
        missing = [p.topic_name for p in (self._state, self._velocity) if p.topic_name not in read]
        missing += [] if self._actions.topic in written else [self._actions.topic]
        if missing:
            return [f"a ready node on {', '.join(missing)}"]
        return self.probe.connection_gaps(self.namespace)

    def step(
        self,
        state: torch.Tensor,
        velocity: torch.Tensor,
        expected: torch.Tensor,
        timeout_s: float,
        resend_s: float | None = None,
    ) -> torch.Tensor:
        """Wait until the hops are matched both ways, publish ``state`` and ``velocity`` once
        and return the first action close to ``expected`` (earlier ones are skipped).
        ``resend_s``: publish the pair again each time that long passed without the answer
        (the seed keeps no state, so a repeat is harmless; for a graph whose hops may lose a
        first message, as a restarted node's may)."""
        deadline = time.monotonic() + timeout_s
        while gaps := self.connected():
            if time.monotonic() > deadline:
                raise AssertionError(f"not connected within {timeout_s} s: {'; '.join(gaps)}")
            self.probe.executor.spin_once(timeout_sec=0.05)
        self._actions.clear()

        def send() -> float:
            for publisher, values in ((self._state, state), (self._velocity, velocity)):
                message = self._message()
                message.data = array.array("f", values.numpy().astype("float32").tobytes())
                publisher.publish(message)
            return time.monotonic() + resend_s if resend_s is not None else float("inf")

        again = send()

        def answer() -> torch.Tensor | None:
            for message in self._actions:
                action = torch.tensor(list(message.data))
                if action.shape == expected.shape and torch.allclose(action, expected, atol=1e-5):
                    return action
            return None

        while (action := answer()) is None:
            if time.monotonic() > deadline:
                received = [list(message.data) for message in self._actions[-3:]]
                statuses = self.probe.watch_status(self.namespace)
                raise AssertionError(
                    f"no action close to {expected.tolist()} within {timeout_s} s; last ones: "
                    f"{received}; statuses: {statuses}"
                )
            if time.monotonic() > again:
                again = send()
            self.probe.executor.spin_once(timeout_sec=0.05)
        return action
