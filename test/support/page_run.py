"""Running a documentation page as a reader would: every step (``support.page_blocks``) in the
page's order, in a folder of the test's, each foreground step to its end (exit code 0), each
background step as in a second terminal until its section ends, then stopped with SIGINT
(Ctrl-C) and exit code 0. A bash step runs under ``bash -e -o pipefail``: any command that
fails fails the step (not ``-u``: a colcon workspace's ``setup.bash`` reads unset variables,
as a reader's shell allows). Before the next step the runner waits for a background step's
ready text and until the ros2 CLI lists the nodes the section's ``ros2 lifecycle`` and ``ros2
component`` commands name: a node is up before the CLI's discovery has seen its services."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from leapp_ros.testing import ros_env
from support.page_blocks import Block, page_blocks

__all__ = ["ROOT", "run_page", "stop_ros2_daemon"]

ROOT = Path(__file__).resolve().parents[2]
STEP_TIMEOUT_S = 600.0  # the longest step (the tutorial's train.py) takes about a minute
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
# the nodes a page's ros2 commands name, and the ros2 command that lists such nodes
_NAMED = (
    (re.compile(r"ros2 lifecycle (?:get|set) (/\S+)"), ("lifecycle", "nodes")),
    (re.compile(r"ros2 component (?:load|unload) (/\S+)"), ("node", "list")),
)


class Background:
    """A block running as in a second terminal: its output collected as it comes."""

    def __init__(self, block: Block, folder: Path, env: dict[str, str]):
        self.block, self.env = block, env
        self.process = subprocess.Popen(
            ["bash", "-eo", "pipefail", "-c", block.code],
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group, as a terminal's job
        )
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.output.append(line)

    def text(self) -> str:
        return "".join(self.output)

    def wait_ready(self, page: Path, named: dict[tuple[str, ...], set[str]]) -> None:
        """Until its output shows the block's ready text, then until the ros2 CLI sees the
        nodes in ``named`` (by the ros2 command that lists them: ``lifecycle nodes`` shows a
        node once its lifecycle services are seen), as discovery takes its time after a node
        is up."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while self.block.ready not in self.text():
            code = self.process.poll()
            assert code is None, (
                f"{self.block.where(page)}: ended with {code} before {self.block.ready!r}:\n"
                f"{self.text()}"
            )
            assert time.monotonic() < deadline, (
                f"{self.block.where(page)}: no {self.block.ready!r} within {READY_TIMEOUT_S} "
                f"s:\n{self.text()}"
            )
            time.sleep(0.1)
        ros2 = shutil.which("ros2")
        if ros2 and any(named.values()):  # asked through the daemon the page's commands ask
            subprocess.run([ros2, "daemon", "start"], env=self.env, capture_output=True,
                           timeout=READY_TIMEOUT_S)  # fmt: skip
        for listing, nodes in named.items():
            seen = ""
            while ros2 and nodes and not nodes <= set(seen.split()):
                assert time.monotonic() < deadline, (
                    f"{self.block.where(page)}: ros2 {' '.join(listing)} shows no "
                    f"{sorted(nodes)} in {READY_TIMEOUT_S} s: {seen!r}\n{self.text()}"
                )
                listed = subprocess.run([ros2, *listing], env=self.env, text=True,
                                        capture_output=True, timeout=READY_TIMEOUT_S)  # fmt: skip
                seen = listed.stdout

    def interrupt(self, page: Path) -> None:
        """Ctrl-C: SIGINT to its process group, then its exit code must be 0."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            code = self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            pytest.fail(f"{self.block.where(page)}: still running {STOP_TIMEOUT_S} s after "
                        f"Ctrl-C:\n{self.text()}")  # fmt: skip
        self._reader.join(timeout=10)
        where = self.block.where(page)
        assert code == 0, f"{where}: exit code {code} after Ctrl-C:\n{self.text()}"


def run_step(block: Block, page: Path, folder: Path, env: dict[str, str]) -> str:
    """Run ``block`` to its end in ``folder``; its output. Fails unless it exits 0. A ``run``
    block with a ``ready`` text (``again until``: a snapshot of discovery, which may not know
    the topic yet, ``ros2 topic info`` then exits 1) runs again until it exits 0 with that
    text in its output, for at most READY_TIMEOUT_S."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        code, output = _run_once(block, page, folder, env)
        if code == 0 and (not block.ready or block.ready in output):
            return output
        if not block.ready or time.monotonic() > deadline:
            again = (
                f", run again for {READY_TIMEOUT_S} s, no {block.ready!r}" if block.ready else ""
            )
            pytest.fail(f"{block.where(page)}: exit code {code}{again}\n$ {block.code}\n{output}")
        time.sleep(0.5)  # paces the repeats only: the condition is the output


def _run_once(block: Block, page: Path, folder: Path, env: dict[str, str]) -> tuple[int, str]:
    if block.language == "python":
        argv = [sys.executable, "-c", block.code]
    else:
        argv = ["bash", "-eo", "pipefail", "-c", block.code]
    try:
        done = subprocess.run(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=STEP_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{block.where(page)}: not done after {STEP_TIMEOUT_S} s:\n{e.stdout}")
    return done.returncode, done.stdout + done.stderr


def run_page(
    page: Path, folder: Path, domain_id: int, env: dict[str, str] | None = None
) -> dict[int, str]:
    """Run every step of ``page`` in ``folder`` (in ``env``, default this process's, isolated
    in ``domain_id``); the output of each foreground step by line."""
    for shared in ("examples", "docs"):  # what the pages name, as in a clone
        if not (folder / shared).exists():
            (folder / shared).symlink_to(ROOT / shared)
    env = ros_env(domain_id, env)
    outputs: dict[int, str] = {}
    running: list[Background] = []
    section = None
    blocks = page_blocks(page)
    try:
        for index, block in enumerate(blocks):
            if block.section != section:
                while running:
                    running.pop().interrupt(page)
                stop_ros2_daemon(env, domain_id)  # its view of the graph that just stopped
                section = block.section
            if block.mode == "run":
                outputs[block.line] = run_step(block, page, folder, env)
            elif block.mode == "background":
                running.append(Background(block, folder, env))
                running[-1].wait_ready(page, _named(blocks, index))
        while running:
            running.pop().interrupt(page)
    finally:
        for background in running:  # a failure above: stop what is left, hard
            if background.process.poll() is None:
                os.killpg(background.process.pid, signal.SIGKILL)
                background.process.wait()
        stop_ros2_daemon(env, domain_id)
    return outputs


def _named(blocks: list[Block], index: int) -> dict[tuple[str, ...], set[str]]:
    """The nodes the ros2 commands of ``blocks[index]``'s section name, by the command that
    lists them; none while the next step is another background one (those nodes may be its)."""
    block = blocks[index]
    following = blocks[index + 1] if index + 1 < len(blocks) else None
    if following and following.section == block.section and following.mode == "background":
        return {}
    section = [later for later in blocks if later.section == block.section]
    return {listing: {node for later in section for node in pattern.findall(later.code)}
            for pattern, listing in _NAMED}  # fmt: skip


def stop_ros2_daemon(env: dict[str, str], domain_id: int) -> None:
    """Stop the ros2 CLI's daemon of ``domain_id``, which outlives the commands that started
    it (the page's ``ros2`` commands are written as a reader types them, without
    ``--no-daemon``), and reap it: it is a child of this process (the suite's conftest makes
    pytest the subreaper of what its tests start)."""
    ros2 = shutil.which("ros2")
    if ros2 is None:
        return
    subprocess.run([ros2, "daemon", "stop"], env=env, capture_output=True, timeout=60)
    marker = f"--ros-domain-id {domain_id} "
    for task in Path(f"/proc/{os.getpid()}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in map(int, children):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if b"ros2cli.daemon" in command and marker.encode() in command + b" ":
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
