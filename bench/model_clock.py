"""The CPU time of the model calls, measured inside each process of a benchmarked graph.

Every process of a graph (leapp's and the hand-written one) times exactly its model calls
with its calling thread's CPU clock (``time.thread_time_ns``: ONNX Runtime with one intra-op
thread and TorchScript with ``torch.set_num_threads(1)`` compute in the calling thread) and
adds them up in a counter file of its own: two int64, the nanoseconds and the calls, in the
folder named by :data:`FOLDER` (a file per process id), written in place after each call.
The bench reads the files before and after a window (:func:`model_cpu`): what the graph's
processes spent in their model calls over it, from the same runs as their total CPU time, so
the cost outside the model calls is a difference of two figures of one window rather than of
two measurements made apart.

- the hand-written nodes wrap their ``session.run`` and module call in :func:`timed`;
- leapp's processes are started as ``python -m model_clock MODULE ARGS...``
  (:func:`timed_processes`), which wraps the ``call`` of every model that
  :func:`leapp_ros.node.model.load_node_model` loads, then runs ``MODULE`` as ``python -m``
  would: leapp's code is otherwise the one deployed.
"""

from __future__ import annotations

import ctypes
import dataclasses
import mmap
import os
import runpy
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

FOLDER = "LEAPP_BENCH_MODEL_CLOCK"  # environment variable: where the counter files go


class Counter:
    """This process's counter file, mapped as two C int64 (None where :data:`FOLDER` is not
    set): an item assignment costs tens of nanoseconds, where a NumPy memmap's costs
    microseconds."""

    _cells: Any = None

    @classmethod
    def cells(cls) -> Any:
        if cls._cells is None and os.environ.get(FOLDER):
            path = Path(os.environ[FOLDER]) / str(os.getpid())
            path.write_bytes(bytes(16))
            with path.open("r+b") as file:
                mapped = mmap.mmap(file.fileno(), 16)
            cls._cells = (ctypes.c_int64 * 2).from_buffer(mapped)
        return cls._cells


def timed(call: Callable) -> Callable:
    """``call`` with its calling thread's CPU time added to this process's counter."""
    cells = Counter.cells()
    if cells is None:
        return call
    clock = time.thread_time_ns

    def timed_call(*args: Any, **kwargs: Any) -> Any:
        began = clock()
        try:
            return call(*args, **kwargs)
        finally:
            cells[0] += clock() - began
            cells[1] += 1

    return timed_call


class TimedModel:
    """A loaded node model whose ``call`` is :func:`timed` (everything else its own)."""

    def __init__(self, model: Any):
        self._model = model
        self.call = timed(model.call)
        self.reads_only = getattr(model, "reads_only", False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def model_cpu(pids: Iterable[int], folder: Path) -> tuple[float, int]:
    """The seconds of model calls and the calls the processes ``pids`` counted so far."""
    import numpy as np

    seconds, calls = 0.0, 0
    for pid in pids:
        path = folder / str(pid)
        if path.exists() and path.stat().st_size >= 16:
            nanoseconds, count = np.fromfile(path, np.int64, 2)
            seconds, calls = seconds + nanoseconds / 1e9, calls + int(count)
    return seconds, calls


def timed_processes(processes: Iterable[Any]) -> tuple[Any, ...]:
    """leapp's process plans, each started through this module (see the module
    documentation)."""
    return tuple(
        dataclasses.replace(p, module=Path(__file__).stem, arguments=(p.module, *p.arguments))
        for p in processes
    )


def main() -> None:
    """``python -m model_clock MODULE ARGS...``: MODULE run as ``__main__`` with ARGS, its
    node models' calls timed."""
    import leapp_ros.node.model as node_model

    load = node_model.load_node_model

    def load_timed(spec: Any, node: str) -> Any:
        return TimedModel(load(spec, node))

    node_model.load_node_model = load_timed
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
