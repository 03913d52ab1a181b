"""What every test module gets: no tracing session left open, leapp's logs in caplog, no
process outliving its module, and the seed export (``seed``). Helpers live in ``support/``."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import time
from pathlib import Path

import pytest
from hypothesis import settings
from support import skips
from support.shm import remove_stale_segments

import leapp
from leapp import session as session_module

# MuJoCo picks its OpenGL backend when it is first imported (by a test module, after this):
# EGL renders the simulator's cameras headless (Mesa's libEGL, or a GPU driver's).
os.environ.setdefault("MUJOCO_GL", "egl")

# Hypothesis profiles (HYPOTHESIS_PROFILE picks one): "ci", the default under CI=true, draws the
# same 80 examples per test on every run (derandomized), so CI fails only when the code
# changed; "dev", the default elsewhere, draws 80 new ones each run; "nightly" draws 5000 new
# ones (a nightly job, or before a release: HYPOTHESIS_PROFILE=nightly bash scripts/test.sh -k
# fuzz). No profile has a deadline: how long an example takes is a benchmark's question
# (bench/fuzz.py), not a test's.
settings.register_profile("ci", max_examples=80, derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=80, deadline=None)
settings.register_profile("nightly", max_examples=5000, deadline=None)
# "fuzz": bench/fuzz.py's batches, LEAPP_FUZZ_EXAMPLES examples each, every batch seeded anew
# (--hypothesis-seed) and kept out of the example database.
settings.register_profile(
    "fuzz",
    max_examples=int(os.environ.get("LEAPP_FUZZ_EXAMPLES", "500")),
    deadline=None,
    database=None,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if skips.strict() else "dev"))


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
    nothing else ever would (test/support/shm.py)."""
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


@pytest.fixture(scope="session", autouse=True)
def _examples_fit_once_per_run(tmp_path_factory):
    """An example whose fit takes long (examples/perception/train.py) keeps its weights in
    ``LEAPP_FIT_CACHE``: a folder of this run's, so the tests and the pages that fit the same
    example (in this process or in the commands they start) fit it once per run, and every run
    fits it again. Where the variable is set already, its folder is kept: CI (.ci/run) sets a
    fresh one that its lanes share."""
    if os.environ.get("LEAPP_FIT_CACHE"):
        yield
        return
    os.environ["LEAPP_FIT_CACHE"] = str(tmp_path_factory.mktemp("fitted"))
    yield
    os.environ.pop("LEAPP_FIT_CACHE", None)


@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    """The seed pipeline (examples/torch_pipeline.py, weights seeded) exported into a folder of
    this module's own: ``path`` (the export folder), ``module`` and ``policy`` for the eager
    PyTorch reference (``support.ros.eager_seed``)."""
    from support.ros import export_seed

    return export_seed(tmp_path_factory.mktemp("seed"))


def _fail_a_forbidden_skip(report) -> None:
    """Under CI=true a skip for a reason support/skips.py does not list becomes a failure."""
    if not report.skipped or hasattr(report, "wasxfail") or not skips.strict():
        return
    longrepr = report.longrepr
    message = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    if skips.allowed_reason(message) is None:
        report.outcome = "failed"
        report.longrepr = (
            f"skipped under CI=true: {message}\nCI has the whole stack, so this test must run "
            "here; a skip reason CI accepts is listed in test/support/skips.py"
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_a_forbidden_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_a_forbidden_skip(outcome.get_result())


def pytest_collection_modifyitems(config, items):
    """A launch_testing test (``@pytest.mark.launch_test``) is collected by its plugin, which
    does not apply the module's ``pytestmark``: it starts ROS 2 processes with the launch
    stack, so it is marked ``ros``, ``launch`` and ``slow`` here."""
    for item in items:
        if item.get_closest_marker("launch_test") is not None:
            for name in ("ros", "launch", "slow"):
                item.add_marker(name)
