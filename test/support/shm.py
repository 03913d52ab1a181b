"""Fast DDS shared-memory segments that a killed process left in /dev/shm, and their removal.

Every DDS participant of Fast DDS (the middleware of the ROS 2 wheels) maps a shared-memory
segment, ``/dev/shm/fastdds_<id>``, and holds an exclusive ``flock`` on its lock file
``fastdds_<id>_el`` while it lives; a process that ends normally removes both. A process
killed with SIGKILL (the tests that stop a node hard, restart it or kill a "host") cannot,
and Fast DDS never removes them later: each is half a megabyte of memory on this machine until
it reboots. A segment whose lock file nobody holds belongs to no live process; that is the test
``fastdds shm clean`` makes (a tool the pip wheels do not ship).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from pathlib import Path

SHM = Path("/dev/shm")
_SEGMENT_LOCK = re.compile(r"fastdds_([0-9a-f]+)_el")  # not fastdds_port<N>_el (ports)


def segment_locks(folder: Path = SHM) -> dict[str, str]:
    """The lock files of Fast DDS segments in ``folder`` (ports' lock files left out), each
    with its segment's id: ``{"fastdds_<id>_el": "<id>"}``."""
    found = {}
    for lock in folder.glob("fastdds_*_el"):
        match = _SEGMENT_LOCK.fullmatch(lock.name)
        if match is not None:
            found[lock.name] = match.group(1)
    return found


def remove_stale_segments(since: float, folder: Path = SHM) -> list[str]:
    """Remove each Fast DDS segment in ``folder`` whose lock file was made at or after
    ``since`` (a ``time.time()``) and is held by no process, with its lock file; the names
    removed. Segments of live processes, of any age, are never touched: their lock is held."""
    removed = []
    for name, segment_id in segment_locks(folder).items():
        lock, segment = folder / name, folder / f"fastdds_{segment_id}"
        # Fast DDS locks the file before it makes the segment: a lock file without its segment
        # may be a process starting, which has not taken the lock yet
        if not segment.exists():
            continue
        try:
            if lock.stat().st_mtime < since:
                continue
            descriptor = os.open(lock, os.O_RDONLY)
        except OSError:  # removed meanwhile by its owner
            continue
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its process is alive
            os.close(descriptor)
            continue
        try:  # unlinked while the lock is held here: no process can take it meanwhile
            with contextlib.suppress(FileNotFoundError):
                segment.unlink()
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
            removed.append(segment_id)
        finally:
            os.close(descriptor)
    return removed
