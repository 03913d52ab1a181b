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

The nodes under test keep their deployed QoS (best-effort subscriptions of depth 1): the probe
publishes reliably (the deployed publisher QoS) and, before it sends anything,
:meth:`Probe.wait_connected` waits until every hop is matched both ways (see
:mod:`leapp_ros.testing.delivery`); then each message it sends arrives, once.

Example::

    with reserve_domain_id() as domain_id, Probe(domain_id) as probe:
        state = probe.publisher("/torch_pipeline/preprocess/state", Float32MultiArray)
        ...
        actions = probe.subscribe("/torch_pipeline/policy/action", Float32MultiArray)
        probe.wait_connected("/torch_pipeline", ["preprocess", "policy"])
        state.publish(...)  # one message per topic, then wait for its answer
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
    """The messages received on one topic, in arrival order (a list), the topic's name and
    how many publishers the subscription has matched (:attr:`matched`, a
    :class:`~leapp_ros.node.match_count.MatchCount`: call it)."""

    def __init__(self, topic: str, matched: Any = None):
        super().__init__()
        self.topic = topic
        self.matched = matched


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
        self.inboxes: list[Inbox] = []

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
        """A reliable publisher on ``topic`` (the QoS of the nodes' publishers; a node's
        best-effort subscription takes its messages once matched)."""
        return self.node.create_publisher(message_type, topic, qos(reliable=True, depth=depth))

    def subscribe(self, topic: str, message_type: Any, *, depth: int = 1000) -> Inbox:
        """Every message arriving on ``topic`` (reliable, keep last ``depth``: the probe's own
        subscription misses nothing a node's reliable publisher sent once matched), appended
        to the returned :class:`Inbox` as the probe spins."""
        from leapp_ros.node.match_count import MatchCount

        matched = MatchCount()
        subscription = self.node.create_subscription(
            message_type,
            topic,
            lambda message: inbox.append(message),
            qos(depth=depth),
            event_callbacks=matched.subscription_callbacks(),
        )
        inbox = Inbox(subscription.topic_name, matched)
        self.inboxes.append(inbox)
        return inbox

    def connection_gaps(self, namespace: str) -> list[str]:
        """Every hop between the nodes under ``namespace`` (their latest status records) and
        this probe's publishers and inboxes not yet matched both ways, with every endpoint
        this probe has discovered on those topics
        (:func:`~leapp_ros.testing.delivery.connection_gaps`)."""
        from leapp_ros.testing.delivery import connection_gaps

        statuses = self.watch_status(namespace)
        topics = {t for s in statuses.values() for key in ("publishers", "subscribers")
                  for t in s.get(key, {})}  # fmt: skip
        node = self.node
        return connection_gaps(
            statuses,
            [(p.topic_name, p.get_subscription_count()) for p in node.publishers],
            [(inbox.topic, inbox.matched()) for inbox in self.inboxes],
            {t: (node.count_publishers(t), node.count_subscribers(t)) for t in topics},
        )

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
        """Wait until ``publisher`` has matched ``count`` subscriptions (the publisher's side
        only: enough for a reliable subscription, which asks for what it missed; a node's
        best-effort one needs :meth:`wait_connected`)."""
        self.spin_until(
            lambda: publisher.get_subscription_count() >= count,
            timeout_s,
            f"{count} subscription(s) on {publisher.topic_name}",
        )

    def wait_received(
        self,
        namespace: str,
        sent: Mapping[str, int],
        *,
        timeout_s: float = 30.0,
        check: Callable[[], None] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """Wait until the nodes under ``namespace`` have taken every message sent to them:
        ``sent`` (messages published on each input topic, absolute names, since the nodes
        started) and one per run of the nodes publishing on their inputs
        (:func:`~leapp_ros.testing.delivery.receipt_gaps`); the status dict. Their records
        then count everything sent so far: a node that must not answer an input shows it.

        Raises:
            AssertionError: after ``timeout_s``, naming each topic short of messages.
        """
        from leapp_ros.testing.delivery import receipt_gaps

        latest = self.watch_status(namespace)
        deadline = time.monotonic() + timeout_s
        while gaps := receipt_gaps(latest, sent):
            if check is not None:
                check()
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout_s} s waiting for the nodes to take every "
                    f"message: {'; '.join(gaps)}"
                )
            self.executor.spin_once(timeout_sec=_SLICE_S)
        return latest

    def wait_connected(
        self,
        namespace: str,
        nodes: Sequence[str],
        *,
        timeout_s: float = 60.0,
        check: Callable[[], None] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """Wait until each of ``nodes`` under ``namespace`` is ready and every hop between
        them, the probe's publishers and the probe's inboxes (:meth:`subscribe`) is matched
        both ways (:meth:`connection_gaps`); the status dict (see :meth:`watch_status`).
        From then on, a message the probe publishes reaches the nodes that subscribe to it,
        and what they publish reaches the inboxes. ``check()`` is called while waiting and
        may raise to stop early (a node process that exited).

        Raises:
            AssertionError: after ``timeout_s``, naming every hop still unmatched and the
                counters of each node.
        """
        from leapp_ros.testing.delivery import unready_nodes

        latest = self.watch_status(namespace)

        def gaps() -> list[str]:
            if check is not None:
                check()
            waiting = unready_nodes(latest, nodes)
            if waiting:
                return [f"nodes {waiting} to be ready"]
            return self.connection_gaps(namespace)

        deadline = time.monotonic() + timeout_s
        while late := gaps():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout_s} s waiting for {'; '.join(late)}"
                    + "".join(_counters(self))
                )
            self.executor.spin_once(timeout_sec=_SLICE_S)
        return latest


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
