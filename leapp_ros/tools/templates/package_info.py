"""What every template of a generated package needs: :class:`PackageInfo` and :func:`fill`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from leapp_ros.plan.pipeline import PipelinePlan
from leapp_ros.run.deployment import Deployment

__all__ = ["PackageInfo", "fill", "python_literal"]

_MARKER = re.compile(r"@([A-Z][A-Z0-9_]*)@")


@dataclass(frozen=True)
class PackageInfo:
    """One generated package: its name, the pipeline's plan and the export files it carries.

    ``stem`` names the pipeline's files (``launch/<stem>.launch.py``, ``config/<stem>.yaml``,
    ``test/test_<stem>_topics.py``); ``export_files`` are paths relative to the package's
    ``export/`` folder (the spec, every artifact, the examples and initial values files),
    sorted; ``spec_file`` and ``examples_file`` are among them.
    """

    name: str
    stem: str
    plan: PipelinePlan
    spec_file: str
    export_files: tuple[str, ...]
    examples_file: str | None = None
    version: str = "0.1.0"
    maintainer: str = "TODO"
    maintainer_email: str = "todo@example.com"
    license: str = "TODO"

    @property
    def launch_file(self) -> str:
        """The launch file of the default deployment, one process per node."""
        return self.launch_file_of(Deployment.PROCESSES)

    def launch_file_of(self, deployment: Deployment) -> str:
        """``<stem>.launch.py`` (one process per node), ``<stem>_composed.launch.py``,
        ``<stem>_fused.launch.py``."""
        if deployment is Deployment.PROCESSES:
            return f"{self.stem}.launch.py"
        return f"{self.stem}_{deployment.value}.launch.py"

    @property
    def launch_files(self) -> tuple[str, ...]:
        """Every launch file, in the order of :class:`Deployment`."""
        return tuple(self.launch_file_of(deployment) for deployment in Deployment)

    @property
    def params_file(self) -> str:
        return f"{self.stem}.yaml"

    @property
    def test_file(self) -> str:
        return f"test_{self.stem}_topics.py"

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(node.name for node in self.plan.nodes)


def fill(template: str, **values: str) -> str:
    """``template`` with every ``@KEY@`` replaced by ``values["KEY"]``; a marker without a
    value is a bug in the template and raises KeyError."""

    def value(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return _MARKER.sub(value, template)


def python_literal(value: str | tuple[str, ...]) -> str:
    """A string or tuple of strings as Python source, double-quoted like ruff formats it."""
    if isinstance(value, tuple):
        inner = ", ".join(python_literal(item) for item in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    text = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'
