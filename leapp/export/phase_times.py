"""Seconds per named phase of an export, for the reports of ``compile_graph`` and the bench."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


class PhaseTimes:
    """Seconds per named phase, summed when a phase runs more than once::

    timings = PhaseTimes()
    with timings("torch.onnx.export"):
        ...
    timings.seconds  # {"torch.onnx.export": 0.012}
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - began
            self.seconds[phase] = self.seconds.get(phase, 0.0) + elapsed

    def __str__(self) -> str:
        return ", ".join(f"{phase} {seconds:.3f} s" for phase, seconds in self.seconds.items())
