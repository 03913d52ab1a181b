"""Waiting for processes to end, from a thread of its own: :class:`ProcessWatch`.

The stand-in (:mod:`leapp_ros.run.stand_in`) watches the processes its nodes run in; they are
not its children (the runner or ``ros2 launch`` started them), so it cannot wait for them the
usual way. On Linux a pidfd (``os.pidfd_open``) of each becomes readable the moment the
process ends, child or not; one thread waits on all of them (and a pipe that says the set
changed) and reports each ended process with how it ended (:func:`exit_of`, from
``/proc/<pid>/stat`` while the process waits to be reaped). Where there are no pidfds the
thread asks the kernel every 10 ms. The same thread keeps its owner's deadlines (``tick``): the
stand-in publishes its safe actions from it. No rclpy import.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["ProcessWatch", "exit_of"]

_POLL_S = 0.01  # without pidfds: how often the kernel is asked


class ProcessWatch:
    """A thread waiting for processes to end (a pidfd each) and for its owner's next deadline.

    Args:
        ended: called with ``(pid, how, orderly)`` for each watched process that ended
            (:func:`exit_of`).
        tick: called on every turn of the thread (after a process ended, a change of
            :meth:`want`, a deadline); returns the seconds until it wants to be called again
            (None: not before something happens).

    :meth:`want` says which processes to watch; :meth:`close` ends the thread.
    """

    def __init__(self, ended: Callable[[int, str, bool], None], tick: Callable[[], float | None]):
        self._ended, self._tick = ended, tick
        self._lock = threading.Lock()
        self._wanted: set[int] = set()
        self._watched: dict[int, int | None] = {}  # pid -> pidfd (None: polled)
        self._selector = selectors.DefaultSelector()
        self._pipe = os.pipe()
        os.set_blocking(self._pipe[0], False)
        self._selector.register(self._pipe[0], selectors.EVENT_READ, None)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leapp stand-in watch")
        self._thread.daemon = True
        self._thread.start()

    def want(self, pids: set[int]) -> None:
        """Watch exactly ``pids`` from now on."""
        with self._lock:
            self._wanted = set(pids)
        os.write(self._pipe[1], b"w")

    def close(self) -> None:
        """End the thread and close the pidfds (safe to repeat)."""
        if self._closed.is_set():
            return
        self._closed.set()
        os.write(self._pipe[1], b"c")
        if self._thread is not threading.current_thread():
            self._thread.join()
        for fd in self._watched.values():
            if fd is not None:
                os.close(fd)
        self._selector.close()
        os.close(self._pipe[0])
        os.close(self._pipe[1])

    def _run(self) -> None:
        while not self._closed.is_set():
            self._sync()
            wait = self._tick()
            if any(fd is None for fd in self._watched.values()):
                wait = _POLL_S if wait is None else min(wait, _POLL_S)
            for key, _ in self._selector.select(wait):
                if key.data is None:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._pipe[0], 4096)
                else:
                    self._gone(key.data)
            for pid in [p for p, fd in self._watched.items() if fd is None]:
                if not _alive(pid):
                    self._gone(pid)

    def _sync(self) -> None:
        with self._lock:
            wanted = set(self._wanted)
        for pid in set(self._watched) - wanted:
            fd = self._watched.pop(pid)
            if fd is not None:
                self._selector.unregister(fd)
                os.close(fd)
        for pid in wanted - set(self._watched):
            try:
                fd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
            except ProcessLookupError:
                self._watched[pid] = None
                self._gone(pid)
                continue
            except OSError:  # no pidfds here: ask the kernel every 10 ms
                fd = None
            self._watched[pid] = fd
            if fd is not None:
                self._selector.register(fd, selectors.EVENT_READ, pid)

    def _gone(self, pid: int) -> None:
        fd = self._watched.pop(pid, None)
        if fd is not None:
            self._selector.unregister(fd)
            os.close(fd)
        with self._lock:
            self._wanted.discard(pid)
        self._ended(pid, *exit_of(pid))


def exit_of(pid: int) -> tuple[str, bool]:
    """How process ``pid``, which ended, did (``was killed by SIGKILL``, ``exited with code
    1``) and whether that was an exit with code 0, read from ``/proc/<pid>/stat`` while it
    waits to be reaped; ``("ended", False)`` once it was."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "ended", False
    fields = text.rsplit(")", 1)[-1].split()
    if len(fields) < 50 or fields[0] != "Z":  # exit_code is the 52nd field (Linux >= 3.5)
        return "ended", False
    status = int(fields[-1])
    if status & 0x7F:
        number = status & 0x7F
        try:
            return f"was killed by {signal.Signals(number).name}", False
        except ValueError:
            return f"was killed by signal {number}", False
    code = (status >> 8) & 0xFF
    return f"exited with code {code}", code == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
