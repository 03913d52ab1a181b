"""The test side of a ROS 2 graph: an isolated domain and a probe node that the test spins.

Every ROS test must be isolated from the rest of the machine and from other tests:

- :func:`reserve_domain_id` picks a ROS domain id no other test on this machine holds (a
  lock file per id in one folder of this machine, :data:`LOCK_FOLDER`, whatever ``TMPDIR``
  says, so concurrent pytest runs never share one), and never the ``ROS_DOMAIN_ID`` of the
  environment (where anything started without isolation lands);
- :func:`ros_env` is the environment of a process in that domain, with discovery kept on
  this machine (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``);
- :class:`Probe` is an rclpy node on a private context in that domain (never the global one),
  spun by the test's own thread in short slices, with every wait bounded by a timeout.

Example::

    with reserve_domain_id() as domain_id:
        probe = Probe(domain_id)
        try:
            actions = probe.subscribe("/torch_pipeline/policy/action", Float32MultiArray)
            statuses = probe.wait_ready("/torch_pipeline", ["preprocess", "policy"])
            ...
        finally:
            probe.close()
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from leapp_ros.plan.pipeline import STATUS_TOPIC

__all__ = [
    "DOMAIN_IDS",
    "LOCALHOST",
    "LOCK_FOLDER",
    "SHELL_DOMAIN_IDS",
    "Inbox",
    "Probe",
    "claim_domain_id",
    "prime",
    "reserve_domain_id",
    "ros_env",
]

#: domain ids handed out (Fast DDS's default port mapping allows up to 232); the shells that
#: scripts/setup.sh prepares take theirs from :data:`SHELL_DOMAIN_IDS`, above these.
DOMAIN_IDS = range(1, 201)
SHELL_DOMAIN_IDS = range(201, 233)
#: discovery limited to this machine (never multicast beyond it).
LOCALHOST = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
#: one lock file per domain id in use. Not under ``tempfile.gettempdir()``: two runs with
#: different ``TMPDIR`` values must still see each other's locks.
LOCK_FOLDER = Path(os.environ.get("LEAPP_ROS_DOMAIN_LOCKS", "/tmp/leapp_ros_test_domains"))
_SLICE_S = 0.02  # longest single spin while waiting for something


def claim_domain_id(ids: Sequence[int] = DOMAIN_IDS) -> tuple[int, Any]:
    """A domain id from ``ids`` that no other process on this machine holds, and the open lock
    file holding it: close the file (or end the process) to release the id. The environment's
    own ``ROS_DOMAIN_ID`` is never handed out."""
    folder = LOCK_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    free = [domain_id for domain_id in ids if str(domain_id) != os.environ.get("ROS_DOMAIN_ID")]
    for domain_id in random.sample(free, len(free)):
        handle = open(folder / f"{domain_id}.lock", "w")  # noqa: SIM115 (held while in use)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        return domain_id, handle
    raise RuntimeError(
        f"every ROS domain id in {ids} is held by other tests on this machine; wait for them "
        f"or remove stale locks in {folder}"
    )


@contextlib.contextmanager
def reserve_domain_id(ids: Sequence[int] = DOMAIN_IDS) -> Iterator[int]:
    """:func:`claim_domain_id`, released when the ``with`` block ends."""
    domain_id, handle = claim_domain_id(ids)
    try:
        yield domain_id
    finally:
        handle.close()


def ros_env(domain_id: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) plus ROS isolation in ``domain_id``:
    the domain id, localhost-only discovery, unbuffered Python and uncoloured ROS logs."""
    return {
        **(os.environ if base is None else base),
        "ROS_DOMAIN_ID": str(domain_id),
        **LOCALHOST,
        "PYTHONUNBUFFERED": "1",
        "RCUTILS_COLORIZED_OUTPUT": "0",
    }


def qos(*, reliable: bool = True, depth: int = 10, transient_local: bool = False) -> Any:
    """An rclpy QoS profile: keep last ``depth``, reliable or best effort, volatile or
    transient local."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=(
            DurabilityPolicy.TRANSIENT_LOCAL if transient_local else DurabilityPolicy.VOLATILE
        ),
    )


class Inbox(list):
    """The messages received on one topic, in arrival order (a list), and the topic's name."""

    def __init__(self, topic: str):
        super().__init__()
        self.topic = topic


class Probe:
    """A test-side rclpy node on a private context in ``domain_id``, spun by the caller.

    Its context discovers only this machine (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` is
    set while it starts) and installs no signal handlers. Subscriptions collect messages into
    lists; :meth:`spin_until` spins until a condition holds or fails after a timeout.
    Close it with :meth:`close` (it is also a context manager).

    Attributes:
        context, node, executor: the rclpy objects (a ``SingleThreadedExecutor``, spun only
            by :meth:`spin_for` / :meth:`spin_until` in ``spin_once`` slices).
        statuses: per namespace watched, the latest ``_leapp/status`` record per node.
    """

    def __init__(self, domain_id: int, name: str = "leapp_test_probe"):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        self.context = Context()
        with _environment(LOCALHOST):  # rcl reads the discovery range when the context starts
            rclpy.init(
                context=self.context,
                domain_id=domain_id,
                signal_handler_options=SignalHandlerOptions.NO,
            )
        try:
            self.node = rclpy.create_node(name, context=self.context)
            self.executor = SingleThreadedExecutor(context=self.context)
            self.executor.add_node(self.node)
        except BaseException:
            self.context.try_shutdown()
            raise
        self.statuses: dict[str, dict[str, dict[str, Any]]] = {}

    def close(self) -> None:
        """Destroy the node and shut the context down (safe to call twice)."""
        if self.context.ok():
            self.executor.shutdown()
            self.node.destroy_node()
        self.context.try_shutdown()

    def __enter__(self) -> Probe:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def publisher(self, topic: str, message_type: Any, *, depth: int = 10) -> Any:
        """A reliable publisher on ``topic``."""
        return self.node.create_publisher(message_type, topic, qos(reliable=True, depth=depth))

    def subscribe(self, topic: str, message_type: Any, *, depth: int = 1000) -> Inbox:
        """Every message arriving on ``topic`` (reliable, keep last ``depth``), appended to
        the returned :class:`Inbox` as the probe spins."""
        subscription = self.node.create_subscription(
            message_type, topic, lambda message: inbox.append(message), qos(depth=depth)
        )
        inbox = Inbox(subscription.topic_name)
        return inbox

    def spin_for(self, seconds: float) -> None:
        """Spin for ``seconds``, handling every callback that comes due."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.executor.spin_once(timeout_sec=min(left, _SLICE_S))

    def spin_until(self, condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
        """Spin until ``condition()`` is truthy and return its value; raise AssertionError
        ("timed out after ... waiting for <what>") after ``timeout_s`` seconds."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = condition()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
            self.executor.spin_once(timeout_sec=_SLICE_S)

    def watch_status(self, namespace: str) -> dict[str, dict[str, Any]]:
        """Collect ``<namespace>/_leapp/status`` from now on; the returned dict holds the
        latest status record per node name and is updated as the probe spins."""
        from std_msgs.msg import String

        if namespace in self.statuses:
            return self.statuses[namespace]
        latest: dict[str, dict[str, Any]] = {}

        def on_status(message: Any) -> None:
            status = json.loads(message.data)
            latest[status["node"]] = status

        profile = qos(reliable=True, depth=100, transient_local=True)
        topic = f"{namespace.rstrip('/')}/{STATUS_TOPIC}"
        self.node.create_subscription(String, topic, on_status, profile)
        self.statuses[namespace] = latest
        return latest

    def wait_ready(
        self,
        namespace: str,
        nodes: Sequence[str],
        *,
        timeout_s: float = 60.0,
        check: Callable[[], None] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """Wait until each of ``nodes`` under ``namespace`` reported ``ready`` on its status
        topic; the status dict (see :meth:`watch_status`). ``check()`` is called while
        waiting and may raise to stop early (for example when a node process exited)."""
        latest = self.watch_status(namespace)

        def ready() -> bool:
            if check is not None:
                check()
            return all(latest.get(node, {}).get("state") == "ready" for node in nodes)

        self.spin_until(ready, timeout_s, f"nodes {list(nodes)} in {namespace} to be ready")
        return latest

    def wait_matched(self, publisher: Any, count: int = 1, timeout_s: float = 20.0) -> None:
        """Wait until ``publisher`` has matched ``count`` subscriptions."""
        self.spin_until(
            lambda: publisher.get_subscription_count() >= count,
            timeout_s,
            f"{count} subscription(s) on {publisher.topic_name}",
        )


def prime(
    probe: Probe,
    publish: Callable[[], None],
    inboxes: Sequence[list[Any]],
    timeout_s: float = 30.0,
    interval_s: float = 0.2,
    *,
    check: Callable[[], None] | None = None,
) -> None:
    """Call ``publish()`` every ``interval_s`` until every inbox got a message, then empty the
    inboxes so counting starts from zero.

    Node subscriptions are best effort, so the first messages after discovery can be lost
    even once a publisher counts the subscription; priming proves every hop of the path is
    matched. Each call may run the nodes, so prime only with inputs that leave recurrent
    state as it was (or use :class:`~leapp_ros.testing.GraphUnderTest`, which needs none).
    ``check()`` is called on every round and may raise to stop early (a graph process that
    died). On timeout the AssertionError names each inbox still empty and how many
    publishers the probe sees on its topic (0: the node never matched the probe), then the
    counters of each node whose status the probe watches (received 0: no input reached it;
    dropped, stale or incomplete sets: inputs came but did not fire it).
    """
    deadline = time.monotonic() + timeout_s
    while not all(inboxes):
        if check is not None:
            check()
        if time.monotonic() > deadline:
            raise AssertionError(
                f"no output within {timeout_s} s of publishing inputs on "
                + ", ".join(_silent(probe, inboxes))
                + "".join(_counters(probe))
            )
        publish()
        probe.spin_for(interval_s)
    probe.spin_for(0.3)  # late answers to the repeated inputs
    for inbox in inboxes:
        inbox.clear()


def _silent(probe: Probe, inboxes: Sequence[list[Any]]) -> list[str]:
    """``<topic> (<n> publishers)`` for each empty inbox, of which ``k`` of ``n`` received."""
    empty = [inbox for inbox in inboxes if not inbox]
    named = [
        f"{inbox.topic} ({probe.node.count_publishers(inbox.topic)} publishers)"
        if isinstance(inbox, Inbox)
        else "an inbox"
        for inbox in empty
    ]
    return [*named, f"({len(inboxes) - len(empty)} of {len(inboxes)} inboxes received)"]


#: the status record's counters that tell where inputs went (see leapp_ros.node.pipeline_node)
_COUNTERS = ("runs", "received", "dropped", "stale", "incomplete_sets", "errors")


def _counters(probe: Probe) -> list[str]:
    """``; <namespace>/<node>: runs 0, received 0, ...`` for each node of each namespace whose
    status the probe watches, from its latest record."""
    return [
        f"; {namespace.rstrip('/')}/{node}: "
        + ", ".join(f"{name} {record[name]}" for name in _COUNTERS if name in record)
        for namespace, latest in probe.statuses.items()
        for node, record in sorted(latest.items())
    ]


@contextlib.contextmanager
def _environment(variables: Mapping[str, str]) -> Iterator[None]:
    """Set ``variables`` in this process's environment for the block only."""
    previous = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
