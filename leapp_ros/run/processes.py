"""The operating-system processes that run a pipeline plan, and their command lines.

One process per pipeline node by default (the ``leapp_node`` executable, or
``python -m leapp_ros.node.pipeline_node``), or every node in one ``leapp_container`` process.
The same
description serves :mod:`leapp_ros.run.runner` (which starts the processes itself where ROS 2 comes
from pip) and ``launch/pipeline.launch.py`` (which hands them to ``launch_ros``), so both start
exactly the same thing; :func:`start_process` starts one the way the runner needs. No rclpy
import.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from leapp.errors import LeappError
from leapp_ros.plan.cpu_settings import usable_cpus
from leapp_ros.plan.pipeline import PipelinePlan, PlanError, check_namespace, make_plan
from leapp_ros.plan.selection import container_name, select_nodes

__all__ = [
    "LOG_LEVELS",
    "ProcessPlan",
    "describe_exit",
    "load_plan",
    "plan_processes",
    "start_process",
]

LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")

ParameterValue = str | bool | int | tuple[int, ...]


@dataclass(frozen=True)
class ProcessPlan:
    """One process of a graph, described for both :mod:`leapp_ros.run.runner` and ``launch_ros``.

    ``executable`` is the console script (``leapp_node`` / ``leapp_container``) that
    ``launch_ros.actions.Node`` starts; ``module`` is what the runner runs with ``python -m``.
    ``arguments`` come before ``--ros-args``; ``node_name``, ``namespace``, ``remaps``,
    ``params_file``, ``parameters`` and ``log_level`` become ROS arguments, in that order (so
    ``parameters``, set explicitly by the runner, win over the same names in ``params_file``).
    ``remaps`` are plain ROS remap rules (``preprocess/joint_states:=/joint_states``).
    ``pipeline_nodes`` are the nodes whose ready lines make the process ready.
    """

    label: str
    executable: str
    module: str
    pipeline_nodes: tuple[str, ...]
    arguments: tuple[str, ...] = ()
    node_name: str | None = None
    namespace: str | None = None
    parameters: tuple[tuple[str, ParameterValue], ...] = ()
    params_file: Path | None = None
    log_level: str | None = None
    remaps: tuple[str, ...] = ()

    @property
    def reports_ready(self) -> bool:
        """Whether the INFO ``ready`` line is visible at this process's log level."""
        return self.log_level in (None, "debug", "info")

    def ros_arguments(self) -> list[str]:
        """The arguments that follow ``--ros-args``."""
        args: list[str] = []
        if self.node_name is not None:
            args += ["-r", f"__node:={self.node_name}"]
        if self.namespace is not None:
            args += ["-r", f"__ns:={self.namespace}"]
        for rule in self.remaps:
            args += ["-r", rule]
        if self.params_file is not None:
            args += ["--params-file", str(self.params_file)]
        for name, value in self.parameters:
            if isinstance(value, str):  # values are read as YAML: keep strings strings
                value = "'" + value.replace("'", "''") + "'"
            elif isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, tuple):
                value = "[" + ", ".join(map(str, value)) + "]"
            args += ["-p", f"{name}:={value}"]
        if self.log_level is not None:
            args += ["--log-level", self.log_level]
        return args

    def argv(self, python: str | None = None) -> list[str]:
        """The command line: ``python -m <module> <arguments> --ros-args ...``."""
        ros = self.ros_arguments()
        tail = ["--ros-args", *ros] if ros else []
        return [python or sys.executable, "-m", self.module, *self.arguments, *tail]


def plan_processes(
    plan: PipelinePlan,
    *,
    composed: bool = False,
    fused: bool = False,
    log_level: str | None = None,
    params_file: str | os.PathLike[str] | None = None,
    cpu_latency_us: int | None = None,
    pin_cpus: bool = False,
    remaps: Sequence[str] = (),
    nodes: Sequence[str] | None = None,
    autostart: bool | None = None,
) -> tuple[ProcessPlan, ...]:
    """The processes that run ``plan``: one per node, one container when ``composed``, or
    one ``leapp_fused`` node running the whole pipeline per tick when ``fused``.

    ``cpu_latency_us`` sets that parameter of every node (a CPU latency request held while
    the graph runs); None leaves it to the params file. ``pin_cpus`` sets ``cpu_affinity`` of
    each process to one CPU of those this process may use, round robin in pipeline order, so
    that consecutive nodes run on different CPUs. See :mod:`leapp_ros.plan.cpu_settings`.
    ``remaps`` are ROS remap rules ``FROM:=TO`` for every process (a relative ``FROM`` is
    resolved in each node's namespace: ``preprocess/joint_states:=/joint_states``).
    ``nodes`` names the pipeline nodes to run here (default: all), the others running on
    other hosts of the same ROS domain (see :mod:`leapp_ros.plan.selection`). A container that
    holds every node is named ``leapp_container``, one that holds a share
    ``leapp_container_<its first node>``, apart from the other hosts' containers
    (:func:`~leapp_ros.plan.selection.container_name`). ``autostart`` sets that parameter of
    every node: False starts each unconfigured, waiting for ``ros2 lifecycle set <node>
    configure`` and ``activate``; None (default) leaves it to the params file (default true).

    Raises:
        PlanError: ``log_level`` is not one of :data:`LOG_LEVELS`, ``params_file`` is not
            an existing file, ``cpu_latency_us`` is not a whole number >= -1, or ``nodes``
            names a node the pipeline does not have; ``fused`` with ``composed`` or with a
            choice of ``nodes`` (a fused node runs all of them).
    """
    level = None if log_level is None else log_level.lower()
    if level is not None and level not in LOG_LEVELS:
        raise PlanError(f"unknown log level {log_level!r}; use one of {', '.join(LOG_LEVELS)}")
    params = None if params_file is None else Path(params_file).absolute()
    if params is not None and not params.is_file():
        raise PlanError(
            f"parameters file {params} does not exist; pass a ROS 2 parameters YAML "
            "(config/leapp_ros.yaml of the leapp_ros package shows every option)"
        )
    extra: tuple[tuple[str, ParameterValue], ...] = ()
    if cpu_latency_us is not None:
        if isinstance(cpu_latency_us, bool) or not isinstance(cpu_latency_us, int):
            raise PlanError(f"cpu_latency_us must be a whole number, got {cpu_latency_us!r}")
        if cpu_latency_us < -1:
            raise PlanError(f"cpu_latency_us must be -1 (off) or >= 0, got {cpu_latency_us}")
        extra = (("cpu_latency_us", cpu_latency_us),)
    if autostart is not None:
        extra += (("autostart", bool(autostart)),)
    cpus = usable_cpus() if pin_cpus else ()
    rules = tuple(remaps)
    for rule in rules:
        source, _, target = rule.partition(":=")
        if not source or not target or source.startswith("__"):
            raise PlanError(
                f"remap rule {rule!r} is not FROM:=TO for a topic, e.g. "
                "preprocess/joint_states:=/joint_states"
            )
    chosen = select_nodes(plan, nodes)
    subset = () if nodes is None else ("--nodes", ",".join(node.name for node in chosen))

    def pinned(index: int) -> tuple[tuple[str, ParameterValue], ...]:
        return (("cpu_affinity", (cpus[index % len(cpus)],)),) if cpus else ()

    spec_path = str(Path(plan.spec_path).absolute())
    if fused:
        if composed or (nodes is not None and len(chosen) < len(plan.nodes)):
            raise PlanError(
                "fused mode runs every node of the pipeline in one node: it takes neither "
                "composed nor a choice of nodes (--nodes); use one of the three modes"
            )
        return (
            ProcessPlan(
                label=f"{plan.name} (fused)",
                executable="leapp_fused",
                module="leapp_ros.node.fused_node",
                pipeline_nodes=tuple(node.name for node in plan.nodes),
                node_name="leapp_fused",
                namespace=plan.namespace,
                parameters=(("spec_path", spec_path), *extra, *pinned(0)),
                params_file=params,
                log_level=level,
                remaps=rules,
            ),
        )
    if composed:
        held = tuple(node.name for node in chosen)
        return (
            ProcessPlan(
                label=plan.name,
                executable="leapp_container",
                module="leapp_ros.run.container",
                pipeline_nodes=held,
                arguments=(spec_path, "--namespace", plan.namespace, *subset),
                node_name=container_name([node.name for node in plan.nodes], held),
                parameters=extra + pinned(0),
                params_file=params,
                log_level=level,
                remaps=rules,
            ),
        )
    return tuple(
        ProcessPlan(
            label=node.name,
            executable="leapp_node",
            module="leapp_ros.node.pipeline_node",
            pipeline_nodes=(node.name,),
            node_name=node.name,
            namespace=plan.namespace,
            parameters=(
                ("spec_path", spec_path),
                ("pipeline_node", node.name),
                *extra,
                *pinned(index),
            ),
            params_file=params,
            log_level=level,
            remaps=rules,
        )
        for index, node in enumerate(plan.nodes)
        if node in chosen
    )


def load_plan(
    source: PipelinePlan | str | os.PathLike[str],
    namespace: str | None = None,
    *,
    params_file: str | os.PathLike[str] | None = None,
) -> PipelinePlan:
    """``source`` as a plan: an export folder or YAML is loaded (checksums verified) and
    planned, a plan is taken as is; ``namespace`` overrides the plan's namespace, and the
    ``ports.<port>.*`` overrides of ``params_file`` (the nodes' parameters YAML) apply.

    Raises:
        SpecError: the export is missing or its spec is invalid.
        PlanError: the spec cannot be mapped onto ROS 2, ``namespace`` is invalid, or the
            parameters file cannot be read or has invalid overrides.
    """
    if isinstance(source, PipelinePlan):
        if namespace is None:
            return source
        return replace(source, namespace=check_namespace(namespace))
    from leapp import spec as spec_module

    spec = spec_module.load(source)
    ports = _port_overrides(params_file, [model.name for model in spec.models])
    return make_plan(spec, namespace=namespace, ports=ports)


def _port_overrides(params_file: str | os.PathLike[str] | None, nodes: list[str]) -> dict:
    if params_file is None:
        return {}
    import yaml

    from leapp_ros.plan.settings import port_overrides

    try:
        document = yaml.safe_load(Path(params_file).read_text(encoding="utf-8")) or {}
        return port_overrides(document, nodes)
    except (OSError, yaml.YAMLError, LeappError, AttributeError) as e:
        raise PlanError(f"parameters file {str(params_file)!r}: {e}") from e


def start_process(argv: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start ``argv`` with stdout and stderr piped, in a process group of its own (so a
    terminal's Ctrl-C reaches only the parent, which decides how to stop it). On Linux the
    process also gets SIGTERM should the thread that started it end, so it never outlives
    its runner."""
    return subprocess.Popen(
        list(argv),
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_parent_death_hook(),
    )


def describe_exit(code: int) -> str:
    """``exited with code 3`` or ``was killed by SIGKILL``."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


_prctl: Any = None  # libc's prctl once looked up; False where there is none


def _parent_death_hook() -> Callable[[], None] | None:
    """On Linux, a ``preexec_fn`` that asks for SIGTERM when the starting thread ends."""
    global _prctl
    if _prctl is None:
        _prctl = False
        if sys.platform.startswith("linux"):
            import ctypes

            with contextlib.suppress(OSError, AttributeError):
                _prctl = ctypes.CDLL(None, use_errno=True).prctl
    return _set_parent_death_signal if _prctl else None


def _set_parent_death_signal() -> None:
    _prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG, in the child between fork and exec
