"""Pass on what child processes write, one line at a time, each with its process's label.

:class:`OutputRelay` watches the stdout and stderr pipes of the processes
:class:`~leapp_ros.run.runner.RunningGraph` starts: every complete line goes to this process's
stdout or stderr as ``[label] line`` and to the owner's ``on_line`` callback (which keeps the
last stderr lines for error reports). Pipes are read
without blocking, from the one thread that calls :meth:`pump`; a line longer than
``MAX_LINE`` bytes without a newline is passed on in pieces, and a last line without a newline
when the pipe ends.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable
from typing import IO, Any, TextIO

__all__ = ["MAX_LINE", "OutputRelay"]

MAX_LINE = 1 << 16

LineCallback = Callable[[Any, str, bool], None]  # (owner, text, is_stderr)


class OutputRelay:
    """Relays the pipes of processes registered with :meth:`watch`.

    Args:
        on_line: called with ``(owner, text, is_stderr)`` for every line, after it was written.
        stdout, stderr: where lines go (default: ``sys.stdout`` / ``sys.stderr`` at the time).
    """

    def __init__(
        self,
        on_line: LineCallback,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ):
        self._on_line = on_line
        self._streams = (stdout, stderr)
        self._selector = selectors.DefaultSelector()
        self._partial: dict[int, bytes] = {}  # fd -> bytes after the last newline

    def watch(self, owner: Any, label: str, popen: subprocess.Popen[bytes]) -> None:
        """Relay ``popen``'s stdout and stderr pipes as ``[label] ...`` lines of ``owner``."""
        for pipe, is_stderr in ((popen.stdout, False), (popen.stderr, True)):
            assert pipe is not None, "start the process with stdout and stderr piped"
            os.set_blocking(pipe.fileno(), False)
            self._selector.register(pipe, selectors.EVENT_READ, (owner, label, is_stderr))

    def pump(self, timeout_s: float) -> None:
        """Pass on what the pipes hold, waiting up to ``timeout_s`` for something to arrive."""
        if not self._selector.get_map():
            time.sleep(timeout_s)
            return
        for key, _ in self._selector.select(timeout_s):
            self._read(key.fileobj, *key.data)  # type: ignore[arg-type]

    def drain(self, owner: Any) -> None:
        """Pass on what ``owner``'s pipes hold now, without waiting."""
        for key in list(self._selector.get_map().values()):
            if key.data[0] is owner:
                self._read(key.fileobj, *key.data)  # type: ignore[arg-type]

    def close(self) -> None:
        self._selector.close()

    def _read(self, pipe: IO[bytes], owner: Any, label: str, is_stderr: bool) -> None:
        """Read what ``pipe`` holds now; at its end, unregister and close it."""
        fd = pipe.fileno()
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return
            if not data:
                rest = self._partial.pop(fd, b"")
                if rest:
                    self._emit(fd, rest + b"\n", owner, label, is_stderr)
                self._selector.unregister(pipe)
                pipe.close()
                return
            self._emit(fd, self._partial.pop(fd, b"") + data, owner, label, is_stderr)

    def _emit(self, fd: int, data: bytes, owner: Any, label: str, is_stderr: bool) -> None:
        *lines, rest = data.split(b"\n")
        if len(rest) > MAX_LINE:
            lines.append(rest)
        elif rest:
            self._partial[fd] = rest
        stream = self._streams[1] or sys.stderr if is_stderr else self._streams[0] or sys.stdout
        for raw in lines:
            text = raw.decode("utf-8", "replace").rstrip("\r")
            with contextlib.suppress(OSError, ValueError):
                stream.write(f"[{label}] {text}\n")
                stream.flush()
            self._on_line(owner, text, is_stderr)
