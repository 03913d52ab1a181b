"""What a failing graph test reports: the errors it raises and the graph's last output lines."""

from __future__ import annotations

import collections
import io
from collections.abc import Mapping
from typing import TextIO

__all__ = ["OUTPUT_LINES", "GraphAssertionError", "OutputLines", "StepTimeoutError"]

OUTPUT_LINES = 400


class GraphAssertionError(AssertionError):
    """The graph under test misbehaved: it did not start, a node died, the ROS graph differs
    from the plan, or a process did not stop cleanly. The message says what and where."""


class StepTimeoutError(GraphAssertionError):
    """Outputs got no message in time. ``missing`` names the silent topics, ``received`` the
    topics that published during the step (absolute names) with their message counts."""

    def __init__(self, message: str, missing: tuple[str, ...], received: Mapping[str, int]):
        super().__init__(message)
        self.missing = missing
        self.received = dict(received)


class OutputLines(io.TextIOBase):
    """The last lines the graph's processes wrote, optionally passed on to a stream."""

    def __init__(self, forward: TextIO | None):
        self.lines: collections.deque[str] = collections.deque(maxlen=OUTPUT_LINES)
        self._forward = forward

    def write(self, text: str) -> int:
        self.lines.extend(text.splitlines())
        if self._forward is not None:
            self._forward.write(text)
        return len(text)
