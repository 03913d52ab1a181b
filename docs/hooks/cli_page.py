"""The command line reference page, written from the ``leapp-ros`` argument parser
(:func:`leapp_ros.tools.cli.build_parser`) and the launch file's arguments
(:data:`leapp_ros.run.launch_description.ARGUMENTS`, read from its source, so that the page
builds without the launch stack)."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

_WIDTH = 96


def cli_page(root: Path) -> str:
    """The Markdown of the ``leapp-ros`` and ``pipeline.launch.py`` reference."""
    from leapp_ros.tools.cli import build_parser

    parser = build_parser()
    parts = [
        "# Command line\n",
        "Generated from the `leapp-ros` argument parser and the launch file's arguments. "
        "`leapp-ros COMMAND --help` prints the same.\n",
        f"```text\n{_usage(parser)}```\n",
        f"{parser.description}\n",
    ]
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in commands.choices.items():
        parts.append(f"## `leapp-ros {name}`\n")
        parts.append(f"```text\n{_usage(sub)}```\n")
        if sub.description:
            parts.append(f"{sub.description}\n")
        parts.append(_arguments(sub))
    parts.append(_launch_arguments(root / "leapp_ros" / "run" / "launch_description.py"))
    return "\n".join(parts)


def _usage(parser: argparse.ArgumentParser) -> str:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=_WIDTH)
    return parser.format_usage().removeprefix("usage: ")


def _arguments(parser: argparse.ArgumentParser) -> str:
    rows = ["| argument | meaning | default |", "| --- | --- | --- |"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if action.option_strings:
            names = ", ".join(action.option_strings)
            if action.nargs != 0:
                names += f" {action.metavar or action.dest.upper()}"
        else:
            names = action.metavar or action.dest.upper()
        default = action.default
        shown = "" if default in (None, False, [], argparse.SUPPRESS) else _value(default)
        rows.append(f"| `{names}` | {_cell(action.help or '')} | {shown} |")
    return "\n".join(rows) + "\n"


def _value(default: object) -> str:
    text = getattr(default, "value", default)  # an enum: its value
    return f"`{text}`"


def _cell(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("[", "\\[")  # not a link reference
    return text.replace("|", "\\|").replace("\n", " ")


def _launch_arguments(source: Path) -> str:
    """The table of ``ARGUMENTS`` of ``launch_description.py``, evaluated from its source
    (the module itself imports ``launch``)."""
    from leapp_ros.run.deployment import Deployment

    tree = ast.parse(source.read_text(encoding="utf-8"))
    namespace: dict[str, object] = {"Deployment": Deployment}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id in ("_BOOLEAN", "ARGUMENTS"):
            value = ast.Expression(node.value)
            namespace[target.id] = eval(compile(value, str(source), "eval"), namespace)
    rows = [
        "## `ros2 launch leapp_ros pipeline.launch.py`\n",
        "On a ROS 2 install (or with the launch stack in the virtual environment) the launch "
        "file starts the same processes as `leapp-ros run`, with the same options as launch "
        "arguments (`name:=value`). The generated packages' launch files take the same "
        "arguments.\n",
        "| argument | meaning | default | choices |",
        "| --- | --- | --- | --- |",
    ]
    for name, (default, choices, description) in namespace["ARGUMENTS"].items():
        shown = "(required)" if default is None else f"`{default}`" if default else "(empty)"
        listed = ", ".join(choices) if choices else ""
        rows.append(f"| `{name}` | {_cell(description)} | {shown} | {listed} |")
    return "\n".join(rows) + "\n"
