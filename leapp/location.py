"""Where in the user's code something happened: the first stack frame outside leapp and torch."""

from __future__ import annotations

import os
import sys

import torch

_SKIPPED = (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
    os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
)


def user_location() -> str:
    """Return ``"file:line"`` of the innermost frame that belongs to the user's code."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_SKIPPED) and not filename.startswith("<frozen"):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown location>"
