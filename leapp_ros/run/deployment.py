"""How a graph is started: its :class:`Deployment`, and every choice in :class:`GraphOptions`.

One export runs in one of three deployments: one process per pipeline node (the default),
every node in one process (composed, one executor), or one node running the whole pipeline
per tick (fused). :class:`GraphOptions` carries the deployment and what else a graph is
started with (namespace, log level, parameters file, CPU settings, remaps, the nodes to run
here, autostart); it checks every value when made, so a bad option is refused before anything
starts. :func:`leapp_ros.run.processes.plan_processes` turns a plan and these options into the
processes to start, for the runner (``leapp-ros run``), ``pipeline.launch.py`` and the launch
files of generated packages alike.

On the command line and as launch arguments the same choices are strings
(:meth:`GraphOptions.from_arguments`): ``deployment`` is ``processes``, ``composed`` or
``fused``. No rclpy import.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from leapp_ros.plan.pipeline import PlanError, check_namespace
from leapp_ros.plan.selection import node_names

__all__ = ["LOG_LEVELS", "Deployment", "GraphOptions"]

LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")


class Deployment(str, enum.Enum):
    """The processes and nodes one export runs as (the value is the command-line name)."""

    PROCESSES = "processes"
    """One ``leapp_node`` process per pipeline node."""
    COMPOSED = "composed"
    """Every pipeline node in one ``leapp_container`` process, on one executor."""
    FUSED = "fused"
    """One ``leapp_fused`` node running every pipeline node per tick."""

    def __str__(self) -> str:
        return self.value

    @property
    def description(self) -> str:
        """The deployment in words, for reports."""
        return "one process per node" if self is Deployment.PROCESSES else self.value

    @classmethod
    def parse(cls, value: Deployment | str) -> Deployment:
        """``value`` as a deployment (its name, any case).

        Raises:
            PlanError: ``value`` names no deployment; the message lists them.
        """
        if isinstance(value, Deployment):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            names = ", ".join(d.value for d in cls)
            raise PlanError(f"unknown deployment {value!r}; choose one of {names}") from None


@dataclass(frozen=True)
class GraphOptions:
    """Everything a graph is started with besides its export, checked when made.

    Attributes:
        deployment: one process per node, composed or fused (a name is taken too).
        namespace: ROS namespace of the nodes (None: the pipeline's name); made absolute.
        log_level: ``debug``, ``info``, ``warn``, ``error`` or ``fatal`` (None: the nodes'
            default, info).
        params_file: a ROS 2 parameters YAML given to every node; made absolute.
        cpu_latency_us: the nodes' ``cpu_latency_us`` parameter (>= 0: hold a CPU latency
            request while running; -1: none; None: as the parameters file says).
        pin_cpus: pin each process to one CPU, round robin in pipeline order (the nodes'
            ``cpu_affinity`` parameter); see :mod:`leapp_ros.plan.cpu_settings`.
        remaps: ROS remap rules ``FROM:=TO`` for every node; a relative ``FROM`` resolves in
            the nodes' namespace (``preprocess/joint_states:=/joint_states``).
        nodes: the pipeline nodes to run on this host (None: all); the others run on other
            hosts of the same ROS domain (:mod:`leapp_ros.plan.selection`); fused, only all
            of them.
        autostart: False: every node starts unconfigured and waits for ``ros2 lifecycle``
            (configure, activate); None: as the parameters file says (default: start).

    Raises:
        PlanError: a value is not one of those above (an unknown deployment or log level, a
            parameters file that does not exist, a remap rule that is not ``FROM:=TO``, an
            invalid namespace).
    """

    deployment: Deployment = Deployment.PROCESSES
    namespace: str | None = None
    log_level: str | None = None
    params_file: Path | None = None
    cpu_latency_us: int | None = None
    pin_cpus: bool = False
    remaps: tuple[str, ...] = ()
    nodes: tuple[str, ...] | None = None
    autostart: bool | None = None

    def __post_init__(self) -> None:
        def put(name: str, value: object) -> None:
            object.__setattr__(self, name, value)  # normalizing a frozen instance once

        put("deployment", Deployment.parse(self.deployment))
        if self.namespace is not None:
            put("namespace", check_namespace(self.namespace))
        if self.log_level is not None:
            put("log_level", _log_level(self.log_level))
        if self.params_file is not None:
            put("params_file", _params_file(self.params_file))
        _check_cpu_latency(self.cpu_latency_us)
        put("remaps", _remaps(self.remaps))
        if isinstance(self.nodes, str):  # a comma list
            put("nodes", node_names(self.nodes))
        elif self.nodes is not None:
            put("nodes", tuple(self.nodes))
        put("pin_cpus", bool(self.pin_cpus))
        if self.autostart is not None:
            put("autostart", bool(self.autostart))

    @classmethod
    def from_arguments(cls, values: Mapping[str, str]) -> GraphOptions:
        """The options that launch arguments (or other strings) give: ``deployment``
        (``processes``, ``composed``, ``fused``; ``composed: true`` / ``fused: true``, the
        older form, say the same and win over ``processes``), ``namespace``, ``log_level``,
        ``params_file``, ``cpu_latency_us`` (a whole number), ``pin_cpus`` and ``autostart``
        (``true`` / ``false``), ``remaps`` (rules separated by spaces or commas), ``nodes`` (a
        comma list). An empty or missing value is the default; ``autostart: true`` leaves it
        to the parameters file.

        Raises:
            PlanError: a value that does not fit (named), or two deployments asked for.
        """
        text = {name: str(value).strip() for name, value in values.items()}
        deployment = _deployment(text)
        autostart = _flag(text, "autostart")
        nodes = text.get("nodes", "")
        return cls(
            deployment=deployment,
            namespace=text.get("namespace") or None,
            log_level=text.get("log_level") or None,
            params_file=Path(text["params_file"]) if text.get("params_file") else None,
            cpu_latency_us=_whole_number("cpu_latency_us", text.get("cpu_latency_us", "")),
            pin_cpus=bool(_flag(text, "pin_cpus")),
            remaps=tuple(text.get("remaps", "").replace(",", " ").split()),
            nodes=node_names(nodes) if nodes else None,
            autostart=False if autostart is False else None,
        )


def _deployment(text: Mapping[str, str]) -> Deployment:
    """The deployment that ``deployment`` and the older ``composed`` / ``fused`` flags ask for
    (a flag wins over ``processes``, the default)."""
    given = Deployment.parse(text["deployment"]) if text.get("deployment") else None
    asked = {d for d in (Deployment.COMPOSED, Deployment.FUSED) if _flag(text, d.value)}
    if given is not None and given is not Deployment.PROCESSES:
        asked.add(given)
    if len(asked) > 1:
        listed = " and ".join(sorted(d.value for d in asked))
        raise PlanError(f"two deployments asked for ({listed}); choose one with deployment:=")
    return asked.pop() if asked else Deployment.PROCESSES


def _flag(text: Mapping[str, str], name: str) -> bool | None:
    value = text.get(name, "").lower()
    if not value:
        return None
    if value not in ("true", "false"):
        raise PlanError(f"{name} must be true or false, got {text[name]!r}")
    return value == "true"


def _whole_number(name: str, text: str) -> int | None:
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise PlanError(f"{name} must be a whole number, got {text!r}") from None


def _log_level(level: str) -> str:
    lowered = str(level).lower()
    if lowered not in LOG_LEVELS:
        raise PlanError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
    return lowered


def _params_file(path: str | os.PathLike[str]) -> Path:
    absolute = Path(path).absolute()
    if not absolute.is_file():
        raise PlanError(
            f"parameters file {absolute} does not exist; pass a ROS 2 parameters YAML "
            "(config/leapp_ros.yaml of the leapp_ros package shows every option)"
        )
    return absolute


def _check_cpu_latency(value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanError(f"cpu_latency_us must be a whole number, got {value!r}")
    if value < -1:
        raise PlanError(f"cpu_latency_us must be -1 (off) or >= 0, got {value}")


def _remaps(rules: Iterable[str]) -> tuple[str, ...]:
    if isinstance(rules, str):
        rules = [rules]
    checked = tuple(rules)
    for rule in checked:
        source, _, target = rule.partition(":=")
        if not source or not target or source.startswith("__"):
            raise PlanError(
                f"remap rule {rule!r} is not FROM:=TO for a topic, e.g. "
                "preprocess/joint_states:=/joint_states"
            )
    return checked
