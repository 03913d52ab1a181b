"""Fast DDS shared-memory segments that a killed process left in /dev/shm, and their removal.

Every DDS participant of Fast DDS (the middleware of the ROS 2 wheels) maps a shared-memory
segment in /dev/shm and holds an exclusive ``flock`` on its lock file, the segment's name with
``_el`` appended, while it lives; a process that ends normally removes both. Fast DDS 3 (Kilted)
names the segment ``fastdds_<id>``, Fast DDS 2 (Jazzy) ``fastrtps_<id>``: both forms are
segments here, whichever middleware made them. A process killed with SIGKILL (the tests that
stop a node hard, restart it or kill a "host") cannot remove its segment, and Fast DDS never
removes it later: each is half a megabyte of memory on this machine until it reboots. A segment
whose lock file nobody holds belongs to no live process; that is the test ``fastdds shm clean``
makes (a tool the pip wheels do not ship).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from pathlib import Path

SHM = Path("/dev/shm")
# a participant's segment; not <prefix>_port<N> (the ports, shared by the participants)
_SEGMENT = re.compile(r"(?:fastdds|fastrtps)_[0-9a-f]+")
_LOCK_SUFFIX = "_el"


def segment_locks(folder: Path = SHM) -> dict[str, str]:
    """The lock files of Fast DDS segments in ``folder`` (ports' lock files left out), each
    with its segment's name: ``{"fastdds_<id>_el": "fastdds_<id>"}``, ``fastrtps_`` alike."""
    found = {}
    for lock in folder.glob(f"*{_LOCK_SUFFIX}"):
        segment = lock.name[: -len(_LOCK_SUFFIX)]
        if _SEGMENT.fullmatch(segment) is not None:
            found[lock.name] = segment
    return found


def mapped_segments(pid: int, folder: Path = SHM) -> set[str]:
    """The names of the Fast DDS segments in ``folder`` that process ``pid`` has mapped (its
    participants' own, from ``/proc/<pid>/maps``); empty when the process is gone."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return set()
    found = set()
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)  # address, perms, offset, device, inode[, path]
        path = Path(fields[5]) if len(fields) == 6 else None
        if path is not None and path.parent == folder and _SEGMENT.fullmatch(path.name):
            found.add(path.name)
    return found


def remove_stale_segments(since: float, folder: Path = SHM) -> list[str]:
    """Remove each Fast DDS segment in ``folder`` whose lock file was made at or after
    ``since`` (a ``time.time()``) and is held by no process, with its lock file; the names of
    the segments removed. Segments of live processes, of any age, are never touched: their lock
    is held."""
    removed = []
    for name, segment_name in segment_locks(folder).items():
        lock, segment = folder / name, folder / segment_name
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
            removed.append(segment_name)
        finally:
            os.close(descriptor)
    return removed
