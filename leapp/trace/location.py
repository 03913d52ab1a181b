"""Where in the user's code something happened: the first frame outside leapp, torch, numpy."""

from __future__ import annotations

import os
import sys

import numpy
import torch

_SKIPPED = tuple(
    os.path.dirname(os.path.abspath(module.__file__)) + os.sep
    for module in (sys.modules[__name__.partition(".")[0]], torch, numpy)  # all of leapp
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
