"""Traced exports and the leapp-ros command line run in-process by tests, and what tests
read from its report."""

from __future__ import annotations

from pathlib import Path

import torch

import leapp
from leapp import session as session_module
from leapp_ros.tools.cli import main


def trace(save_path: Path, name: str, ticks: int, run) -> Path:
    """Run ``run()`` ``ticks`` times in a session ``name``; the export folder."""
    session_module._active = None
    leapp.start(name, save_path=save_path)
    with torch.no_grad():
        for _ in range(ticks):
            run()
    leapp.stop()
    return leapp.compile_graph().path.parent


def verify(capsys, export: Path, *options: str) -> tuple[int, str, str]:
    code = main(["verify", str(export), *options])
    out, err = capsys.readouterr()
    return code, out, err


def rows(out: str) -> dict[str, list[str]]:
    """The report's table rows: topic -> [samples, largest difference, result]."""
    found = {}
    for line in out.splitlines():
        cells = line.split()
        if len(cells) == 4 and cells[0].startswith("/"):
            found[cells[0]] = cells[1:]
    return found
