"""Launch an exported leapp pipeline as a graph of ROS 2 nodes.

    ros2 launch leapp_ros pipeline.launch.py pipeline:=/path/to/export
    ros2 launch leapp_ros pipeline.launch.py pipeline:=/path/to/export/torch_pipeline.yaml \\
        namespace:=robot1 composed:=true log_level:=warn params_file:=/path/to/params.yaml \\
        cpu_latency_us:=0 pin_cpus:=true
    ros2 launch leapp_ros pipeline.launch.py pipeline:=/path/to/export autostart:=false

Arguments:
    pipeline     the export folder, or its <name>.yaml spec (required)
    namespace    ROS namespace of every node (default: the pipeline name)
    composed     false: one leapp_node process per pipeline node (default);
                 true: a leapp_container component container (<namespace>/leapp_container;
                 holding only the nodes:= share, leapp_container_<its first node>) into
                 which launch_ros loads every pipeline node as a component
                 (leapp_ros::PipelineNode), all on one executor
    fused        true: one leapp_fused node (<namespace>/leapp_fused) runs every pipeline
                 node per tick and publishes on the same topics (fewest hops; intermediate
                 topics unless publish_intermediate is false in the params file); not with
                 composed:=true or a choice of nodes (default: false)
    log_level    debug | info | warn | error | fatal (default: info)
    params_file  a ROS 2 parameters YAML for every node (firing, rate_hz, max_input_age,
                 cpu_latency_us, cpu_affinity, qos_overrides; see config/leapp_ros.yaml),
                 empty for none (default). Composed, launch_ros reads the file itself and
                 gives each node its "/**" section and the one named after its full name
                 (/<namespace>/<node>); other wildcards do not apply
    cpu_latency_us
                 the nodes' cpu_latency_us parameter: >= 0 holds a Linux CPU latency request
                 of that many microseconds while they run (faster hops between processes,
                 more power; needs write access to /dev/cpu_dma_latency), -1 none; empty
                 (default): as the params file says
    pin_cpus     true: pin each process to one CPU, round robin in pipeline order (the nodes'
                 cpu_affinity parameter); false (default): as the params file says
    nodes        the pipeline nodes to run on this host, a comma list (nodes:=preprocess),
                 empty for all (default). To split a graph over machines, launch each
                 machine's share with the same export, namespace and ROS_DOMAIN_ID; DDS
                 carries the topics between them (README: "Several machines")
    autostart    false: every node starts unconfigured and publishes nothing until
                 `ros2 lifecycle set /<namespace>/<node> configure`, then `activate` (or
                 launch_ros's lifecycle ChangeState events); true (default): as the params
                 file says (the nodes' default: configure and activate at startup)

Parameters given here (spec_path, pipeline_node, cpu_latency_us, cpu_affinity, autostart: false)
win over the params file. The spec is loaded (checksums verified) and planned when the launch
runs, so a missing export or an invalid spec stops the launch with the spec's own message.
Processes and their arguments come from leapp_ros.run.processes, the same description
`leapp-ros run` uses where ROS 2 comes from pip. Every leapp_node and leapp_fused process is a
launch_ros LifecycleNode, so launch's lifecycle events (launch_ros.events.lifecycle.ChangeState,
OnStateTransition) can target it. Composed, the container is launch_ros's standard
ComposableNodeContainer, so `ros2 component list` shows it and `ros2 component load` can add
nodes to it; its components are lifecycle nodes too, driven with `ros2 lifecycle` (launch has
no lifecycle action for components).
"""

from pathlib import Path

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import ComposableNodeContainer, LifecycleNode
from launch_ros.descriptions import ComposableNode, Parameter

import leapp.spec
from leapp_ros.plan.pipeline import PipelinePlan, PlanError, make_plan
from leapp_ros.plan.selection import node_names
from leapp_ros.run.processes import ProcessPlan, plan_processes


def generate_launch_description() -> LaunchDescription:
    """The launch arguments, and the nodes of the pipeline once they are known."""
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "pipeline", description="export folder, or its <name>.yaml spec"
            ),
            DeclareLaunchArgument(
                "namespace",
                default_value="",
                description="ROS namespace of the nodes (empty: the pipeline name)",
            ),
            DeclareLaunchArgument(
                "composed",
                default_value="false",
                choices=["true", "false"],
                description="true: every node in one leapp_container process",
            ),
            DeclareLaunchArgument(
                "fused",
                default_value="false",
                choices=["true", "false"],
                description="true: the whole pipeline in one leapp_fused node, tick by tick",
            ),
            DeclareLaunchArgument(
                "log_level",
                default_value="info",
                description="log level of the nodes: debug, info, warn, error or fatal",
            ),
            DeclareLaunchArgument(
                "params_file",
                default_value="",
                description="ROS 2 parameters YAML for every node (empty: none)",
            ),
            DeclareLaunchArgument(
                "cpu_latency_us",
                default_value="",
                description="CPU latency request of every node in us (-1: none; empty: as "
                "the params file says)",
            ),
            DeclareLaunchArgument(
                "pin_cpus",
                default_value="false",
                choices=["true", "false"],
                description="true: pin each process to one CPU, round robin in pipeline order",
            ),
            DeclareLaunchArgument(
                "nodes",
                default_value="",
                description="pipeline nodes to run on this host, comma-separated (empty: all)",
            ),
            DeclareLaunchArgument(
                "autostart",
                default_value="true",
                choices=["true", "false"],
                description="false: every node waits unconfigured for ros2 lifecycle "
                "configure and activate; true: as the params file says (default: start)",
            ),
            OpaqueFunction(function=launch_pipeline),
        ]
    )


def launch_pipeline(context, *args, **kwargs):
    """Load the spec, plan the graph and return one launch_ros LifecycleNode per process, or
    the component container with every node."""
    value = lambda name: LaunchConfiguration(name).perform(context).strip()  # noqa: E731
    spec = leapp.spec.load(value("pipeline"))
    plan = make_plan(spec, namespace=value("namespace") or None)
    composed = value("composed").lower() == "true"
    processes = plan_processes(
        plan,
        composed=composed,
        fused=value("fused").lower() == "true",
        log_level=value("log_level") or "info",
        params_file=value("params_file") or None,
        cpu_latency_us=whole_number("cpu_latency_us", value("cpu_latency_us")),
        pin_cpus=value("pin_cpus").lower() == "true",
        nodes=node_names(value("nodes")) or None,
        autostart=False if value("autostart").lower() == "false" else None,
    )
    if composed:
        return [component_container(plan, process) for process in processes]
    return [ros_node(process) for process in processes]


def whole_number(name: str, text: str) -> int | None:
    """A launch argument that is empty (None) or a whole number."""
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise PlanError(f"launch argument {name} must be a whole number, got {text!r}") from None


def ros_parameters(process: ProcessPlan, fixed: dict | None = None, rules: bool = False) -> list:
    """The params file, then ``fixed`` and the process's parameters (later ones win): as one
    dict, or with ``rules`` as one launch_ros ``Parameter`` each (a node process gets those as
    ``-p`` rules; a dict it would get as a YAML file that launch_ros writes to the temporary
    folder and never removes)."""
    parameters: list = []
    if process.params_file is not None:
        parameters.append(str(process.params_file))
    explicit = dict(fixed or {})
    explicit.update(
        (name, list(v) if isinstance(v, tuple) else v) for name, v in process.parameters
    )
    # spec_path, pipeline_node, ...: after the file, so they win
    if explicit and rules:
        parameters += [Parameter(name, value) for name, value in explicit.items()]
    elif explicit:
        parameters.append(explicit)
    return parameters


def ros_node(process: ProcessPlan) -> LifecycleNode:
    """``process`` (one leapp_node, or leapp_fused) as a launch_ros LifecycleNode of the
    leapp_ros package: launch's lifecycle events can change its state."""
    return LifecycleNode(
        package="leapp_ros",
        executable=process.executable,
        name=process.node_name,
        namespace=process.namespace,
        parameters=ros_parameters(process, rules=True) or None,
        arguments=[*process.arguments, "--ros-args", "--log-level", process.log_level or "info"],
        output="screen",
    )


def component_container(plan: PipelinePlan, process: ProcessPlan) -> ComposableNodeContainer:
    """The composed ``process`` as launch_ros's standard form: a leapp_container in the plan's
    namespace, named as the process says (``leapp_container``, or after the share of the
    nodes it holds), and one component per pipeline node."""
    spec_path = str(Path(plan.spec_path).absolute())
    components = [
        ComposableNode(
            package="leapp_ros",
            plugin="leapp_ros::PipelineNode",
            name=node,
            namespace=plan.namespace,
            parameters=ros_parameters(process, {"spec_path": spec_path, "pipeline_node": node}),
            # values between the pipeline's nodes skip the middleware
            # (leapp_ros.node.intra_process)
            extra_arguments=[{"use_intra_process_comms": True}],
        )
        for node in process.pipeline_nodes
    ]
    return ComposableNodeContainer(
        package="leapp_ros",
        executable="leapp_container",
        name=process.node_name,
        namespace=plan.namespace,
        composable_node_descriptions=components,
        arguments=["--ros-args", "--log-level", process.log_level or "info"],
        output="screen",
    )
