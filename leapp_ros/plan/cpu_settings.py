"""CPU settings a pipeline process can take for lower latency: a CPU latency request and CPU
affinity. Both are Linux features, both are opt-in node parameters, and both end with the
process.

**CPU latency request** (``cpu_latency_us``, :class:`CpuLatencyRequest`). On a machine whose
CPUs are mostly idle between messages, every message that crosses from one process to another
has to wake a sleeping CPU, and the deeper the idle state the longer that takes (on a virtual
machine it is a round trip through the hypervisor). A process that writes a latency in
microseconds to ``/dev/cpu_dma_latency`` and keeps the file open tells the kernel's cpuidle
governor not to use idle states that take longer than that to leave; ``0`` keeps idle CPUs
polling. The request ends when the file is closed (also when the process dies), so it never
outlives the graph. This is the standard real-time Linux setting (cyclictest and tuned's
latency-performance profile hold the same request); the price is power: CPUs that would have
slept stay awake while the graph runs. The file is writable by root only on most systems; to
let another user make the request, add a udev rule such as ``KERNEL=="cpu_dma_latency",
GROUP="realtime", MODE="0660"`` and add the user to that group.

**CPU affinity** (``cpu_affinity``, :func:`pin_process`). A process that stays on one CPU
keeps its model's code and data in that CPU's caches between messages, and consecutive nodes
of a pipeline on different CPUs hand a message over without waiting for each other.
``leapp-ros run --pin-cpus`` gives each process one CPU, round robin in pipeline order.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path

from leapp.errors import LeappError

__all__ = [
    "DEVICE",
    "MAX_LATENCY_US",
    "CpuLatencyRequest",
    "CpuSettingsError",
    "current_limit",
    "pin_process",
    "usable_cpus",
]

DEVICE = Path("/dev/cpu_dma_latency")
MAX_LATENCY_US = 2**31 - 1  # the request is a signed 32-bit number of microseconds


class CpuSettingsError(LeappError):
    """A CPU setting could not be applied (no such file, no permission, bad value, no CPU)."""


class CpuLatencyRequest:
    """Hold "leave idle states within ``microseconds``" until :meth:`release` (or ``with``).

    Args:
        microseconds: the longest acceptable wake-up latency, 0 to ``MAX_LATENCY_US``.
        device: the PM QoS file (tests pass another path).

    Raises:
        CpuSettingsError: the value is out of range, or the file cannot be opened for writing;
            the message names the file and says how to get access.
    """

    def __init__(self, microseconds: int, device: str | os.PathLike[str] = DEVICE):
        self._fd: int | None = None
        if isinstance(microseconds, bool) or not isinstance(microseconds, int):
            raise CpuSettingsError(f"a CPU latency is whole microseconds, got {microseconds!r}")
        if not 0 <= microseconds <= MAX_LATENCY_US:
            raise CpuSettingsError(
                f"a CPU latency must be between 0 and {MAX_LATENCY_US} microseconds, "
                f"got {microseconds}"
            )
        self.microseconds = microseconds
        self.device = Path(device)
        try:
            self._fd = os.open(self.device, os.O_WRONLY | os.O_CLOEXEC)
        except OSError as e:
            raise CpuSettingsError(
                f"cannot request a CPU latency of {microseconds} us: {self.device}: "
                f"{e.strerror or e}. Writing it needs root, or a udev rule that gives a group "
                f'write access (KERNEL=="{self.device.name}", GROUP="realtime", MODE="0660"); '
                "without it the CPUs keep their default idle behaviour"
            ) from e
        try:
            os.write(self._fd, struct.pack("=i", microseconds))
        except OSError as e:
            self.release()
            raise CpuSettingsError(
                f"cannot request a CPU latency of {microseconds} us: writing {self.device} "
                f"failed: {e.strerror or e}"
            ) from e

    @property
    def held(self) -> bool:
        """Whether the request is still in force."""
        return self._fd is not None

    def release(self) -> None:
        """End the request (closing the file ends it); safe to call twice."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> CpuLatencyRequest:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __del__(self) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "held" if self.held else "released"
        return f"CpuLatencyRequest({self.microseconds} us, {self.device}, {state})"


def current_limit(device: str | os.PathLike[str] = DEVICE) -> int | None:
    """The latency limit now in force (the smallest request of all processes), in
    microseconds; None where the file cannot be read."""
    try:
        with open(device, "rb") as file:
            data = file.read(4)
    except OSError:
        return None
    if len(data) != 4:
        return None
    return struct.unpack("=i", data)[0]


def _affinity() -> tuple[int, ...]:
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


_STARTED_ON = _affinity()  # before this process pinned itself (this module pins nothing)


def usable_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on, in ascending order: those it was given when it
    started (before any :func:`pin_process`), all of them where the platform cannot tell."""
    return _STARTED_ON


def pin_process(cpus: Iterable[int]) -> tuple[int, ...]:
    """Run every thread of this process, and every thread it starts later, on ``cpus`` only.

    rclpy and the DDS middleware start their threads before a node reads its parameters, so
    each existing thread is pinned, not only the caller. Returns the CPUs, sorted.

    Raises:
        CpuSettingsError: ``cpus`` is empty, names a CPU this process may not use (the message
            lists those it may), or the platform has no CPU affinity.
    """
    wanted = tuple(sorted(set(cpus)))
    if not hasattr(os, "sched_setaffinity"):
        raise CpuSettingsError("CPU affinity is not supported on this platform")
    usable = usable_cpus()
    unusable = [cpu for cpu in wanted if cpu not in usable]
    if not wanted or unusable:
        raise CpuSettingsError(
            f"cannot pin to CPUs {list(wanted)}: "
            + (f"{unusable} are not available" if unusable else "no CPU given")
            + f"; this process may use CPUs {_ranges(usable)}"
        )
    for thread in _threads():
        try:
            os.sched_setaffinity(thread, wanted)
        except ProcessLookupError:
            continue  # the thread ended meanwhile
        except OSError as e:
            raise CpuSettingsError(f"cannot pin to CPUs {list(wanted)}: {e}") from e
    return wanted


def _threads() -> Sequence[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/task")]
    except OSError:
        return [0]  # no /proc: the calling thread only


def _ranges(cpus: Sequence[int]) -> str:
    """``0-3,6`` for CPUs 0, 1, 2, 3 and 6."""
    parts: list[str] = []
    for cpu in cpus:
        if parts and cpu == int(parts[-1].rsplit("-", 1)[-1]) + 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{cpu}"
        else:
            parts.append(str(cpu))
    return ",".join(parts)
