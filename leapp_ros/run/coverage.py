"""Which pipeline nodes of dead processes the stand-in covers: :class:`Coverage`.

The stand-in (:mod:`leapp_ros.run.stand_in`) learns from the nodes' status records
(``_leapp/status``: ``node``, ``pid``, ``state``, ``lifecycle``) in which process each pipeline
node runs and whether it commands. When a process ends, each of its nodes whose last record
said ``"lifecycle": "active"`` without saying ``"state": "stopping"`` since died without its
orderly goodbye (a SIGKILL, a segfault, the OOM killer, an exception): it is *covered* from
then on, and its outputs' safe action goes out in its place. A node that said ``stopping``
(SIGINT, SIGTERM, an unload, a lifecycle shutdown) published its own safe action as its last
word; one that was not active commanded nothing: neither is covered. A covered node stays so
until a record from another process says it is active again (restarted and activated: it
commands from its next input set), however many processes die in between, or until the dead
process's own ``stopping`` record arrives after all (its goodbye was on its way when the
process ended). A process that exited with code 0 said goodbye too.  No rclpy, no
clock of its own: every method takes the time, so the rules are tested without ROS.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Cover", "Coverage"]


@dataclass(frozen=True)
class Cover:
    """A covered node: the process it died with (``pid``), when the stand-in saw it end
    (``since``, monotonic seconds) and how it ended, in words (``how``)."""

    node: str
    pid: int
    since: float
    how: str


@dataclass(frozen=True)
class _Last:
    pid: int
    state: str
    lifecycle: str


class Coverage:
    """The covered nodes among ``nodes`` (those running on this host; records of other nodes
    are ignored). Not thread-safe: its owner holds a lock."""

    def __init__(self, nodes: Iterable[str]):
        self._nodes = frozenset(nodes)
        self._last: dict[str, _Last] = {}  # node -> its last record
        self.covers: dict[str, Cover] = {}  # node -> since when it is covered

    def take(self, record: Mapping[str, Any]) -> list[str]:
        """Note a status record; the nodes whose cover it ends (back and active)."""
        node, pid = record.get("node"), record.get("pid")
        if node not in self._nodes or not isinstance(pid, int) or isinstance(pid, bool):
            return []
        last = _Last(pid, str(record.get("state", "")), str(record.get("lifecycle", "")))
        self._last[node] = last
        cover = self.covers.get(node)
        if cover is None:
            return []
        back = pid != cover.pid and _commanding(last)
        late_goodbye = pid == cover.pid and last.state == "stopping"
        if back or late_goodbye:
            del self.covers[node]
            return [node]
        return []

    def pids(self) -> dict[int, tuple[str, ...]]:
        """The processes to watch: each pid with the nodes whose last record came from it."""
        found: dict[int, list[str]] = {}
        for node, last in self._last.items():
            found.setdefault(last.pid, []).append(node)
        return {pid: tuple(sorted(nodes)) for pid, nodes in found.items()}

    def ended(
        self, pid: int, now: float, how: str = "ended", *, orderly: bool = False
    ) -> list[str]:
        """Process ``pid`` ended (``how``, in words; ``orderly``: with exit code 0, which a
        node process returns only after its goodbye); the nodes covered from now on."""
        covered = []
        for node, last in list(self._last.items()):
            if last.pid != pid:
                continue
            del self._last[node]  # a pid can come back as another process
            if not orderly and _commanding(last) and node not in self.covers:
                self.covers[node] = Cover(node, pid, now, how)
                covered.append(node)
        return sorted(covered)

    @property
    def nodes(self) -> list[str]:
        """The nodes it is for, sorted."""
        return sorted(self._nodes)

    def watching(self) -> dict[str, int]:
        """The pid of every node's last record."""
        return {node: last.pid for node, last in sorted(self._last.items())}


def _commanding(last: _Last) -> bool:
    return last.lifecycle == "active" and last.state != "stopping"
