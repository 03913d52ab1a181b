"""Process skeleton shared by ``leapp_node``, ``leapp_fused`` and ``leapp_container``: init,
spin, stop.

:func:`run_nodes` is the whole life of a process that hosts pipeline nodes:

1. ``rclpy.init`` on a context of its own, with rclpy's signal handlers off;
2. build the nodes (a startup problem prints one ``<program>: error: ...`` line on stderr and
   the process exits with code 2);
3. spin all nodes on one executor from :func:`make_executor` until SIGINT or SIGTERM;
4. let every node say goodbye (:meth:`PipelineNode.stop`, which publishes the ``stopping``
   status), destroy the nodes, shut the context down, and exit with code 0 (an executable's
   process through :func:`leave_process`, without the interpreter's teardown).

Why rclpy's own signal handlers are off: they shut the context down from inside the signal
handler, after which nothing can be published any more (so no ``stopping`` status), and
``EventsExecutor.spin()`` does not return after an external shutdown (it busy-loops; seen with
the Kilted wheels). Instead, Python handlers set a flag and the main thread spins in slices of
:data:`POLL_S` seconds (``spin_once``), checking the flag between them. ``spin_once`` returns
after every callback, so a busy node notices a signal at once and an idle one within
:data:`POLL_S`.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, NoReturn

from leapp.errors import LeappError

__all__ = ["POLL_S", "leave_process", "make_executor", "node_main", "run_nodes", "startup_failure"]

POLL_S = 0.2  # longest wait inside one spin_once, i.e. the worst signal latency when idle

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def make_executor(context: Any = None) -> Any:
    """``rclpy.experimental.EventsExecutor`` when this rclpy has it, else
    ``SingleThreadedExecutor``; never the multi-threaded one (slow and jittery on the data
    path)."""
    try:
        from rclpy.experimental import EventsExecutor
    except ImportError:
        from rclpy.executors import SingleThreadedExecutor

        return SingleThreadedExecutor(context=context)
    return EventsExecutor(context=context)


def startup_failure(program: str, error: object) -> int:
    """Print ``<program>: error: <message on one line>`` on stderr; return exit code 2."""
    message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    print(f"{program}: error: {message or type(error).__name__}", file=sys.stderr, flush=True)
    return 2


def run_nodes(
    program: str,
    args: Sequence[str],
    build: Callable[[Any, list[Any]], None],
    *,
    whole_process: bool = False,
) -> int:
    """Run the nodes that ``build`` creates until SIGINT/SIGTERM; returns the exit code.

    Args:
        program: the executable's name, used in error lines.
        args: the full command line for ``rclpy.init`` (program name first, then anything
            including ``--ros-args ...``).
        build: ``build(context, nodes)`` creates the nodes on ``context`` and appends each to
            ``nodes`` as soon as it exists (so those are destroyed even when a later one fails).
            It raises :class:`~leapp.errors.LeappError` (or an rclpy name or parameter error)
            for a startup problem.
        whole_process: the nodes are this process's whole job (the executables' entry
            points): once a stop signal arrived, further SIGINTs are ignored until the process
            has exited. A terminal's Ctrl-C reaches ``ros2 launch`` and its children, and
            launch then sends SIGINT again; without this, the second one could kill the
            process with code -2 while it exits. SIGTERM keeps its default action, so a
            supervisor's escalation still ends a process that does not exit. The process
            then ends through :func:`leave_process`. Leave it False when running inside
            another program (tests), whose handlers come back.

    Returns:
        0 after a signal and a clean shutdown, 2 for a startup problem. With
        ``whole_process`` it does not return: :func:`leave_process` ends the process with
        that code once the nodes and the context are gone.
    """
    code = _run_nodes(program, args, build, whole_process)
    if whole_process:
        leave_process(code)
    return code


def _run_nodes(
    program: str,
    args: Sequence[str],
    build: Callable[[Any, list[Any]], None],
    whole_process: bool,
) -> int:
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import ExternalShutdownException
    from rclpy.signals import SignalHandlerOptions

    context = Context()
    try:
        rclpy.init(
            args=list(args), context=context, signal_handler_options=SignalHandlerOptions.NO
        )
    except Exception as e:  # rcl could not parse the ROS arguments
        return startup_failure(program, f"invalid ROS arguments: {e}")
    nodes: list[Any] = []
    try:
        with _stop_signals(keep_ignoring=whole_process) as stopped:
            try:
                build(context, nodes)
            except _startup_errors() as e:
                return startup_failure(program, e)
            executor = make_executor(context)
            for node in nodes:
                executor.add_node(node)
            try:
                while not stopped and context.ok():
                    executor.spin_once(timeout_sec=POLL_S)
            except (ExternalShutdownException, KeyboardInterrupt):
                pass
            for node in nodes:
                stop = getattr(node, "stop", None)
                if stop is not None and context.ok():
                    stop()
            executor.shutdown()
        return 0
    finally:
        for node in nodes:
            node.destroy_node()
        context.try_shutdown()
        destroy = getattr(context, "destroy", None)  # (not in every rclpy release)
        if destroy is not None:
            destroy()  # its DDS participant leaves now, not when the process has gone


def leave_process(code: int) -> NoReturn:
    """End this process with ``code`` now that its nodes and ROS context are gone.

    Runs what ``atexit`` holds (Python's logging handlers, torch's and multiprocessing's
    clean-ups), flushes Python's and C's output streams, then ``os._exit``: the interpreter's
    own teardown is skipped. That teardown frees every module and object one by one, which
    with torch loaded is most of a node's time from SIGINT to exit, and on a loaded machine
    can outlast the grace period after which ``ros2 launch`` escalates to SIGTERM (figures:
    docs, explanation, performance). Nothing is lost by skipping it: the process owns no files
    or devices that the kernel does not release at exit, and no Python threads of its own to
    wait for (the middleware's threads end with the process, after the context has let its
    participant go).
    """
    try:
        atexit._run_exitfuncs()  # the handlers a normal exit would run, in the same order
    finally:
        for stream in (sys.stdout, sys.stderr):
            with suppress(OSError, ValueError, AttributeError):  # closed, or replaced by None
                stream.flush()
        _flush_c_streams()
        os._exit(code)


def _flush_c_streams() -> None:
    """``fflush(NULL)``: C's buffered streams (rcutils logs to stdout when
    RCUTILS_LOGGING_USE_STDOUT=1, fully buffered into a pipe) are otherwise lost by
    ``os._exit``."""
    with suppress(OSError, AttributeError):  # no C library to look into (not Linux/macOS)
        ctypes.CDLL(None).fflush(None)


def node_main(
    program: str, usage: str, make_node: Callable[[Any], Any], argv: Sequence[str] | None
) -> int:
    """The entry point of an executable running one node: ``make_node(context)`` after
    checking that ``argv`` (the whole command line; None: sys.argv) holds only ROS arguments
    (``-h``/``--help`` print ``usage``). With ``argv`` None the call is the process's whole
    life: once the node has run, :func:`run_nodes` ends the process instead of returning."""
    from rclpy.utilities import remove_ros_args

    args = list(sys.argv if argv is None else argv)
    try:
        extra = remove_ros_args(args)[1:]
    except Exception as e:  # rcl could not parse the ROS arguments
        return startup_failure(program, f"invalid ROS arguments: {e}")
    if extra and set(extra) <= {"-h", "--help"}:
        print(usage)
        return 0
    if extra:
        return startup_failure(program, f"unexpected arguments {extra}; see {program} --help")

    def build(context: Any, nodes: list[Any]) -> None:
        nodes.append(make_node(context))

    return run_nodes(program, args, build, whole_process=argv is None)


def _startup_errors() -> tuple[type[BaseException], ...]:
    from rclpy.exceptions import NameValidationException, ParameterException

    return (LeappError, NameValidationException, ParameterException)


@contextmanager
def _stop_signals(keep_ignoring: bool = False) -> Iterator[list[int]]:
    """Within the block, SIGINT/SIGTERM append to the yielded list instead of interrupting;
    the previous handlers come back afterwards (with ``keep_ignoring``, SIGINT is ignored
    from then on instead)."""
    received: list[int] = []
    previous = {}
    if threading.current_thread() is not threading.main_thread():
        yield received  # Python handles signals in the main thread only
        return
    for number in _STOP_SIGNALS:
        previous[number] = signal.signal(number, lambda signum, frame: received.append(signum))
    try:
        yield received
    finally:
        for number, handler in previous.items():
            ignore = keep_ignoring and number == signal.SIGINT
            signal.signal(number, signal.SIG_IGN if ignore else handler)
