"""What a failing graph test reports: the errors it raises and the graph's last output lines."""

from __future__ import annotations

import collections
import io
from collections.abc import Mapping
from typing import Any, TextIO

__all__ = [
    "OUTPUT_LINES",
    "GraphAssertionError",
    "OutputLines",
    "StepTimeoutError",
    "output_tail",
    "step_timeout",
]

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


def output_tail(lines: OutputLines, count: int = 30) -> str:
    """The last ``count`` lines the graph wrote, indented under a heading ('' when none)."""
    tail = "".join(f"\n    {line}" for line in list(lines.lines)[-count:])
    return f"\n  the nodes' last output lines:{tail}" if tail else ""


def step_timeout(
    outputs: Mapping[str, tuple[str, Any, list[Any]]],
    awaited: list[str],
    before: Mapping[str, int],
    timeout_s: float,
) -> StepTimeoutError:
    """The error of a step whose ``awaited`` outputs (keys of ``outputs``: ``(topic, reader,
    inbox)``) got no message beyond the ``before`` counts within ``timeout_s``."""
    new = {key: len(inbox) - before[key] for key, (_, _, inbox) in outputs.items()}
    missing = tuple(outputs[key][0] for key in awaited if new[key] == 0)
    received = {outputs[key][0]: count for key, count in new.items() if count}
    got = ", ".join(f"{topic} ({count})" for topic, count in received.items()) or "nothing"
    message = f"no message on {', '.join(missing)} within {float(timeout_s)} s; received: {got}"
    return StepTimeoutError(message, missing, received)
