"""The one list of reasons a test may skip when CI runs the suite (``CI=true``).

A developer's machine may lack parts of the stack (no ROS 2 launch stack, no network
namespaces, no NVIDIA leapp venv) and the tests that need them skip, saying what to install.
CI has all of them, so there a skip for any reason not listed here is a failure
(``test/conftest.py``): a test that silently stopped running is a defect, not a pass.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

__all__ = ["ALLOWED", "allowed_reason", "strict"]


@dataclass(frozen=True)
class Allowed:
    """A skip reason CI accepts: ``pattern`` is searched in the skip message; ``lanes``
    (values of ``LEAPP_TEST_LANE``) limits it to those CI lanes, empty for every lane."""

    pattern: str
    why: str
    lanes: tuple[str, ...] = ()


ALLOWED = (
    Allowed(r"\bCUDA\b", "CI machines have no CUDA device; device checks run where one is lent"),
    Allowed(
        r"composition_interfaces is installed but cannot serialize a request",
        "the launch stack's composition_interfaces (../shared/ros2-launch) is a build for "
        "Kilted's libraries; under Jazzy's wheels its first request kills the process "
        "(support/composition.py)",
        lanes=("jazzy",),
    ),
)


def strict() -> bool:
    """Whether skips outside :data:`ALLOWED` fail the run: under ``CI=true`` (or 1, yes)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def allowed_reason(message: str) -> Allowed | None:
    """The entry of :data:`ALLOWED` that lets a skip with ``message`` pass in this lane."""
    lane = os.environ.get("LEAPP_TEST_LANE", "")
    for entry in ALLOWED:
        if (not entry.lanes or lane in entry.lanes) and re.search(entry.pattern, message):
            return entry
    return None
