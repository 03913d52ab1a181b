"""The node parameters reference page, written from ``config/leapp_ros.yaml``.

The file is the one place the parameters are described: each block of comments followed by a
``name: default`` line becomes a section for that parameter, and a block with no parameter
after it (per-port settings, QoS overrides) a section of its own. Comment lines indented past
the comment's own margin (lists of choices, YAML examples) stay as written, in a code block.
"""

from __future__ import annotations

import re
from pathlib import Path

_PARAMETER = re.compile(r"^ {4}([a-z_]+):\s*(.*?)\s*$")
_COMMENTED = re.compile(r"^([a-z_]+):\s*(\S.*?)\s*$")  # "# cpu_affinity: [0]": unset
_INTRO = (
    "# Node parameters\n\n"
    "Every node (`leapp_node`, a pipeline node in `leapp_container`, `leapp_fused`) reads "
    "these ROS 2 parameters once, when it starts. Give them in a parameters file: "
    "`leapp-ros run EXPORT --params-file FILE`, `ros2 launch leapp_ros pipeline.launch.py "
    "params_file:=FILE`, `leapp-ros inspect EXPORT --params-file FILE` (which shows the "
    "messages and joint orders they choose) or `GraphUnderTest(params_file=FILE)`. "
    "A section `/**:` applies to every node, `/<namespace>/<node>:` to one, `/**/<node>:` to "
    "that node in any namespace. A key without a namespace (`<node>:`) is the node "
    "`/<node>` of the root namespace, as ROS 2 reads it: for a graph in a namespace it "
    "reaches no node, and leapp-ros stops the start saying what to write.\n\n"
    "This page is generated from `config/leapp_ros.yaml`, which lists every parameter with "
    "its default; copy it as the start of your own file.\n"
)


def parameters_page(config: Path) -> str:
    """The Markdown of the page for the parameters file ``config``."""
    lines = config.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "ros__parameters:")
    header = [_comment(line) for line in lines[:start] if line.startswith("#")]
    blocks, comments = [], []
    for line in [*lines[start + 1 :], ""]:
        match = _PARAMETER.match(line)
        if line.strip().startswith("#"):
            comments.append(_comment(line.strip()))
        elif match:
            blocks.append((match.group(1), match.group(2), comments))
            comments = []
        elif not line.strip() and comments:
            commented = _COMMENTED.match(comments[-1])
            if commented:
                unset = f"unset (e.g. `{comments[-1]}`)"
                blocks.append((commented.group(1), unset, comments[:-1]))
            else:
                blocks.append(("", "", comments))
            comments = []
    sections = [_INTRO, "## The file\n", _markdown(header)]
    merged: list[tuple[list[tuple[str, str]], list[str]]] = []
    for name, default, text in blocks:
        if name and not text and merged and merged[-1][0]:
            merged[-1][0].append((name, default))  # described with the one before it
        else:
            merged.append(([(name, default)] if name else [], text))
    for names, text in merged:
        if names:
            title = ", ".join(f"`{name}`" for name, _ in names)
            lead = "".join(f"Default: {_default(name, d)}\n\n" for name, d in names)
        else:
            title, lead = _title(text), ""
        sections.append(f"## {title}\n\n{lead}{_markdown(text)}")
    return "\n".join(sections)


def _default(name: str, default: str) -> str:
    return default if default.startswith("unset") else f"`{name}: {default}`"


def _escape(line: str) -> str:
    """``<`` and ``>`` outside code spans as entities (else Markdown reads a tag)."""
    parts = line.split("`")
    for index in range(0, len(parts), 2):
        parts[index] = parts[index].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _comment(line: str) -> str:
    return line[1:][1:] if line.startswith("# ") else line[1:]


def _title(text: list[str]) -> str:
    first = next((line for line in text if line.strip()), "Notes")
    words = re.split(r"[.:(]", first, maxsplit=1)[0].strip()
    return words or "Notes"


def _markdown(text: list[str]) -> str:
    """Comment lines as Markdown: indented runs verbatim, and so is the run after a line
    ending with a colon and a blank line (a YAML example), up to the next blank line."""
    out, verbatim, example = [], [], False

    def flush() -> None:
        if verbatim:
            while verbatim and not verbatim[-1].strip():
                verbatim.pop()
            out.extend(["", "```text", *verbatim, "```", ""])
            verbatim.clear()

    previous = ""
    for index, line in enumerate(text):
        if not line.strip() and previous.rstrip().endswith(":"):
            example = True
        if line.startswith(" ") or (example and line.strip()):
            verbatim.append(line)
        elif not line.strip():
            following = text[index + 1] if index + 1 < len(text) else ""
            if verbatim and following.startswith(" "):
                verbatim.append(line)
            else:
                flush()
                out.append("")
                example = example and not verbatim and previous.rstrip().endswith(":")
        else:
            flush()
            example = False
            out.append(_escape(line))
        previous = line if line.strip() else previous
    flush()
    return "\n".join(out).strip() + "\n"
