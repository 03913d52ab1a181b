"""``leapp-ros record`` beside a graph under test: start a recorder process, wait until it
subscribed to the graph's topics and the graph matched it, and the installed type hashes that a
bag's metadata must carry."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from leapp_ros.testing import GraphUnderTest, ros_env
from support.ros import REPO

__all__ = ["installed_type_hash", "recorders", "start_recorder", "wait_for_recorders"]


def start_recorder(graph: GraphUnderTest, export: Path, *options: str) -> subprocess.Popen:
    """``leapp-ros record EXPORT OPTIONS`` in the graph's domain (output piped, text)."""
    command = [sys.executable, "-m", "leapp_ros.tools.cli", "record", str(export), *options]
    return subprocess.Popen(
        command,
        env=ros_env(graph.domain_id),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
    )


def recorders(graph: GraphUnderTest, topic: str) -> int:
    """How many leapp recorders subscribe to ``topic``."""
    infos = graph.probe.node.get_subscriptions_info_by_topic(topic)
    return sum(info.node_name.startswith("leapp_recorder") for info in infos)


def wait_for_recorders(
    graph: GraphUnderTest, counts: dict[str, int], processes: list, timeout_s=30.0
) -> None:
    """Until ``counts[topic]`` recorders subscribe to each topic (failing at once, with its
    output, when a recorder process ended)."""
    deadline = time.monotonic() + timeout_s
    while True:
        waiting = [topic for topic, count in counts.items() if recorders(graph, topic) < count]
        if not waiting:
            break
        for process in processes:
            assert process.poll() is None, f"a recorder ended: {process.communicate()[0]}"
        assert time.monotonic() < deadline, f"the recorders never subscribed to {waiting}"
        graph.spin(0.05)
    # and the graph's publishers matched the recorders too: every endpoint the probe discovered
    # on a topic, the recorders' included, is matched in the nodes' status records
    while gaps := graph.probe.connection_gaps(graph.plan.namespace):
        assert time.monotonic() < deadline, f"the graph never matched the recorders: {gaps}"
        graph.spin(0.05)


def installed_type_hash(message_type: str) -> str:
    """The RIHS01 hash of ``message_type`` in the installed ROS 2 package's type description
    (what rosbag2 and DDS compare a bag's types with)."""
    from ament_index_python.packages import get_package_share_directory

    package, _, name = message_type.split("/")
    description = Path(get_package_share_directory(package)) / "msg" / f"{name}.json"
    hashes = json.loads(description.read_text(encoding="utf-8"))["type_hashes"]
    return next(h["hash_string"] for h in hashes if h["type_name"] == message_type)
