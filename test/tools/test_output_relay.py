"""OutputRelay: child output passed on line by line with the label, from real pipes."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
import time

from leapp_ros.run.output_relay import MAX_LINE, OutputRelay


def relay_all(
    script: str, timeout_s: float = 20.0, release_after: int | None = None
) -> tuple[str, str, list[tuple[str, bool]]]:
    """Run ``script`` in a child, relay its output until it ends; (stdout, stderr, lines).
    ``release_after``: once that many pieces were passed on, write a line to the child's
    stdin (a script waiting for it proves the relay did not wait for what comes after)."""
    out, err, seen = io.StringIO(), io.StringIO(), []
    relay = OutputRelay(lambda owner, text, is_stderr: seen.append((text, is_stderr)), out, err)
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    relay.watch("owner", "node", child)
    deadline = time.monotonic() + timeout_s
    while child.poll() is None and time.monotonic() < deadline:
        relay.pump(0.05)
        if release_after is not None and len(seen) >= release_after:
            child.stdin.write(b"go\n")
            child.stdin.flush()
            release_after = None
    child.wait(5)
    relay.drain("owner")
    relay.close()
    return out.getvalue(), err.getvalue(), seen


def test_lines_split_across_writes_are_joined_and_a_last_line_without_newline_is_kept():
    out, err, seen = relay_all("""
        import sys, time
        # the pause only makes the two writes likely to arrive apart; the result is the same
        # when they arrive together
        sys.stdout.write("first "); sys.stdout.flush(); time.sleep(0.2)
        sys.stdout.write("line\\nno newline at the end"); sys.stdout.flush()
    """)
    assert out == "[node] first line\n[node] no newline at the end\n" and err == ""
    assert seen == [("first line", False), ("no newline at the end", False)]


def test_stderr_lines_go_to_stderr_and_are_marked_as_such():
    out, err, seen = relay_all("""
        import sys
        print("to stdout", flush=True)
        print("to stderr", file=sys.stderr, flush=True)
    """)
    assert out == "[node] to stdout\n" and err == "[node] to stderr\n"
    assert sorted(seen) == [("to stderr", True), ("to stdout", False)]


def test_a_line_longer_than_max_line_is_passed_on_in_pieces_without_waiting_for_its_end():
    out, _, seen = relay_all(
        f"""
        import sys
        sys.stdout.write("x" * {MAX_LINE + 10}); sys.stdout.flush()
        sys.stdin.readline()  # written by the test once the first piece was passed on
        sys.stdout.write("y\\n"); sys.stdout.flush()
        """,
        release_after=1,
    )
    assert "".join(text for text, _ in seen) == "x" * (MAX_LINE + 10) + "y"
    assert len(seen) >= 2 and all(line.startswith("[node] ") for line in out.splitlines())
