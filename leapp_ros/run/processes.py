"""The operating-system processes that run a pipeline plan, and their command lines.

:func:`plan_processes` is the one description of what a graph starts, from its plan and its
:class:`~leapp_ros.run.deployment.GraphOptions`: one ``leapp_node`` process per pipeline node,
every node in one ``leapp_container`` process, or one ``leapp_fused`` node. The runner
(:mod:`leapp_ros.run.runner`, ``leapp-ros run``) starts these processes itself with ``python
-m <module>``; launch (:mod:`leapp_ros.run.launch_description`: ``pipeline.launch.py`` and the
launch files of generated packages) hands the same ones to launch_ros, which starts the
package's executables. Both give each process the same arguments, parameters and remaps, in
the same order. :func:`start_process` starts one the way the runner needs. No rclpy import.
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
from leapp_ros.run.deployment import Deployment, GraphOptions
from leapp_ros.run.safe_outputs import FUSED_NODE, plan_safe_outputs

__all__ = [
    "STOP_TIMEOUT_S",
    "ProcessPlan",
    "describe_exit",
    "graph_options",
    "load_plan",
    "plan_processes",
    "start_process",
]

#: How long a node process has from SIGINT to its exit before SIGTERM (``leapp-ros run`` and the
#: launch files alike): it publishes its last word at once, but the teardown of torch and of its
#: DDS participant on a loaded machine can outlast ``ros2 launch``'s own default of 5 s.
STOP_TIMEOUT_S = 10.0

STAND_IN_NAME = "_leapp_stand_in"  # hidden from `ros2 node list`, as the runner's watch

ParameterValue = str | bool | int | tuple[int, ...]


@dataclass(frozen=True)
class ProcessPlan:
    """One process of a graph, described for both :mod:`leapp_ros.run.runner` and ``launch_ros``.

    ``executable`` is the console script (``leapp_node`` / ``leapp_container`` /
    ``leapp_fused``) that ``launch_ros`` starts; ``module`` is what the runner runs with
    ``python -m`` (the module of that script). ``arguments`` come before ``--ros-args``;
    ``node_name``, ``namespace``, ``remaps``, ``params_file``, ``parameters`` and
    ``log_level`` become ROS arguments, in that order (so ``parameters`` win over the same
    names in ``params_file``). ``remaps`` are plain ROS remap rules
    (``preprocess/joint_states:=/joint_states``). ``pipeline_nodes`` are the nodes whose
    ``ready`` status records make the process ready; ``firing`` says, per pipeline node, when
    it runs (``timer at 50 Hz``, ``inputs``), as the plan has it (the spec's rates and the
    parameters file applied), for the runner's and launch's logs.
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
    firing: tuple[tuple[str, str], ...] = ()

    def describe_firing(self) -> str:
        """``policy: timer at 50 Hz; post: inputs``."""
        return "; ".join(f"{node}: {text}" for node, text in self.firing)

    def ros_arguments(self, *, naming: bool = True) -> list[str]:
        """The arguments that follow ``--ros-args``; without the node name and namespace
        remaps when not ``naming`` (launch_ros adds those itself)."""
        args: list[str] = []
        if naming and self.node_name is not None:
            args += ["-r", f"__node:={self.node_name}"]
        if naming and self.namespace is not None:
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
    plan: PipelinePlan, options: GraphOptions | Deployment | None = None
) -> tuple[ProcessPlan, ...]:
    """The processes that run ``plan`` with ``options`` (default: ``GraphOptions()``; a
    :class:`Deployment` alone: that deployment with default options).

    - :attr:`Deployment.PROCESSES`: one ``leapp_node`` per pipeline node (``-p spec_path``,
      ``-p pipeline_node``), in pipeline order;
    - :attr:`Deployment.COMPOSED`: one ``leapp_container`` that pre-loads the nodes (``EXPORT
      --namespace NS [--nodes ...]``), named ``leapp_container`` when it holds every node and
      ``leapp_container_<its first node>`` when it holds a share, apart from the other hosts'
      containers (:func:`~leapp_ros.plan.selection.container_name`);
    - :attr:`Deployment.FUSED`: one ``leapp_fused`` node running every node per tick;

    and last, when an output of these nodes has a ``hold`` or ``values`` safe action in the
    parameters file (:func:`~leapp_ros.run.safe_outputs.plan_safe_outputs`), the
    ``leapp_stand_in`` process that publishes it while a node's process is dead
    (:mod:`leapp_ros.run.stand_in`; ``EXPORT --namespace NS --deployment D [--nodes ...]
    [--params-file ...]``, the remaps and the log level; ready as soon as it runs).

    Every process is named and namespaced with ``-r __node:=`` / ``-r __ns:=`` (the
    namespace: ``options.namespace``, else the plan's) and gets the options' remaps, the
    parameters file, then the parameters set here (spec_path, pipeline_node,
    ``cpu_latency_us``, ``cpu_affinity`` with ``pin_cpus``: one CPU of those this process may
    use per process, round robin in pipeline order; ``autostart: false``), then the log level.

    Raises:
        PlanError: ``options.nodes`` names a node the pipeline does not have, or names none;
            a fused deployment with a choice of nodes other than all of them (a fused node
            runs every node); an invalid safe action in the parameters file.
    """
    options = graph_options(options)
    if options.namespace is not None and options.namespace != plan.namespace:
        plan = replace(plan, namespace=options.namespace)
    stand_in = _stand_in(plan, options)
    extra = (("stand_in", stand_in[0].node_name),) if stand_in else ()
    return (*_node_processes(plan, options, extra), *stand_in)


def _stand_in(plan: PipelinePlan, options: GraphOptions) -> tuple[ProcessPlan, ...]:
    """The stand-in process, when some output's safe action is not silent."""
    if not plan_safe_outputs(plan, options):
        return ()
    held = tuple(node.name for node in select_nodes(plan, options.nodes))
    arguments = [str(Path(plan.spec_path).absolute()), "--namespace", plan.namespace]
    arguments += ["--deployment", options.deployment.value]
    if options.nodes is not None:
        arguments += ["--nodes", ",".join(held)]
    if options.params_file is not None:
        arguments += ["--params-file", str(options.params_file)]
    everything = len(held) == len(plan.nodes)
    return (
        ProcessPlan(
            label="stand-in",
            executable="leapp_stand_in",
            module="leapp_ros.run.stand_in",
            pipeline_nodes=(),
            arguments=tuple(arguments),
            node_name=STAND_IN_NAME if everything else f"{STAND_IN_NAME}_{held[0]}",
            namespace=plan.namespace,
            log_level=options.log_level,
            remaps=options.remaps,
        ),
    )


def _node_processes(
    plan: PipelinePlan, options: GraphOptions, extra: tuple[tuple[str, ParameterValue], ...]
) -> tuple[ProcessPlan, ...]:
    chosen = select_nodes(plan, options.nodes)
    if options.cpu_latency_us is not None:
        extra += (("cpu_latency_us", options.cpu_latency_us),)
    if options.autostart is not None:
        extra += (("autostart", options.autostart),)
    cpus = usable_cpus() if options.pin_cpus else ()

    def pinned(index: int) -> tuple[tuple[str, ParameterValue], ...]:
        return (("cpu_affinity", (cpus[index % len(cpus)],)),) if cpus else ()

    spec_path = str(Path(plan.spec_path).absolute())

    def firing(nodes: Any) -> tuple[tuple[str, str], ...]:
        return tuple((node.name, node.firing.describe()) for node in nodes)

    common: dict[str, Any] = {
        "namespace": plan.namespace,
        "params_file": options.params_file,
        "log_level": options.log_level,
        "remaps": options.remaps,
    }
    if options.deployment is Deployment.FUSED:
        if len(chosen) < len(plan.nodes):
            raise PlanError(
                "a fused deployment runs every node of the pipeline in one node: it takes no "
                "choice of some nodes (--nodes, nodes:=); run a share in another deployment"
            )
        return (
            ProcessPlan(
                label=f"{plan.name} (fused)",
                executable="leapp_fused",
                module="leapp_ros.node.fused_node",
                pipeline_nodes=tuple(node.name for node in plan.nodes),
                node_name="leapp_fused",
                parameters=(("spec_path", spec_path), *extra, *pinned(0)),
                firing=firing(plan.nodes),
                **common,
            ),
        )
    if options.deployment is Deployment.COMPOSED:
        held = tuple(node.name for node in chosen)
        subset = () if options.nodes is None else ("--nodes", ",".join(held))
        return (
            ProcessPlan(
                label=plan.name,
                executable="leapp_container",
                module="leapp_ros.run.container",
                pipeline_nodes=held,
                arguments=(spec_path, "--namespace", plan.namespace, *subset),
                node_name=container_name([node.name for node in plan.nodes], held),
                parameters=extra + pinned(0),
                firing=firing(chosen),
                **common,
            ),
        )
    return tuple(
        ProcessPlan(
            label=node.name,
            executable="leapp_node",
            module="leapp_ros.node.pipeline_node",
            pipeline_nodes=(node.name,),
            node_name=node.name,
            parameters=(
                ("spec_path", spec_path),
                ("pipeline_node", node.name),
                *extra,
                *pinned(index),
            ),
            firing=firing([node]),
            **common,
        )
        for index, node in enumerate(plan.nodes)
        if node in chosen
    )


def graph_options(options: GraphOptions | Deployment | str | None = None) -> GraphOptions:
    """``options`` as :class:`GraphOptions`: None gives the defaults, a deployment (or its
    name) the defaults with that deployment."""
    if isinstance(options, GraphOptions):
        return options
    return GraphOptions() if options is None else GraphOptions(Deployment.parse(options))


def load_plan(
    source: PipelinePlan | str | os.PathLike[str],
    namespace: str | None = None,
    *,
    params_file: str | os.PathLike[str] | None = None,
) -> PipelinePlan:
    """``source`` as a plan: an export folder or YAML is loaded (checksums verified) and
    planned, a plan is taken as is; ``namespace`` overrides the plan's namespace, and the
    ``ports.<port>.*`` overrides and the firing parameters (``firing``, ``rate_hz``,
    ``triggers``, ...: :func:`~leapp_ros.plan.firing_settings.file_firing`) of
    ``params_file`` (the nodes' parameters YAML) apply, as each node applies them.

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
    if params_file is None:
        return make_plan(spec, namespace=namespace)
    import yaml

    from leapp_ros.plan.firing_settings import file_firing
    from leapp_ros.plan.param_sections import unreached_sections
    from leapp_ros.plan.settings import port_overrides

    where = f"parameters file {str(params_file)!r}"
    names = [model.name for model in spec.models]
    space = check_namespace(spec.name if namespace is None else namespace)  # as make_plan's
    try:
        document = yaml.safe_load(Path(params_file).read_text(encoding="utf-8")) or {}
        unreached = unreached_sections(document, [*names, FUSED_NODE], space)
        if unreached:
            raise PlanError(unreached)
        ports = port_overrides(document, names, space)
    except (OSError, yaml.YAMLError, LeappError, AttributeError) as e:
        raise PlanError(f"{where}: {e}") from e
    plan = make_plan(spec, namespace=space, ports=ports)
    try:
        return file_firing(plan, document)
    except LeappError as e:
        raise PlanError(f"{where}: {e}") from e


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
