"""The code blocks of a documentation page, in reading order, as a test runs them.

A fenced block whose language is ``bash`` or ``python`` is a step; other languages (``text``
for output, ``yaml``) are shown only. A block that only includes a file
(``--8<-- "path:section"``) shows code that the steps run from that file, so it is no step
either. An HTML comment right before a block, which the rendered page does not show, tells
the test how to run it:

- ``<!-- test: skip, REASON -->``: not run (the reason says why, e.g. it sets up the
  environment the test runs in);
- ``<!-- test: background, ready when "TEXT" -->``: started in the background, as in a second
  terminal; the next step waits until its output shows TEXT, and it is stopped with SIGINT
  (Ctrl-C) when its section (``##`` heading) ends;
- ``<!-- test: again until "TEXT" -->``: a snapshot of the ROS graph (``ros2 topic info``)
  that a reader runs again until discovery has caught up: run until its output shows TEXT
  (``\\n`` in it: a line break, so one TEXT can span the lines that must all be there; each
  run must exit 0), for as long as a background step may take to be ready;
- ``<!-- test: run by test/AREA/test_NAME.py -->``: not run from the page, because it needs
  what no page run has (a colcon workspace, two machines): that test runs each of its command
  lines as written (``test/docs/test_doc_blocks.py`` checks the file holds every line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Block", "command_lines", "included_files", "page_blocks"]

_FENCE = re.compile(r"^(`{3,})(\w*)")
_DIRECTIVE = re.compile(r"^<!--\s*test:\s*(.*?)\s*-->$")
_READY = re.compile(r'^background, ready when "(.+)"$')
_RUN_BY = re.compile(r"^run by (test/\S+\.py)$")
_UNTIL = re.compile(r'^again until "(.+)"$')
STEP_LANGUAGES = ("bash", "python")


@dataclass(frozen=True)
class Block:
    """One fenced code block: its language, code, section and line, and how to run it
    (``mode``: ``run``, ``skip``, ``background``, ``elsewhere`` or ``shown``; ``ready``: a
    background block's ready text, or the text a ``run`` block is run again until; ``test``:
    the test file that runs an ``elsewhere`` block)."""

    language: str
    code: str
    section: str
    line: int
    mode: str
    ready: str = ""
    test: str = ""

    def where(self, page: Path) -> str:
        return f"{page.name}:{self.line} ({self.section})"


def page_blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    section, directive, index = "", "", 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("## "):
            section = line[3:].strip()
        found = _DIRECTIVE.match(line.strip())
        if found:
            directive = found.group(1)
        fence = _FENCE.match(line)
        if not fence:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith(fence[1]))
        code = "\n".join(lines[index + 1 : end]) + "\n"
        blocks.append(_block(fence[2], code, section, index + 1, directive, page))
        directive, index = "", end + 1
    return blocks


def _block(language: str, code: str, section: str, line: int, directive: str, page: Path):
    included = code.strip().startswith("--8<--")
    if language not in STEP_LANGUAGES or included:
        if directive:
            raise ValueError(f"{page.name}:{line}: 'test: {directive}' before a block that "
                             "is not a step")  # fmt: skip
        return Block(language, code, section, line, "shown")
    if not directive:
        return Block(language, code, section, line, "run")
    if directive.startswith("skip, "):
        return Block(language, code, section, line, "skip")
    run_by = _RUN_BY.match(directive)
    if run_by:
        return Block(language, code, section, line, "elsewhere", test=run_by.group(1))
    until = _UNTIL.match(directive)
    if until and language == "bash":
        return Block(language, code, section, line, "run", until.group(1).replace("\\n", "\n"))
    ready = _READY.match(directive)
    if ready and language == "bash":
        return Block(language, code, section, line, "background", ready.group(1))
    raise ValueError(f"{page.name}:{line}: unknown directive 'test: {directive}' (skip, "
                     'REASON | background, ready when "TEXT" | again until "TEXT" | run by '
                     'test/...py)')  # fmt: skip


_INCLUDE = re.compile(r'^--8<--\s+"([^"]+)"\s*$')


def included_files(block: Block) -> list[str]:
    """The files a block includes (``--8<-- "path"`` or ``"path:section"``), relative to the
    repository's root, as ``pymdownx.snippets`` reads them (mkdocs.yml: ``base_path: .``)."""
    found = []
    for line in block.code.splitlines():
        include = _INCLUDE.match(line.strip())
        if include:
            found.append(include.group(1).split(":", 1)[0])
    return found


def command_lines(code: str) -> list[str]:
    """The command lines of a bash block: continuation lines joined, comments and blank lines
    left out, each as one line with single spaces."""
    lines = []
    for line in code.replace("\\\n", " ").splitlines():
        command = line.split(" #", 1)[0].strip()
        if command and not command.startswith("#"):
            lines.append(" ".join(command.split()))
    return lines
