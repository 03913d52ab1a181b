"""Shared helpers for the leapp tests: trace a function as one node, export it, compare."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
import torch
from shm_support import remove_stale_segments

import leapp
from leapp import annotate
from leapp import session as session_module

FRESH_SAMPLES = 50


def export_module(module, examples, backend, directory, inputs, outputs, node="node"):
    """Export ``module`` (fx-traced, eval mode) as one node; returns (graph module, artifact)."""
    from leapp.export import export_node

    graph_module = torch.fx.symbolic_trace(module.eval())
    artifact = export_node(
        graph_module,
        examples,
        node=node,
        input_names=inputs,
        output_names=outputs,
        backend=backend,
        directory=directory,
    )
    return graph_module, artifact


@pytest.fixture(autouse=True)
def _leapp_logs_reach_caplog():
    """Our loggers propagate to the root logger, where caplog listens. Importing ``launch``
    (launch_testing's pytest plugin does, where the launch stack is installed) makes every
    logger created afterwards a LaunchLogger that does not propagate: within a test, loggers
    are plain again, and ours made before it propagate."""
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if name.split(".")[0] in ("leapp", "leapp_ros") and isinstance(logger, logging.Logger):
            logger.propagate = True
    logger_class = logging.getLoggerClass()
    logging.setLoggerClass(logging.Logger)
    yield
    logging.setLoggerClass(logger_class)


_PR_SET_CHILD_SUBREAPER = 36
_LEAKS = pytest.StashKey[list[str]]()
_STARTED = pytest.StashKey[float]()  # time.time() when this run began
_SEGMENTS = pytest.StashKey[list[str]]()  # Fast DDS segments of killed processes, removed


def pytest_configure(config):
    """Orphans of the processes a test starts (a node whose launcher died, a daemon) are
    re-parented to this pytest process instead of init, so no module can leave one behind
    unseen (Linux; elsewhere the check below sees direct children only).

    And SIGINT works in the processes the tests start, which many tests stop with it: a run
    started as a background job of a shell without job control inherits SIGINT ignored, and
    an ignored signal stays ignored across exec (``ros2 launch`` then never sees it)."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config.stash[_LEAKS] = []
    config.stash[_STARTED] = time.time()
    config.stash[_SEGMENTS] = []
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += map(int, (task / "children").read_text().split())
        except OSError:
            continue
    return found


def _alive_or_reaped(pid: int) -> bool:
    """Whether ``pid`` still runs; a zombie (exited, not waited for) is reaped here."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    if state == "Z":
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return False
    return True


@pytest.fixture(scope="module", autouse=True)
def _no_process_outlives_its_module(request):
    """A process a test module started and did not stop would live on in a ROS domain that
    is free again for the next tests (and take CPU from them): it is killed here, and named
    in the summary at the end of the run. Then the Fast DDS shared-memory segments of the
    processes killed since the run began (tests that stop a node with SIGKILL) are removed:
    nothing else ever would (test/shm_support.py)."""
    yield
    for pid in _children(os.getpid()):
        if not _alive_or_reaped(pid):
            continue
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if not command.strip():  # exiting already (killed by its test, its memory gone): reap
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            continue
        request.config.stash[_LEAKS].append(f"{request.node.nodeid}: {pid} {command[:200]}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    request.config.stash[_SEGMENTS] += remove_stale_segments(request.config.stash[_STARTED])


def pytest_terminal_summary(terminalreporter, config):
    for line in config.stash.get(_LEAKS, []):
        terminalreporter.write_line(f"process left running by {line}", yellow=True)
    if config.stash.get(_SEGMENTS, []):
        count = len(config.stash[_SEGMENTS])
        terminalreporter.write_line(
            f"removed {count} Fast DDS shared-memory segment(s) of processes killed by the tests"
        )


@pytest.fixture(autouse=True)
def _no_leftover_session():
    """Every test starts and ends without an active tracing session: one a test left open
    (after an expected error) is stopped, so what it patched is restored, then dropped."""
    session_module._active = None
    yield
    if session_module.active_session() is not None:
        with contextlib.suppress(leapp.LeappError):
            leapp.stop()
    session_module._active = None


def export_function(
    tmp_path,
    fn: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]],
    inputs: Mapping[str, torch.Tensor],
    backend: str | None,
    node: str = "node",
    name: str = "pipe",
):
    """Trace ``fn(**traced inputs)`` as node ``node`` and export it with ``backend``.
    ``inputs`` are tensors or NumPy arrays (copied first: tracing must not touch them)."""
    leapp.start(name, save_path=tmp_path)
    copies = {k: v.clone() if isinstance(v, torch.Tensor) else v.copy() for k, v in inputs.items()}
    traced = annotate.input_tensors(node, copies)
    traced = traced if isinstance(traced, tuple) else (traced,)
    result = fn(**dict(zip(inputs, traced, strict=True)))
    results = result if isinstance(result, tuple) else (result,)
    annotate.output_tensors(
        node, {f"out{i}": r for i, r in enumerate(results)}, export_with=backend
    )
    leapp.stop()
    return leapp.compile_graph()


def assert_matches_eager(
    compiled,
    fn: Callable,
    make_inputs: Callable[[], dict[str, torch.Tensor]],
    node: str = "node",
    samples: int = FRESH_SAMPLES,
    atol: float = 1e-5,
):
    """Run the exported artifact of ``node`` and eager ``fn`` on fresh inputs; they must agree."""
    from leapp.run.model import load_model

    model = load_model(compiled.spec, node)
    ports = [p.name for p in compiled.spec.model(node).inputs]
    for _ in range(samples):
        fresh = make_inputs()
        expected = fn(**{k: v.clone() for k, v in fresh.items()})
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = model.run([fresh[p].clone() for p in ports])
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=atol)
