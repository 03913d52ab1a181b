"""Two "hosts" on one Linux machine for ROS tests of a graph spread over machines.

:class:`TwoHosts` makes two network namespaces joined by a veth pair and nothing else (no
route leaves the machine): host ``a`` is 10.213.0.1/30 and host ``b`` 10.213.0.2/30, each with
its loopback up. Commands run on a host through ``ip netns exec`` (:meth:`TwoHosts.on`), with
:func:`host_env`: discovery over the host's subnet (``ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET``,
which reaches only the other end of the veth), a domain id of the run's own, and Fast DDS
restricted to UDPv4 (``FASTDDS_BUILTIN_TRANSPORTS``) so that no traffic between the hosts can
take the shared-memory transport (both share /dev/shm). Making namespaces needs root and
``ip``; :meth:`TwoHosts.create` raises :class:`HostsUnavailableError` saying why otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence

__all__ = ["SUBNET", "HostsUnavailableError", "TwoHosts", "host_env"]

SUBNET = {"a": "10.213.0.1/30", "b": "10.213.0.2/30"}
# Variables that could widen discovery or bring shared memory back; never inherited.
_DROPPED = (
    "ROS_STATIC_PEERS",
    "ROS_LOCALHOST_ONLY",
    "FASTRTPS_DEFAULT_PROFILES_FILE",
    "FASTDDS_DEFAULT_PROFILES_FILE",
    "RMW_FASTRTPS_USE_QOS_FROM_XML",
)


class HostsUnavailableError(Exception):
    """The namespaces cannot be made here (not root, no ``ip``, not permitted)."""


def host_env(domain_id: int) -> dict[str, str]:
    """This process's environment for a ROS process on one of the hosts, in ``domain_id``."""
    env = {key: value for key, value in os.environ.items() if key not in _DROPPED}
    env.update(
        ROS_DOMAIN_ID=str(domain_id),
        ROS_AUTOMATIC_DISCOVERY_RANGE="SUBNET",
        FASTDDS_BUILTIN_TRANSPORTS="UDPv4",
        PYTHONUNBUFFERED="1",
        RCUTILS_COLORIZED_OUTPUT="0",
    )
    return env


class TwoHosts:
    """Namespaces ``leapp<tag>a`` and ``leapp<tag>b`` (``tag`` defaults to this process's id,
    so concurrent runs never share them) and the veth pair ``lp<tag>a`` / ``lp<tag>b``."""

    def __init__(self, tag: str | None = None):
        tag = tag or str(os.getpid())
        self.namespaces = {host: f"leapp{tag}{host}" for host in "ab"}
        self.links = {host: f"lp{tag}{host}" for host in "ab"}

    def create(self) -> None:
        """Make both namespaces and the link between them, up; on any failure remove what was
        made and raise :class:`HostsUnavailableError`."""
        if os.geteuid() != 0:
            raise HostsUnavailableError("network namespaces need root")
        if shutil.which("ip") is None:
            raise HostsUnavailableError("no 'ip' command (iproute2)")
        self.delete()  # a namespace of this name left by a killed run of the same pid
        a, b = self.namespaces["a"], self.namespaces["b"]
        steps = [["netns", "add", a], ["netns", "add", b]]
        steps.append(["link", "add", self.links["a"], "netns", a, "type", "veth", "peer",
                      "name", self.links["b"], "netns", b])  # fmt: skip
        for host in "ab":
            namespace, link = self.namespaces[host], self.links[host]
            steps += [
                ["-n", namespace, "addr", "add", SUBNET[host], "dev", link],
                ["-n", namespace, "link", "set", "lo", "up"],
                ["-n", namespace, "link", "set", link, "up"],
            ]
        for step in steps:
            try:
                _ip(step)
            except (OSError, subprocess.CalledProcessError) as e:
                self.delete()
                error = getattr(e, "stderr", "") or e
                raise HostsUnavailableError(f"'ip {' '.join(step)}' failed: {error}") from e

    def delete(self) -> None:
        """Remove both namespaces (the veth pair goes with them); no-op where absent."""
        for namespace in self.namespaces.values():
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)

    def on(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` as a command run on ``host`` (``a`` or ``b``)."""
        return ["ip", "netns", "exec", self.namespaces[host], *argv]

    def set_link(self, host: str, up: bool) -> None:
        """Bring ``host``'s end of the link up or down."""
        _ip(["-n", self.namespaces[host], "link", "set", self.links[host], "up" if up else "down"])

    def routes(self, host: str) -> list[str]:
        """``host``'s IPv4 routes, one destination each (``10.213.0.0/30``)."""
        found = json.loads(_ip(["-n", self.namespaces[host], "-j", "route"]).stdout or "[]")
        return [route["dst"] for route in found]


def _ip(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=True, timeout=10)
