"""From a pipeline spec to a ROS 2 plan: nodes, topics, message types, QoS and firing rules.

Pure data and no rclpy import, so launch files, ``leapp-ros inspect`` and the generator can use it
anywhere. The mapping (see the project's design brief):

- namespace: the pipeline name unless overridden; ROS node name: the pipeline node name;
- every output of every node is published on ``<node>/<output>`` (relative, so it lands under
  the namespace); an input fed by ``data_flow`` or ``feedback_flow`` subscribes to the
  producer's topic; an external input (``pipeline.inputs``) subscribes to ``<node>/<input>``;
  a feedback edge from a node to itself (recurrent state) stays inside the node;
- messages: the ``std_msgs`` MultiArray of the tensor's dtype (bool as UInt8, float16 and
  bfloat16 as Float32), except the external inputs and the outputs whose meaning (``kind``,
  ``element_names``, or the node's ``ports.<port>.*`` overrides) picks a standard robot message
  (:mod:`leapp_ros.plan.bindings`): those inputs subscribe to ``<node>/<stem>`` (``joint_states``,
  ``imu``, ``cmd_vel``, ``pose``, ``odom``), one topic per message type, except images and
  clouds (``<node>/<port>``, one per port); an output that another node consumes keeps its
  MultiArray (both ends are ours);
- QoS: depth 1, volatile; publishers reliable, subscriptions best effort ("newest wins");
- firing: when every triggering input has a new message, or on a timer (``rate_hz``, by default
  ``pipeline.configs.frequency``) with the latest values; a node named in
  ``pipeline.configs.node_frequency`` (``{node: Hz}``, ours: LEAPP's ``configs`` takes any
  key, and a LEAPP reader ignores it) runs on a timer at that rate;
- packed input: a node with two or more external MultiArray inputs also subscribes to
  ``<node>/packed_inputs``, one MultiArray carrying all of them (:class:`PackedPlan`,
  :mod:`leapp_ros.messages.packed_inputs`), so a client can send the inputs of one instant
  as one message.

The plan's values (:class:`PipelinePlan`, :class:`NodePlan`, the port plans, QoS profiles and
topic names) are defined in :mod:`leapp_ros.plan.graph_plan`; this module is where the rest of
leapp_ros imports them from, with :func:`make_plan`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from leapp.spec import ModelSpec, Spec, TensorSpec
from leapp_ros.plan.bindings import Binding, BindingError, PortOverride, bind_port
from leapp_ros.plan.graph_plan import (
    DIAGNOSTICS_TOPIC,
    METADATA_QOS,
    PUBLISHER_QOS,
    STAND_IN_TOPIC,
    STATUS_TOPIC,
    SUBSCRIPTION_QOS,
    TRANSITION_EVENTS,
    Firing,
    InputPlan,
    NodePlan,
    OutputPlan,
    PackedPlan,
    PipelinePlan,
    PlanError,
    QosPlan,
    check_name,
    check_namespace,
    message_type,
)

__all__ = [
    "DIAGNOSTICS_TOPIC",
    "METADATA_QOS",
    "PACKED_TOPIC",
    "PUBLISHER_QOS",
    "STAND_IN_TOPIC",
    "STATUS_TOPIC",
    "SUBSCRIPTION_QOS",
    "TRANSITION_EVENTS",
    "Firing",
    "InputPlan",
    "NodePlan",
    "OutputPlan",
    "PackedPlan",
    "PipelinePlan",
    "PlanError",
    "QosPlan",
    "check_namespace",
    "make_plan",
    "message_type",
    "packed_dtype",
]

PACKED_TOPIC = "packed_inputs"  # <node>/packed_inputs: every external MultiArray input at once

# dtypes whose every value a float64 holds exactly (a packed message of mixed dtypes)
_EXACT_IN_FLOAT64 = {
    "float16", "bfloat16", "float32", "float64", "bool",
    "int8", "int16", "int32", "uint8", "uint16", "uint32",
}  # fmt: skip


def make_plan(
    spec: Spec,
    *,
    namespace: str | None = None,
    firing: Mapping[str, Firing] | None = None,
    ports: Mapping[str, Mapping[str, PortOverride]] | None = None,
) -> PipelinePlan:
    """Map ``spec`` onto ROS 2. ``firing`` overrides the firing rule per node name, ``ports``
    the message choice per node and port (the nodes' ``ports.<port>.*`` parameters)."""
    firing = dict(firing or {})
    ports = ports or {}
    unknown = sorted(set(firing) - {m.name for m in spec.models})
    if unknown:
        raise PlanError(f"firing given for unknown node(s) {unknown} of pipeline {spec.name!r}")
    default = _default_firing(spec.pipeline.configs)
    own = _node_rates(spec)
    feeds = _sources(spec)
    frequency = default.rate_hz
    consumed = {source for kind, source in feeds.values() if kind != "state"}
    outputs = {
        f"{model.name}/{port.name}": _output_plan(
            model, port, ports.get(model.name, {}), frequency, consumed
        )
        for model in spec.models
        for port in model.outputs
    }
    nodes = []
    for model in spec.models:
        check_name("node name", model.name)
        overrides = ports.get(model.name, {})
        inputs = tuple(
            _input_plan(model, port, feeds.get(f"{model.name}/{port.name}"), overrides)
            for port in model.inputs
        )
        _check_shared_topics(model.name, inputs)
        node_outputs = tuple(outputs[f"{model.name}/{port.name}"] for port in model.outputs)
        nodes.append(
            NodePlan(
                model.name,
                model,
                inputs,
                node_outputs,
                firing.get(model.name, own.get(model.name, default)),
                _packed_plan(model, inputs),
            )
        )
    initial = spec.pipeline.initial_values
    return PipelinePlan(
        name=spec.name,
        namespace=check_namespace(spec.name if namespace is None else namespace),
        spec_path=spec.path if spec.path is not None else Path(f"{spec.name}.yaml"),
        nodes=tuple(nodes),
        initial_values=spec.directory / initial if initial and spec.path is not None else None,
        frequency=frequency,
    )


def _default_firing(configs: Mapping[str, Any]) -> Firing:
    """Run on inputs; a timer, when asked for, defaults to ``pipeline.configs.frequency``."""
    frequency = configs.get("frequency")
    if frequency is not None and (not isinstance(frequency, (int, float)) or frequency <= 0):
        raise PlanError(f"pipeline.configs.frequency must be a positive number, got {frequency!r}")
    return Firing(rate_hz=float(frequency) if frequency is not None else None)


def _node_rates(spec: Spec) -> dict[str, Firing]:
    """The timer of each node ``pipeline.configs.node_frequency`` gives a rate of its own."""
    rates = spec.pipeline.configs.get("node_frequency")
    if rates is None:
        return {}
    names = [model.name for model in spec.models]
    if not isinstance(rates, Mapping):
        raise PlanError(
            f"pipeline.configs.node_frequency must map node names to rates in Hz, such as "
            f"{{{names[0]}: 50}}, got {rates!r}"
        )
    found = {}
    for node, rate in rates.items():
        if node not in names:
            raise PlanError(
                f"pipeline.configs.node_frequency names {node!r}, which is no node of "
                f"pipeline {spec.name!r}; its nodes are {names}"
            )
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
            raise PlanError(
                f"pipeline.configs.node_frequency of node {node!r} must be a positive number "
                f"of Hz, got {rate!r}"
            )
        found[node] = Firing(mode="timer", rate_hz=float(rate))
    return found


def _sources(spec: Spec) -> dict[str, tuple[str, str]]:
    """``"node/input" -> (kind, "producer/output")`` for every input an edge feeds."""
    fed: dict[str, tuple[str, str]] = {}
    flows = (("data_flow", spec.pipeline.data_flow), ("feedback", spec.pipeline.feedback_flow))
    for kind, edges in flows:
        for source, targets in edges.items():
            for target in targets:
                self_edge = source.split("/")[0] == target.split("/")[0]
                fed[target] = ("state" if kind == "feedback" and self_edge else kind, source)
    return fed


def _input_plan(
    model: ModelSpec,
    port: TensorSpec,
    fed: tuple[str, str] | None,
    overrides: Mapping[str, PortOverride],
) -> InputPlan:
    check_name(f"input of node {model.name!r}", port.name)
    kind, source = fed if fed is not None else ("external", None)
    topic = None if kind == "state" else source or f"{model.name}/{port.name}"
    binding, note, wire = None, "", message_type(port.dtype)
    if kind == "external":
        where = f"node {model.name!r} input {port.name!r}"
        binding, note = _bind("input", port, overrides.get(port.name), where)
        if binding is not None:
            # an Image or PointCloud2 has a topic of its own: the port's name
            topic = f"{model.name}/{binding.stem or port.name}"
            wire = binding.message_type
    elif port.name in overrides:
        raise PlanError(
            f"node {model.name!r} input {port.name!r} is fed by {source}, not from outside: "
            "ports.<port>.* parameters apply to external inputs and to outputs only"
        )
    return InputPlan(
        port=port.name,
        kind=kind,
        topic=topic,
        message_type=wire,
        dtype=port.dtype,
        shape=tuple(port.shape),
        source=source,
        binding=binding,
        note=note,
    )


def _output_plan(
    model: ModelSpec,
    port: TensorSpec,
    overrides: Mapping[str, PortOverride],
    frequency: float | None,
    consumed: set[str],
) -> OutputPlan:
    check_name(f"output of node {model.name!r}", port.name)
    period = port.temporal_period_ms or (1e3 / frequency if frequency else None)
    where = f"node {model.name!r} output {port.name!r}"
    key = f"{model.name}/{port.name}"
    if key in consumed:
        if port.name in overrides:
            raise PlanError(
                f"{where} is consumed by another node, so it keeps its std_msgs MultiArray; "
                "ports.<port>.* parameters apply to outputs no other node reads"
            )
        binding, note = None, "std_msgs MultiArray (another node consumes it)"
    else:
        binding, note = _bind("output", port, overrides.get(port.name), where, period)
    return OutputPlan(
        port=port.name,
        topic=f"{model.name}/{port.name}",
        message_type=binding.message_type if binding else message_type(port.dtype),
        dtype=port.dtype,
        shape=tuple(port.shape),
        labels=_labels(port),
        binding=binding,
        note=note,
    )


def _bind(
    direction: str,
    port: TensorSpec,
    override: PortOverride | None,
    where: str,
    period_ms: float | None = None,
) -> tuple[Binding | None, str]:
    try:
        return bind_port(
            direction,
            port.kind,
            tuple(port.shape),
            port.element_names,
            override,
            where=where,
            temporal_period_ms=period_ms,
            dtype=port.dtype,
        )
    except BindingError as e:
        raise PlanError(str(e)) from e


def packed_dtype(dtypes: list[str]) -> str | None:
    """The dtype of a packed message carrying ports of ``dtypes``: their common wire dtype
    (float32 for float16 and bfloat16, uint8 for bool), else float64 when it holds every
    value exactly, else None (int64 or uint64 beside another dtype)."""
    wires = {message_type(dtype) for dtype in dtypes}
    if len(wires) == 1:
        first = dtypes[0]
        return {"float16": "float32", "bfloat16": "float32", "bool": "uint8"}.get(first, first)
    if all(dtype in _EXACT_IN_FLOAT64 for dtype in dtypes):
        return "float64"
    return None


def _packed_plan(model: ModelSpec, inputs: tuple[InputPlan, ...]) -> PackedPlan | None:
    """The packed input of a node with two or more external MultiArray inputs (None when it
    has fewer, when their dtypes fit no one MultiArray, or when a port takes its topic)."""
    ports = [port for port in inputs if port.kind == "external" and port.binding is None]
    dtype = packed_dtype([port.dtype for port in ports]) if len(ports) >= 2 else None
    taken = {port.name for port in (*model.inputs, *model.outputs)}
    if dtype is None or PACKED_TOPIC in taken:
        return None
    return PackedPlan(
        topic=f"{model.name}/{PACKED_TOPIC}",
        message_type=message_type(dtype),
        dtype=dtype,
        ports=tuple(port.port for port in ports),
    )


def _check_shared_topics(node: str, inputs: tuple[InputPlan, ...]) -> None:
    """Inputs that share a topic must agree on its type (a port named like a robot topic)."""
    types: dict[str, InputPlan] = {}
    for port in inputs:
        if port.topic is None:
            continue
        first = types.setdefault(port.topic, port)
        if first.message_type != port.message_type:
            raise PlanError(
                f"node {node!r}: inputs {first.port!r} ({first.message_type}) and "
                f"{port.port!r} ({port.message_type}) would share topic {port.topic!r}; rename "
                "the input, or set ports.<port>.message: multiarray on one of them"
            )


def _labels(port: TensorSpec) -> tuple[str, ...]:
    """Layout label per axis: a string marker from ``element_names`` (e.g. the temporal axis)
    or ``"dim<i>"``; per-element names stay in the spec. ``element_names`` may name only the
    last axes (``[[x, y, z]]`` for shape ``[1, 3]``), so its entries align from the end."""
    names = list(port.element_names or [])
    first = len(port.shape) - len(names)
    labels = []
    for axis in range(len(port.shape)):
        entry = names[axis - first] if axis >= first else None
        labels.append(entry if isinstance(entry, str) else f"dim{axis}")
    return tuple(labels)
