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
  (Ctrl-C) when its section (``##`` heading) ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Block", "page_blocks"]

_FENCE = re.compile(r"^(`{3,})(\w*)")
_DIRECTIVE = re.compile(r"^<!--\s*test:\s*(.*?)\s*-->$")
_READY = re.compile(r'^background, ready when "(.+)"$')
STEP_LANGUAGES = ("bash", "python")


@dataclass(frozen=True)
class Block:
    """One fenced code block: its language, code, section and line, and how to run it
    (``mode``: ``run``, ``skip``, ``background`` or ``shown``)."""

    language: str
    code: str
    section: str
    line: int
    mode: str
    ready: str = ""

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
    ready = _READY.match(directive)
    if ready and language == "bash":
        return Block(language, code, section, line, "background", ready.group(1))
    raise ValueError(f"{page.name}:{line}: unknown directive 'test: {directive}' (skip, "
                     'REASON | background, ready when "TEXT")')  # fmt: skip
