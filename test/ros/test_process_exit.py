"""How a node process ends after SIGINT (leapp_ros.node.executor.run_nodes).

An executable's process (``whole_process=True``: leapp_node, leapp_fused, leapp_container)
says goodbye, destroys its nodes and its ROS context, runs what ``atexit`` holds, flushes
Python's and C's streams and ends without the interpreter's teardown (which costs a torch
process most of a second of CPU, several on a loaded machine). Inside another program
(``whole_process=False``) run_nodes returns and that program exits as it would.

The probe program is a real rclpy node on DDS in a domain of its own; its stdout and stderr
are files and PYTHONUNBUFFERED is unset, so Python's and C's stdout are fully buffered, as
they are when a process writes into a pipe or a log file.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.runner import wait_until

from leapp_ros.testing import reserve_domain_id, ros_env

pytestmark = pytest.mark.ros

PROGRAM = textwrap.dedent(
    """
    import atexit
    import ctypes
    import sys
    from pathlib import Path

    from rclpy.node import Node

    from leapp_ros.node.executor import run_nodes

    marker = Path(sys.argv[1])
    whole_process = sys.argv[2] == "whole"


    class Teardown:
        def __del__(self):
            print("interpreter teardown", flush=True)


    kept = Teardown()  # a module global: only the interpreter's teardown deletes it
    atexit.register(marker.write_text, "atexit ran")


    class Goodbye(Node):
        def stop(self):
            self.get_logger().info("goodbye from the node")
            print("python stdout, not flushed", end="")
            ctypes.CDLL(None).printf(b"C stdout, not flushed")


    def build(context, nodes):
        nodes.append(Goodbye("exit_probe", context=context))
        print("built", flush=True)


    code = run_nodes("exit_probe", [sys.argv[0]], build, whole_process=whole_process)
    print(f"run_nodes returned {code}", flush=True)
    sys.exit(code)
    """
)


def run_and_interrupt(tmp_path: Path, mode: str) -> tuple[int, str, str, Path]:
    """Start the probe program, SIGINT it once its node exists; (exit code, stdout, stderr,
    atexit marker)."""
    program = tmp_path / "exit_probe.py"
    program.write_text(PROGRAM, encoding="utf-8")
    marker, out, err = tmp_path / "marker", tmp_path / "stdout", tmp_path / "stderr"
    with reserve_domain_id() as domain_id, open(out, "wb") as stdout, open(err, "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(program), str(marker), mode],
            env={k: v for k, v in ros_env(domain_id).items() if k != "PYTHONUNBUFFERED"},
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )
        try:
            built = wait_until(
                lambda: "built" in out.read_text(errors="replace") or process.poll() is not None,
                60,
            )
            assert process.poll() is None, f"ended early:\n{err.read_text(errors='replace')}"
            assert built, "the probe node was not built within 60 s"
            process.send_signal(signal.SIGINT)
            code = process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    return code, out.read_text(errors="replace"), err.read_text(errors="replace"), marker


def test_an_executable_ends_after_atexit_and_flushed_streams_without_the_teardown(tmp_path):
    code, stdout, stderr, marker = run_and_interrupt(tmp_path, "whole")
    assert code == 0, stderr
    assert "goodbye from the node" in stderr
    assert "python stdout, not flushed" in stdout
    assert "C stdout, not flushed" in stdout, (
        "C's buffered stdout was lost: no fflush before os._exit"
    )
    assert marker.read_text() == "atexit ran"
    assert "run_nodes returned" not in stdout  # the process ended inside run_nodes
    assert "interpreter teardown" not in stdout


def test_inside_another_program_run_nodes_returns_and_the_program_exits_as_usual(tmp_path):
    code, stdout, stderr, marker = run_and_interrupt(tmp_path, "embedded")
    assert code == 0, stderr
    assert "goodbye from the node" in stderr
    assert "run_nodes returned 0" in stdout
    assert "python stdout, not flushed" in stdout and "C stdout, not flushed" in stdout
    assert marker.read_text() == "atexit ran"
    assert "interpreter teardown" in stdout  # the control: the teardown does show when run
