"""The command line of a leapp_ros process read back into what it means, so that the runner's
``python -m <module> ...``, the command launch_ros builds for the package's executable, and a
live process's ``/proc/<pid>/cmdline`` compare equal when they start the same thing.

:func:`read_command_line` takes any of them: the executable becomes the console script's name
(``leapp_node``, ``leapp_container``, ``leapp_fused``: a ``-m`` module is mapped through the
package's entry points), the arguments before ``--ros-args`` are kept, the node name and
namespace remaps are taken out (launch_ros puts them in a ``--ros-args`` section of their own,
the runner first), and every other ROS argument is kept in order (``-p`` values read as YAML,
as rcl reads them), which is the order ROS applies them in.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

__all__ = ["CommandLine", "live_command_lines", "read_command_line"]

_FLAGS = {"-r": "r", "--remap": "r", "-p": "p", "--param": "p", "--params-file": "params-file",
          "--log-level": "log-level", "-e": "enclave", "--enclave": "enclave"}  # fmt: skip


@dataclass(frozen=True)
class CommandLine:
    """What a process is started as: ``rules`` are ``(kind, value)`` in command-line order,
    kinds ``r`` (a remap other than the name and namespace), ``p`` (``(name, value)``),
    ``params-file`` and ``log-level``."""

    executable: str
    arguments: tuple[str, ...]
    name: str | None
    namespace: str | None
    rules: tuple[tuple[str, Any], ...]

    @property
    def parameters(self) -> dict[str, Any]:
        """The ``-p`` parameters (a later one wins)."""
        return dict(value for kind, value in self.rules if kind == "p")


def read_command_line(argv: Sequence[str]) -> CommandLine:
    """``argv`` of a leapp_ros process as a :class:`CommandLine` (see the module docs)."""
    argv = list(argv)
    if len(argv) > 2 and argv[1] == "-m":  # python -m leapp_ros.node.pipeline_node ...
        executable, rest = _scripts()[argv[2]], argv[3:]
    elif len(argv) > 1 and Path(argv[0]).name.startswith("python"):  # python <script> ...
        executable, rest = Path(argv[1]).name, argv[2:]
    else:
        executable, rest = Path(argv[0]).name, argv[1:]
    at = rest.index("--ros-args") if "--ros-args" in rest else len(rest)
    name = namespace = None
    rules: list[tuple[str, Any]] = []
    tokens = iter(rest[at:])
    for token in tokens:
        kind = _FLAGS.get(token)
        if kind is None:  # --ros-args, --
            continue
        value = next(tokens)
        if kind == "r" and value.startswith(("__node:=", "__name:=")):
            name = value.split(":=", 1)[1]
        elif kind == "r" and value.startswith("__ns:="):
            namespace = value.split(":=", 1)[1]
        elif kind == "p":
            key, _, text = value.partition(":=")
            rules.append(("p", (key, yaml.safe_load(text))))
        else:
            rules.append((kind, value))
    return CommandLine(executable, tuple(rest[:at]), name, namespace, tuple(rules))


def live_command_lines(pid: int, executables: Sequence[str]) -> list[CommandLine]:
    """The command lines of the processes below ``pid`` (Linux's /proc) that run one of
    ``executables`` (console script names), sorted by executable, node name and namespace."""
    found = []
    for child in _descendants(pid):
        try:
            raw = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        argv = [part.decode() for part in raw.split(b"\0")[:-1]]
        if argv and (line := _leapp_command(argv, executables)) is not None:
            found.append(line)
    return sorted(found, key=lambda c: (c.executable, c.name or "", c.namespace or ""))


def _leapp_command(argv: list[str], executables: Sequence[str]) -> CommandLine | None:
    try:
        line = read_command_line(argv)
    except (KeyError, ValueError, StopIteration, yaml.YAMLError):  # another program
        return None
    return line if line.executable in executables else None


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc's children lists)."""
    found: list[int] = []
    pending = [pid]
    while pending:
        current = pending.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:  # gone meanwhile
                continue
            found += map(int, children)
            pending += map(int, children)
    return found


@functools.cache
def _scripts() -> dict[str, str]:
    """``module -> console script name`` of the leapp_ros distribution."""
    found = metadata.distribution("leapp_ros").entry_points
    return {p.value.split(":")[0]: p.name for p in found if p.group == "console_scripts"}
