"""``config/<pipeline>.yaml`` of a generated package: the ROS 2 parameters of every node, with
the node's topics, QoS override examples and the meaning of each setting as comments. This is
the file users edit; the launch files pass it to every node and set ``spec_path`` themselves."""

from __future__ import annotations

from leapp_ros.plan.pipeline import NodePlan, PipelinePlan, QosPlan
from leapp_ros.tools.inspection import format_shape
from leapp_ros.tools.templates.package_info import PackageInfo

__all__ = ["parameters_yaml"]


def parameters_yaml(info: PackageInfo) -> str:
    """One ``/<namespace>/<node>: ros__parameters:`` section per node, in pipeline order."""
    plan = info.plan
    frequency = plan.frequency
    rate = f"{frequency:g} Hz" if frequency else "not set: a timer needs rate_hz"
    lines = [
        f"# ROS 2 parameters of the nodes of the leapp pipeline {plan.name}",
        f"# (package {info.name}).",
        "#",
        "# The launch files give this file to every node (launch argument params_file) and set",
        "# spec_path and pipeline_node themselves. Each section is named after a node's full",
        f"# name, {plan.namespace}/<node>: launched under another namespace (namespace:=...),",
        "# the sections must be renamed to match.",
        "#",
        "# Settings of every node:",
        '#   firing         "inputs": run as soon as every triggering input (external or',
        "#                  data_flow) has a new message since the last run; feedback and state",
        "#                  inputs never trigger (they start from the initial values).",
        '#                  "timer": run at rate_hz on the latest value of every input.',
        "#   rate_hz        timer rate in Hz; 0.0 means the spec's: the node's own rate",
        "#                  (pipeline.configs.node_frequency), else the pipeline's",
        f"#                  (pipeline.configs.frequency: {rate}).",
        "#   max_input_age  > 0.0: skip a run whose triggering inputs include one older than",
        '#                  this many seconds (counted as "stale" in _leapp/status);',
        "#                  0.0: no limit.",
        "#   cpu_latency_us >= 0: hold a Linux CPU latency request of this many microseconds",
        "#                  while the node runs (idle CPUs wake faster; 0 keeps them polling),",
        "#                  which makes hops between processes faster at the price of power;",
        "#                  needs write access to /dev/cpu_dma_latency. -1: leave it alone.",
        "#   cpu_affinity   the CPUs the node's process may run on, e.g. [1]; consecutive nodes",
        "#                  on different CPUs are fastest. Unset (commented out): anywhere.",
        "#   raw_messages   true (default): data topics as serialized CDR bytes, no rclpy",
        "#                  message objects (same messages on the wire); false: rclpy's.",
        "#   qos_overrides  per absolute topic name, publisher or subscription, one of",
        "#                  reliability (reliable | best_effort), history (keep_last | keep_all),",
        "#                  depth (an integer). Defaults: publishers reliable, subscriptions",
        "#                  best_effort, keep_last, depth 1, volatile. A reliable subscription",
        "#                  needs a reliable publisher. Uncomment and edit the examples below.",
        "#",
        "# On a robot (README of leapp_ros: On a robot; its config/leapp_ros.yaml shows each):",
        "#   autostart        false: start unconfigured, wait for ros2 lifecycle configure and",
        "#                    activate (the launch files' argument autostart:=false does it too)",
        "#   input_timeout_ms > 0.0: publish the safe action when no input set came this long",
        "#   estop_topic      a std_msgs/Bool topic: true engages the e-stop, false releases it",
        "#   ports.<output>.safe_action / safe_values / min / max / max_step: what an output",
        "#                    publishes instead of commands, and limits on every command",
    ]
    for node in plan.nodes:
        lines += ["", *_node_section(plan, node)]
    return "\n".join(lines) + "\n"


def _node_section(plan: PipelinePlan, node: NodePlan) -> list[str]:
    parameters = node.model.parameters
    artifact = parameters.model_path or "no artifact"
    lines = [
        f"{plan.resolve(node.name)}:",
        "  ros__parameters:",
        f"    # model: {artifact} (backend {parameters.backend or 'none'})",
    ]
    subscribed = [port for port in node.inputs if port.topic is not None]
    if subscribed:
        lines.append("    # subscribes to:")
        width = max(len(plan.resolve(port.topic or "")) for port in subscribed)
        for port in subscribed:
            trigger = "triggers" if port.triggers else "never triggers"
            lines.append(
                f"    #   {plan.resolve(port.topic or ''):<{width}}  {port.message_type} "
                f"{port.dtype} {format_shape(port.shape)}  ({port.kind}, {trigger})"
            )
    state = [port.port for port in node.inputs if port.kind == "state"]
    if state:
        lines.append(f"    # state kept inside the node (no topic): {', '.join(state)}")
    lines.append("    # publishes:")
    width = max((len(plan.resolve(port.topic)) for port in node.outputs), default=0)
    for port in node.outputs:
        lines.append(
            f"    #   {plan.resolve(port.topic):<{width}}  {port.message_type} "
            f"{port.dtype} {format_shape(port.shape)}"
        )
    lines += [
        f"    # runs: {node.firing.describe()}",
        f'    firing: "{node.firing.mode}"',
        "    rate_hz: 0.0",
        "    max_input_age: 0.0",
        "    cpu_latency_us: -1",
        "    # cpu_affinity: [0]",
        *_qos_examples(plan, node),
    ]
    return lines


def _qos_examples(plan: PipelinePlan, node: NodePlan) -> list[str]:
    """Commented ``qos_overrides`` entries with the current values of every topic."""
    sides: dict[str, dict[str, QosPlan]] = {}
    for port in node.outputs:
        sides.setdefault(plan.resolve(port.topic), {})["publisher"] = port.qos
    for port in node.inputs:
        if port.topic is not None:
            sides.setdefault(plan.resolve(port.topic), {})["subscription"] = port.qos
    lines = ["    # qos_overrides:"] if sides else []
    for topic, entries in sides.items():
        lines.append(f"    #   {topic}:")
        for side, qos in entries.items():
            lines += [
                f"    #     {side}:",
                f"    #       reliability: {qos.reliability}",
                f"    #       depth: {qos.depth}",
            ]
    return lines
