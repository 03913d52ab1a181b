"""A deterministic bound on the work a call does: Python function calls counted with
``sys.setprofile``, and the peak of memory allocated (``tracemalloc``).

Tests bound work this way instead of with a clock: the counts are the same on a loaded machine
as on an idle one, so a test fails only when the code does more work, never when CI is busy.
"""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["Work", "measured"]


@dataclass
class Work:
    """What a block did: Python function ``calls`` and ``peak_bytes`` allocated at most."""

    calls: int = 0
    peak_bytes: int = 0


@contextmanager
def measured() -> Iterator[Work]:
    """Count the Python calls and the allocation peak of the ``with`` block (this thread)."""
    work = Work()

    def count(frame, event, arg):
        if event == "call":
            work.calls += 1

    tracemalloc.start()
    previous = sys.getprofile()
    sys.setprofile(count)
    try:
        yield work
    finally:
        sys.setprofile(previous)
        _, work.peak_bytes = tracemalloc.get_traced_memory()
        tracemalloc.stop()
