"""A CPU latency request (Linux PM QoS) held for as long as a pipeline process runs.

On a machine whose CPUs are mostly idle between messages, every message that crosses from one
process to another has to wake a sleeping CPU, and the deeper the idle state the longer that
takes (on a virtual machine it is a round trip through the hypervisor). A process that writes a
latency in microseconds to ``/dev/cpu_dma_latency`` and keeps the file open tells the kernel's
cpuidle governor not to use idle states that take longer than that to leave; ``0`` keeps idle
CPUs polling. The request ends when the file is closed (also when the process dies), so it
never outlives the graph. This is the standard real-time Linux setting (cyclictest and tuned's
latency-performance profile hold the same request); the price is power: CPUs that would have
slept stay awake while the graph runs.

The file is writable by root only on most systems. To let another user make the request, add
a udev rule such as ``KERNEL=="cpu_dma_latency", GROUP="realtime", MODE="0660"`` and add the
user to that group.

Pipeline nodes hold a request when their ``cpu_latency_us`` parameter is >= 0
(``leapp-ros run --cpu-latency-us 0``); see :class:`CpuLatencyRequest`.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from leapp.errors import LeappError

__all__ = ["DEVICE", "MAX_LATENCY_US", "CpuLatencyError", "CpuLatencyRequest", "current_limit"]

DEVICE = Path("/dev/cpu_dma_latency")
MAX_LATENCY_US = 2**31 - 1  # the request is a signed 32-bit number of microseconds


class CpuLatencyError(LeappError):
    """A CPU latency request could not be made (no such file, no permission, bad value)."""


class CpuLatencyRequest:
    """Hold "leave idle states within ``microseconds``" until :meth:`release` (or ``with``).

    Args:
        microseconds: the longest acceptable wake-up latency, 0 to ``MAX_LATENCY_US``.
        device: the PM QoS file (tests pass another path).

    Raises:
        CpuLatencyError: the value is out of range, or the file cannot be opened for writing;
            the message names the file and says how to get access.
    """

    def __init__(self, microseconds: int, device: str | os.PathLike[str] = DEVICE):
        self._fd: int | None = None
        if isinstance(microseconds, bool) or not isinstance(microseconds, int):
            raise CpuLatencyError(f"a CPU latency is whole microseconds, got {microseconds!r}")
        if not 0 <= microseconds <= MAX_LATENCY_US:
            raise CpuLatencyError(
                f"a CPU latency must be between 0 and {MAX_LATENCY_US} microseconds, "
                f"got {microseconds}"
            )
        self.microseconds = microseconds
        self.device = Path(device)
        try:
            self._fd = os.open(self.device, os.O_WRONLY | os.O_CLOEXEC)
        except OSError as e:
            raise CpuLatencyError(
                f"cannot request a CPU latency of {microseconds} us: {self.device}: "
                f"{e.strerror or e}. Writing it needs root, or a udev rule that gives a group "
                f'write access (KERNEL=="{self.device.name}", GROUP="realtime", MODE="0660"); '
                "without it the CPUs keep their default idle behaviour"
            ) from e
        try:
            os.write(self._fd, struct.pack("=i", microseconds))
        except OSError as e:
            self.release()
            raise CpuLatencyError(
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
