"""What a pipeline becomes on ROS 2, in words: ``leapp-ros inspect EXPORT``.

:func:`describe_plan` renders a :class:`~leapp_ros.plan.pipeline.PipelinePlan` as aligned tables:

- the nodes, with their backend, artifact and firing rule (``inputs`` or ``timer``, and the
  rate: the spec's ``pipeline.configs.node_frequency`` or ``frequency``, or ``rate_hz`` from
  the parameters file that ``--params-file`` names);
- every publisher (one per output) and every subscription (one per input fed over a topic,
  and a node's packed input) with message type, dtype, shape, QoS and whether it fires the
  node (``newest value``: an input outside the node's ``triggers``);
- the robot messages: every port that travels in a standard robot message (JointState, Imu,
  Twist, ...) with the fields or joint names it carries, and every port with a ``kind`` that
  keeps its MultiArray, with the reason;
- the feedback and state edges (values used on the next tick; state never leaves its node);
- what ``ros2 topic list -t`` shows once the graph runs, plus the hidden status topic that
  ``ros2 topic list --include-hidden-topics`` adds.

Example::

    from leapp_ros.tools.inspection import describe_plan
    from leapp_ros.run.processes import load_plan

    print(describe_plan(load_plan("exports/torch_pipeline")))

No rclpy import: this works wherever ``leapp`` does.
"""

from __future__ import annotations

from collections.abc import Sequence

from leapp_ros.plan.pipeline import (
    METADATA_QOS,
    STATUS_TOPIC,
    InputPlan,
    NodePlan,
    PipelinePlan,
    QosPlan,
)

__all__ = [
    "STATUS_MESSAGE_TYPE",
    "describe_plan",
    "format_qos",
    "format_shape",
    "format_table",
    "topic_list",
]

STATUS_MESSAGE_TYPE = "std_msgs/msg/String"
_INDENT = "  "


def describe_plan(plan: PipelinePlan, *, show_spec_path: bool = True) -> str:
    """The whole plan as text, one section per aspect, ending with a newline.

    Args:
        plan: the plan to describe.
        show_spec_path: include the spec's file path (off where the text must not depend on
            where the export lies, e.g. in generated files).
    """
    header = [("pipeline", plan.name)]
    if show_spec_path:
        header.append(("spec", str(plan.spec_path)))
    header.append(("namespace", plan.namespace))
    header.append(("rate", _pipeline_rate(plan)))
    initial = plan.initial_values.name if plan.initial_values is not None else "none"
    header.append(("initial values", initial))
    width = max(len(key) for key, _ in header) + 1
    sections = [
        [f"{key + ':':<{width}} {value}" for key, value in header],
        ["nodes", *format_table(_NODE_HEADER, [_node_row(node) for node in plan.nodes])],
        ["publishers", *format_table(_PUBLISHER_HEADER, _publisher_rows(plan))],
        ["subscriptions", *_subscription_lines(plan)],
        ["robot messages", *format_table(_ROBOT_HEADER, _robot_rows(plan))],
        ["feedback and state", *_feedback_lines(plan)],
        ["ros2 topic list -t", *topic_list(plan, notes=True)],
    ]
    return "\n\n".join("\n".join(lines) for lines in sections) + "\n"


def topic_list(plan: PipelinePlan, *, notes: bool = False) -> list[str]:
    """``ros2 topic list -t`` lines of the running graph (``/ns/node/port [type]``), sorted.

    With ``notes``, indented and followed by the hidden status topic and the two topics every
    ROS 2 graph has.
    """
    topics = sorted([*plan.topics(), *plan.packed_topics()])
    lines = [f"{name} [{kind}]" for name, kind in topics]
    if not notes:
        return lines
    status = f"{plan.resolve(STATUS_TOPIC)} [{STATUS_MESSAGE_TYPE}]"
    return [
        *(_INDENT + line for line in lines),
        "",
        f"{_INDENT}hidden (shown with ros2 topic list -t --include-hidden-topics):",
        f"{_INDENT}{status}  node status as JSON, {format_qos(METADATA_QOS)}",
        f"{_INDENT}every node also publishes /diagnostics and <node>/transition_event (lifecycle)",
        f"{_INDENT}every ROS 2 graph also has /parameter_events and /rosout",
    ]


def format_qos(qos: QosPlan) -> str:
    """``reliable, volatile, depth 1``."""
    return f"{qos.reliability}, {qos.durability}, depth {qos.depth}"


def format_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, indent: str = _INDENT
) -> list[str]:
    """``header`` and ``rows`` as lines with left-aligned columns two spaces apart; a table
    without rows is the header and an indented ``(none)``."""
    if not rows:
        return [indent + "(none)"]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    return [
        (
            indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        ).rstrip()
        for row in (header, *rows)
    ]


_NODE_HEADER = ("NODE", "BACKEND", "ARTIFACT", "FIRING", "RATE", "MAX INPUT AGE")
_PUBLISHER_HEADER = ("TOPIC", "TYPE", "DTYPE", "SHAPE", "NODE/PORT", "QOS")
_ROBOT_HEADER = ("NODE/PORT", "TOPIC", "MESSAGE", "CARRIES")
_SUBSCRIPTION_HEADER = ("TOPIC", "TYPE", "DTYPE", "SHAPE", "NODE/PORT", "KIND", "TRIGGERS", "QOS")


def _pipeline_rate(plan: PipelinePlan) -> str:
    rate = plan.frequency
    own = len({node.firing.rate_hz for node in plan.nodes}) > 1
    tail = "; some nodes at rates of their own: see nodes" if own else ""
    if rate is None:
        return "none (pipeline.configs.frequency not set; a timer node needs rate_hz)" + tail
    text = f"{_number(rate)} Hz (pipeline.configs.frequency; the timer rate of firing 'timer')"
    return text + tail


def _node_row(node: NodePlan) -> tuple[str, ...]:
    parameters = node.model.parameters
    firing = node.firing
    mode = firing.mode
    if mode == "inputs" and not any(port.triggers for port in node.inputs):
        mode = "timer (no triggering input)" if firing.rate_hz else "none: set rate_hz"
    return (
        node.name,
        parameters.backend or "-",
        parameters.model_path or "-",
        mode,
        f"{_number(firing.rate_hz)} Hz" if firing.rate_hz else "-",
        f"{_number(firing.max_input_age_s)} s" if firing.max_input_age_s else "-",
    )


def _publisher_rows(plan: PipelinePlan) -> list[tuple[str, ...]]:
    return [
        (
            plan.resolve(output.topic),
            output.message_type,
            output.dtype,
            format_shape(output.shape),
            f"{node.name}/{output.port}",
            format_qos(output.qos),
        )
        for node in plan.nodes
        for output in node.outputs
    ]


def _robot_rows(plan: PipelinePlan) -> list[tuple[str, ...]]:
    """Ports in robot messages, and ports with a kind that keep their MultiArray (and why)."""
    rows = []
    for node in plan.nodes:
        kinds = {port.name: port.kind for port in (*node.model.inputs, *node.model.outputs)}
        for port in (*node.inputs, *node.outputs):
            if port.binding is None and not (kinds.get(port.port) and port.note):
                continue
            if isinstance(port, InputPlan) and port.kind != "external":
                continue
            carries = port.binding.describe() if port.binding is not None else port.note
            rows.append((f"{node.name}/{port.port}", plan.resolve(port.topic or ""),
                         port.message_type, carries))  # fmt: skip
    return rows


def _subscription_lines(plan: PipelinePlan) -> list[str]:
    rows = []
    for node in plan.nodes:
        fires = node.triggering()
        for index, port in enumerate(node.inputs):
            if port.topic is None:
                continue
            triggers = "newest value" if port.triggers and index not in fires else "no"
            rows.append((plan.resolve(port.topic), port.message_type, port.dtype,
                         format_shape(port.shape), f"{node.name}/{port.port}", port.kind,
                         "yes" if index in fires else triggers, format_qos(port.qos)))  # fmt: skip
        if node.packed is not None:  # every external MultiArray input in one message
            size = sum(_elements(node.input(name).shape) for name in node.packed.ports)
            rows.append((plan.resolve(node.packed.topic), node.packed.message_type,
                         node.packed.dtype, f"[{size}]",
                         f"{node.name}/{'+'.join(node.packed.ports)}", "packed",
                         "as its ports", format_qos(node.packed.qos)))  # fmt: skip
    return format_table(_SUBSCRIPTION_HEADER, rows)


def _elements(shape: Sequence[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def _feedback_lines(plan: PipelinePlan) -> list[str]:
    rows = []
    for node in plan.nodes:
        for port in node.inputs:
            if port.kind == "feedback":
                where = f"over {plan.resolve(port.topic or '')}, value of the previous tick"
            elif port.kind == "state":
                where = "inside the node (no topic), value of the previous tick"
            else:
                continue
            rows.append((f"{port.source} -> {node.name}/{port.port}", port.kind, where))
    lines = format_table(("EDGE", "KIND", "DELIVERED"), rows)
    if rows:
        source = plan.initial_values.name if plan.initial_values is not None else "MISSING"
        lines.append(f"{_INDENT}first tick: initial values from {source}")
    return lines


def format_shape(shape: Sequence[int]) -> str:
    """``[4, 6]``; ``[]`` for a scalar."""
    return "[" + ", ".join(str(size) for size in shape) + "]"


def _number(value: float | None) -> str:
    """``50`` rather than ``50.0``; ``0.25`` as is."""
    if value is None:
        return "-"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
