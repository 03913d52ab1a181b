"""The node runs of one session, and the rule for the names it gives pipelines, nodes and ports.

:class:`SessionRuns` is what a :class:`~leapp.trace.pipeline.recording.Recording` and a
:class:`~leapp.trace.pipeline.dry_run.DryRecording` share: the pipeline's name and folder, the
runs still open (one per node at a time), the closed runs of each node in order, the order in
which nodes first completed, and the refusals of an annotation for a node with no open run or
of ``leapp.stop()`` with a node still open. :func:`check_name` is the name rule.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from leapp.errors import GraphError, SessionError, TraceError
from leapp.trace.location import user_location

__all__ = ["SessionRuns", "check_name"]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class SessionRuns:
    """The runs of pipeline ``name``'s nodes (each made by ``new_run(node, index, where)``)."""

    def __init__(
        self,
        name: str,
        save_path: str | os.PathLike,
        new_run: Callable[[str, int, str], Any],
        *,
        verbose: bool = False,
        max_cached_io: int | None = None,
        non_traced: Iterable[str] = (),
    ):
        check_name("pipeline", name)
        self.name = name
        self.save_path = Path(save_path)
        self.verbose = verbose  # log every recorded node run at INFO
        self.max_cached_io = max_cached_io  # runs per node whose examples are kept (None: all)
        self.non_traced = frozenset(non_traced)  # nodes recorded but exported with no artifact
        self.active = True
        self.runs: dict[str, list[Any]] = {}
        self.order: list[str] = []  # nodes in the order their first run closed
        self.open: dict[str, Any] = {}
        self.running_method: str | None = None  # the node whose decorated call is running
        self._new_run = new_run

    def cached_runs(self, node: str) -> list[Any]:
        """The runs of ``node`` whose input/output examples are kept (the first
        ``max_cached_io``): they go to the examples file and are validated."""
        return self.runs[node][: self.max_cached_io]

    def open_node(self, node: str) -> Any:
        """Open a new run of ``node`` (no inputs yet); refused while one is open."""
        if node in self.open:
            raise TraceError(
                f"node {node!r} at {user_location()} is opened again while its run opened at "
                f"{self.open[node].location} is still open; close it first, or give the two "
                "nodes different names."
            )
        check_name("node", node)
        run = self._new_run(node, len(self.runs.setdefault(node, [])), user_location())
        self.open[node] = run
        return run

    def _open_run(self, api: str, node: str) -> Any:
        run = self.open.get(node)
        if run is None:
            raise SessionError(
                f"annotate.{api}({node!r}, ...) at {user_location()}: node {node!r} has no open "
                f"run. Call annotate.input_tensors({node!r}, {{...}}) first."
            )
        return run

    def _closed(self, node: str, run: Any) -> bool:
        """File the closed ``run``; whether it is the node's first."""
        del self.open[node]
        runs = self.runs[node]
        first = not runs
        if first:
            self.order.append(node)
        runs.append(run)
        return first

    def _unclosed(self) -> SessionError | None:
        """The error for ``leapp.stop()`` with runs still open (None when all closed)."""
        where = ", ".join(f"{r.node!r} (opened at {r.location})" for r in self.open.values())
        if not where:
            return None
        return SessionError(
            f"leapp.stop(): node(s) {where} never closed. Call "
            "annotate.output_tensors(<node>, {...}) for every node you open."
        )


def check_name(what: str, name: Any) -> None:
    """Refuse a pipeline, node or port name that cannot be a file, ONNX or ROS name."""
    if not isinstance(name, str) or not _NAME.match(name):
        suggestion = re.sub(r"[^A-Za-z0-9_]", "_", str(name)).strip("_") or "name"
        if not suggestion[0].isalpha():
            suggestion = f"n_{suggestion}"
        raise GraphError(
            f"{what} name {name!r} is not valid: use letters, digits and underscores, starting "
            f"with a letter (e.g. {suggestion!r}); names become file names, ONNX port names and "
            "ROS topic names."
        )
