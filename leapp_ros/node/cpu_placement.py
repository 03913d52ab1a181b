"""Where a pipeline node's process runs: :class:`CpuPlacement`.

A node asks for two opt-in CPU settings when it configures (parameters ``cpu_affinity`` and
``cpu_latency_us``, :mod:`leapp_ros.plan.settings`): pinning its process to some CPUs, which a
bad CPU list makes a startup error naming the node, and a CPU latency request
(:class:`~leapp_ros.plan.cpu_settings.CpuLatencyRequest`, held until the node cleans up or is
destroyed), which the machine may refuse: the node then runs without it and says why in one
warning. The status record reports both (null for none).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from leapp_ros.plan.cpu_settings import CpuLatencyRequest, CpuSettingsError, pin_process
from leapp_ros.plan.settings import StartupError

__all__ = ["CpuPlacement"]


class CpuPlacement:
    """The CPUs a node's process is pinned to and the CPU latency request it holds."""

    __slots__ = ("_latency", "affinity")

    def __init__(self) -> None:
        self.affinity: tuple[int, ...] | None = None
        self._latency: CpuLatencyRequest | None = None

    def pin(self, cpus: Iterable[int], node: str, logger: Any) -> None:
        """Pin the process to ``cpus``.

        Raises:
            StartupError: ``cpus`` is not a usable CPU list here (names ``node``).
        """
        try:
            self.affinity = pin_process(cpus)
        except CpuSettingsError as e:
            raise StartupError(f"node {node!r}: parameter cpu_affinity: {e}") from e
        logger.info(f"running on CPUs {list(self.affinity)}")

    def request_latency(self, microseconds: int, node: str, logger: Any) -> None:
        """Hold a CPU latency request of ``microseconds`` (< 0: none); one warning, and none
        held, where the machine refuses it."""
        if microseconds < 0:
            return
        try:
            self._latency = CpuLatencyRequest(microseconds)
        except CpuSettingsError as e:
            logger.warning(f"node {node!r}: cpu_latency_us is {microseconds}, but {e}")
            return
        logger.info(f"holding a CPU latency request of {microseconds} us")

    def release(self) -> None:
        """End the CPU latency request (the pinning stays with the process)."""
        if self._latency is not None:
            self._latency.release()
            self._latency = None

    def status(self) -> dict[str, Any]:
        """The status record's fields: the request held and the CPUs pinned to, or None."""
        return {
            "cpu_latency_us": self._latency.microseconds if self._latency else None,
            "cpu_affinity": list(self.affinity) if self.affinity else None,
        }
