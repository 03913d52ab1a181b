"""Launch an exported leapp pipeline as a graph of ROS 2 nodes.

    ros2 launch leapp_ros pipeline.launch.py pipeline:=/path/to/export
    ros2 launch leapp_ros pipeline.launch.py pipeline:=/path/to/export/torch_pipeline.yaml \\
        deployment:=composed namespace:=robot1 log_level:=warn \\
        params_file:=/path/to/params.yaml cpu_latency_us:=0 pin_cpus:=true
    ros2 launch leapp_ros pipeline.launch.py pipeline:=/path/to/export autostart:=false

Arguments:
    pipeline     the export folder, or its <name>.yaml spec (required)
    deployment   processes (default): one leapp_node process per pipeline node;
                 composed: every node in one leapp_container process, on one executor
                 (<namespace>/leapp_container, or leapp_container_<its first node> for a
                 nodes:= share), launch_ros's ComposableNodeContainer; fused: one
                 leapp_fused node (<namespace>/leapp_fused) running every node per tick
                 (fewest hops; not with a choice of nodes). composed:=true and fused:=true
                 are the older forms
    namespace    ROS namespace of every node (default: the pipeline name)
    log_level    debug | info | warn | error | fatal (default: the nodes' own, info)
    params_file  a ROS 2 parameters YAML for every node (firing, rate_hz, max_input_age,
                 cpu_latency_us, cpu_affinity, qos_overrides; see config/leapp_ros.yaml),
                 empty for none (default)
    cpu_latency_us
                 the nodes' cpu_latency_us parameter: >= 0 holds a Linux CPU latency request
                 of that many microseconds while they run (faster hops between processes,
                 more power; needs write access to /dev/cpu_dma_latency), -1 none; empty
                 (default): as the params file says
    pin_cpus     true: pin each process to one CPU, round robin in pipeline order (the nodes'
                 cpu_affinity parameter); false (default): as the params file says
    remaps       ROS remap rules FROM:=TO for every node, separated by spaces
                 (remaps:=preprocess/joint_states:=/joint_states)
    nodes        the pipeline nodes to run on this host, a comma list (nodes:=preprocess),
                 empty for all (default). To split a graph over machines, launch each
                 machine's share with the same export, namespace and ROS_DOMAIN_ID; DDS
                 carries the topics between them (docs: how-to, several machines)
    autostart    false: every node starts unconfigured and publishes nothing until
                 `ros2 lifecycle set /<namespace>/<node> configure`, then `activate` (or
                 launch_ros's lifecycle ChangeState events); true (default): as the params
                 file says (the nodes' default: configure and activate at startup)

The processes, their arguments and parameters come from leapp_ros.run.processes.plan_processes,
the description `leapp-ros run` starts where ROS 2 comes from pip: both start the same
processes with the same parameters (spec_path, pipeline_node, cpu_latency_us, cpu_affinity,
autostart: false, after the params file, so they win over it). The spec is loaded (checksums
verified) and planned when the launch runs, so a missing export or an invalid spec stops the
launch with the spec's own message. leapp_ros.run.launch_description turns the processes into
launch_ros actions: every leapp_node and leapp_fused process is a LifecycleNode, which launch's
lifecycle events (launch_ros.events.lifecycle.ChangeState, OnStateTransition) can target;
composed, the leapp_container pre-loads the nodes and serves composition_interfaces' services,
so `ros2 component list` shows them; they are lifecycle nodes too, driven with `ros2
lifecycle`.
"""

from leapp_ros.run.launch_description import pipeline_launch_description


def generate_launch_description():
    """The launch arguments, and the graph's processes once they have values."""
    return pipeline_launch_description()
