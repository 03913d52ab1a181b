"""What a pipeline node says about trouble on its data path: at most one warning per kind and
period (:class:`RateLimitedLog`), each on one line (:func:`one_line`).

A node that drops a malformed message a thousand times a second must not log a thousand lines
a second: the first of each kind (a topic, model errors, NaN inputs or outputs) is logged, the
next ones within :data:`WARNING_PERIOD_S` are counted, and the next line logged says how many
were not shown.
"""

from __future__ import annotations

import math
import time
from typing import Any

__all__ = ["WARNING_PERIOD_S", "RateLimitedLog", "one_line"]

WARNING_PERIOD_S = 1.0


class RateLimitedLog:
    """Warnings to ``logger`` (an rclpy logger), at most one per key and ``period_s``."""

    def __init__(self, logger: Any, period_s: float = WARNING_PERIOD_S):
        self._logger = logger
        self._period_s = period_s
        self._last: dict[str, tuple[float, int]] = {}  # key: (logged at, suppressed since)

    def warning(self, key: str, text: str) -> None:
        """Log ``text`` unless ``key`` was logged less than the period ago."""
        now = time.monotonic()
        last, suppressed = self._last.get(key, (-math.inf, 0))
        if now - last < self._period_s:
            self._last[key] = (last, suppressed + 1)
            return
        if suppressed:
            text += f" ({suppressed} similar message(s) not shown)"
        self._last[key] = (now, 0)
        self._logger.warning(text)


def one_line(error: Exception) -> str:
    """One line about ``error`` (TorchScript puts the actual error on the last line)."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    if len(lines) > 1:
        return lines[-1].strip()
    return f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")
