"""The status records of a running graph, watched from the process that started it.

Every pipeline node publishes JSON status records on ``<namespace>/_leapp/status`` (reliable,
transient local; see :mod:`leapp_ros.node.pipeline_node`): ``"state": "ready"`` once it is
configured (model loaded and warmed up), again every second and after each change, and
``"stopping"`` when it shuts down; each record names its pipeline node (``node``) and the id of
the process it runs in (``pid``). :class:`StatusWatch` is a hidden rclpy node (``_leapp_runner``)
on a private context in the processes' ROS domain, with the discovery settings of their
environment, subscribed to those topics and spun by a thread of its own; it hands every record
to a callback. The runner (:mod:`leapp_ros.run.runner`) learns from them when each of its
processes is ready, whatever the nodes' log level: :class:`ReadyNodes` keeps ``(pid, node)`` of
every node that said ``ready`` and has not said ``stopping`` since.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from leapp_ros.plan.pipeline import STATUS_TOPIC

__all__ = ["DISCOVERY_VARIABLES", "ReadyNodes", "StatusWatch", "status_topic"]

#: the environment variables rcl reads for discovery when a context starts
DISCOVERY_VARIABLES = ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_STATIC_PEERS", "ROS_LOCALHOST_ONLY")
NODE_NAME = "_leapp_runner"  # a leading underscore hides it from `ros2 node list`
_SLICE_S = 0.1  # longest single spin: how soon close() is noticed


def status_topic(namespace: str | None) -> str:
    """``<namespace>/_leapp/status`` (``/_leapp/status`` for no namespace)."""
    return f"{(namespace or '').rstrip('/')}/{STATUS_TOPIC}"


class ReadyNodes:
    """``(pid, pipeline node)`` of every ``ready`` status record taken, less those whose
    node said ``stopping`` from the same process since (``in`` asks)."""

    def __init__(self) -> None:
        self._ready: set[tuple[int, str]] = set()

    def __contains__(self, key: object) -> bool:
        return key in self._ready

    def take(self, record: Mapping[str, Any]) -> int | None:
        """Note ``record``; the pid it came from (None: it names no pid or node)."""
        pid, node, state = record.get("pid"), record.get("node"), record.get("state")
        if not isinstance(pid, int) or not isinstance(node, str):
            return None
        if state == "ready":
            self._ready.add((pid, node))
        elif state == "stopping":
            self._ready.discard((pid, node))
        return pid


class StatusWatch:
    """Hands every status record published under ``namespaces`` to ``on_record``, from a
    thread of its own, until :meth:`close`.

    Args:
        namespaces: the namespaces whose ``_leapp/status`` topic to watch.
        env: the environment of the watched processes: its ``ROS_DOMAIN_ID`` and discovery
            settings (:data:`DISCOVERY_VARIABLES`) are this watch's too.
        on_record: called with each record (a dict) as it arrives; records that are not JSON
            objects are dropped.
    """

    def __init__(
        self,
        namespaces: Iterable[str | None],
        env: Mapping[str, str],
        on_record: Callable[[dict[str, Any]], None],
    ):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
        from rclpy.signals import SignalHandlerOptions
        from std_msgs.msg import String

        self._on_record = on_record
        self.context = Context()
        domain = env.get("ROS_DOMAIN_ID", "").strip()
        with _discovery_environment(env):  # rcl reads them when the context starts
            rclpy.init(
                context=self.context,
                domain_id=int(domain) if domain else None,
                signal_handler_options=SignalHandlerOptions.NO,
            )
        try:
            self.node = rclpy.create_node(
                NODE_NAME,
                context=self.context,
                enable_rosout=False,
                start_parameter_services=False,
            )
            profile = QoSProfile(  # what the nodes publish with, deep enough for bursts
                history=HistoryPolicy.KEEP_LAST,
                depth=100,
                reliability=ReliabilityPolicy.RELIABLE,
                durability=DurabilityPolicy.TRANSIENT_LOCAL,
            )
            for topic in sorted({status_topic(namespace) for namespace in namespaces}):
                self.node.create_subscription(String, topic, self._take, profile)
            self.executor = SingleThreadedExecutor(context=self.context)
            self.executor.add_node(self.node)
        except BaseException:
            self.context.try_shutdown()
            raise
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name="leapp status watch")
        self._thread.daemon = True
        self._thread.start()

    def close(self) -> None:
        """Stop the thread, destroy the node and shut the context down (safe to repeat)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        if self.context.ok():
            self.executor.shutdown()
            self.node.destroy_node()
        self.context.try_shutdown()

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        while not self._stop.is_set() and self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=_SLICE_S)
            except ExternalShutdownException:
                return

    def _take(self, message: Any) -> None:
        try:
            record = json.loads(message.data)
        except ValueError:
            return
        if isinstance(record, dict):
            self._on_record(record)


@contextlib.contextmanager
def _discovery_environment(env: Mapping[str, str]) -> Iterator[None]:
    """This process's environment with ``env``'s discovery settings, for the block only."""
    previous = {name: os.environ.get(name) for name in DISCOVERY_VARIABLES}
    for name in DISCOVERY_VARIABLES:
        if name in env:
            os.environ[name] = env[name]
        else:
            os.environ.pop(name, None)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
