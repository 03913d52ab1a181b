"""The ROS 2 graph of a pipeline as plain values: per node its input and output ports (topic,
message type, QoS) and its firing rule, the nodes under one namespace, and the names and QoS of
the topics every node has besides its data (status, diagnostics, lifecycle events).

:func:`leapp_ros.plan.pipeline.make_plan` makes a :class:`PipelinePlan` from a spec; it
re-exports these names. Pure data and no rclpy import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from leapp.errors import LeappError
from leapp.spec import ModelSpec
from leapp_ros.plan.bindings import Binding

__all__ = [
    "DIAGNOSTICS_TOPIC",
    "GUARD_TOPIC",
    "METADATA_QOS",
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
    "check_name",
    "check_namespace",
    "message_type",
]


class PlanError(LeappError):
    """A spec cannot be mapped onto ROS 2 (invalid names, unsupported dtypes, bad settings)."""


@dataclass(frozen=True)
class QosPlan:
    """A QoS profile in words: ``reliable``/``best_effort``, ``volatile``/``transient_local``."""

    reliability: str
    durability: str = "volatile"
    depth: int = 1


PUBLISHER_QOS = QosPlan("reliable")
SUBSCRIPTION_QOS = QosPlan("best_effort")
METADATA_QOS = QosPlan("reliable", "transient_local", 1)
STATUS_TOPIC = "_leapp/status"  # std_msgs/String (JSON) from every node; hidden from topic lists
STAND_IN_TOPIC = "_leapp/stand_in"  # std_msgs/String (JSON) from the stand-in (run/stand_in.py)
GUARD_TOPIC = "_leapp/guard"  # std_msgs/String (JSON): a guard latched the safe action
DIAGNOSTICS_TOPIC = "/diagnostics"  # diagnostic_msgs/DiagnosticArray from every node
TRANSITION_EVENTS = "transition_event"  # <node>/transition_event: a lifecycle node's transitions

_MESSAGES = {
    "float32": "Float32MultiArray",
    "float64": "Float64MultiArray",
    "float16": "Float32MultiArray",
    "bfloat16": "Float32MultiArray",
    "int8": "Int8MultiArray",
    "int16": "Int16MultiArray",
    "int32": "Int32MultiArray",
    "int64": "Int64MultiArray",
    "uint8": "UInt8MultiArray",
    "uint16": "UInt16MultiArray",
    "uint32": "UInt32MultiArray",
    "uint64": "UInt64MultiArray",
    "bool": "UInt8MultiArray",
}


def message_type(dtype: str) -> str:
    """The ``std_msgs`` type carrying a tensor of ``dtype``: ``std_msgs/msg/Float32MultiArray``."""
    try:
        return f"std_msgs/msg/{_MESSAGES[dtype]}"
    except KeyError:
        raise PlanError(
            f"dtype {dtype!r} has no std_msgs MultiArray; supported: {', '.join(_MESSAGES)}"
        ) from None


@dataclass(frozen=True)
class InputPlan:
    """One input port of a node and where its values come from.

    ``kind`` is ``external`` (from outside the pipeline), ``data_flow`` (a producer in this
    tick), ``feedback`` (another node's output, consumed on the next tick; never triggers) or
    ``state`` (this node's own output, kept inside the node; no topic).
    """

    port: str
    kind: str
    topic: str | None  # relative topic name; None for state
    message_type: str
    dtype: str
    shape: tuple[int, ...]
    source: str | None = None  # "<node>/<port>" of the producer, None for external inputs
    qos: QosPlan = SUBSCRIPTION_QOS
    binding: Binding | None = None  # a standard robot message instead of the MultiArray
    note: str = ""  # why this message (leapp-ros inspect)

    @property
    def triggers(self) -> bool:
        """Whether a new message on this input counts towards firing the node."""
        return self.kind in ("external", "data_flow")


@dataclass(frozen=True)
class OutputPlan:
    """One output port of a node, published on its own topic."""

    port: str
    topic: str
    message_type: str
    dtype: str
    shape: tuple[int, ...]
    labels: tuple[str, ...] = ()  # one layout label per axis ("" when unnamed)
    qos: QosPlan = PUBLISHER_QOS
    binding: Binding | None = None  # a standard robot message instead of the MultiArray
    note: str = ""  # why this message (leapp-ros inspect)


@dataclass(frozen=True)
class PackedPlan:
    """One message carrying every external MultiArray input of a node at once (the packed
    input, :mod:`leapp_ros.messages.packed_inputs`): a set of those inputs is one message.

    ``ports`` are the input ports it carries, in the node's input order; ``dtype`` the dtype
    of its ``std_msgs`` MultiArray (the ports' own when they share one, else float64).
    """

    topic: str  # relative, ``<node>/packed_inputs``
    message_type: str
    dtype: str
    ports: tuple[str, ...]
    qos: QosPlan = SUBSCRIPTION_QOS


@dataclass(frozen=True)
class Firing:
    """When a node runs: ``inputs`` (its triggers formed a set) or ``timer`` (``rate_hz``).

    ``triggers`` names the inputs whose messages form the sets that fire the node (None: every
    external and data-flow input); every other external and data-flow input is a newest-value
    input, used as last received (checked against ``max_input_age_s``).
    """

    mode: str = "inputs"
    rate_hz: float | None = None
    max_input_age_s: float | None = None  # inputs older than this are not used (None: no limit)
    sync: str = "arrival"  # a set of inputs: newest messages, or messages of one header stamp
    sync_slop_s: float = 0.0  # sync "approximate": the largest spread of stamps in one set
    triggers: tuple[str, ...] | None = None  # the inputs that fire the node (None: all)

    def describe(self) -> str:
        """The rule in words: ``timer at 50 Hz``, ``inputs (triggers: state)``,
        ``timer at 50 Hz (triggers: joint_pos, gyro), sync exact``."""
        text = "inputs"
        if self.mode == "timer":
            rate = self.rate_hz
            shown = "?" if rate is None else (f"{rate:g}" if rate % 1 else f"{int(rate)}")
            text = f"timer at {shown} Hz"
        if self.triggers is not None:
            text += f" (triggers: {', '.join(self.triggers)})"
        if self.sync != "arrival":
            text += f", sync {self.sync}"
        return text


@dataclass(frozen=True)
class NodePlan:
    name: str
    model: ModelSpec
    inputs: tuple[InputPlan, ...]
    outputs: tuple[OutputPlan, ...]
    firing: Firing = field(default_factory=Firing)
    packed: PackedPlan | None = None  # every external MultiArray input in one message

    def input(self, port: str) -> InputPlan:
        return next(i for i in self.inputs if i.port == port)

    def triggering(self) -> frozenset[int]:
        """The positions of the inputs that fire the node under its firing rule (on a timer:
        those gathered by stamp, none by arrival); the other inputs fed over a topic are
        newest-value inputs."""
        if self.firing.mode != "inputs" and self.firing.sync == "arrival":
            return frozenset()
        chosen = self.firing.triggers
        return frozenset(
            index
            for index, port in enumerate(self.inputs)
            if port.triggers and (chosen is None or port.port in chosen)
        )

    def output(self, port: str) -> OutputPlan:
        return next(o for o in self.outputs if o.port == port)


@dataclass(frozen=True)
class PipelinePlan:
    name: str
    namespace: str  # absolute, e.g. "/torch_pipeline"
    spec_path: Path
    nodes: tuple[NodePlan, ...]
    initial_values: Path | None = None
    frequency: float | None = None  # pipeline.configs.frequency: the default timer rate

    def node(self, name: str) -> NodePlan:
        for node in self.nodes:
            if node.name == name:
                return node
        raise PlanError(
            f"pipeline {self.name!r} has no node {name!r}; its nodes are "
            f"{', '.join(n.name for n in self.nodes)}"
        )

    def topics(self) -> list[tuple[str, str]]:
        """Every data topic as ``(absolute name, type)``, as ``ros2 topic list -t`` shows it:
        each output and each input fed over a topic. The packed inputs, another form of the
        external inputs, are :meth:`packed_topics`."""
        found = {(self.resolve(o.topic), o.message_type) for n in self.nodes for o in n.outputs}
        found |= {
            (self.resolve(i.topic), i.message_type)
            for n in self.nodes
            for i in n.inputs
            if i.topic is not None
        }
        return sorted(found)

    def packed_topics(self) -> list[tuple[str, str]]:
        """The packed input of every node that has one, as :meth:`topics` lists topics."""
        return sorted(
            (self.resolve(n.packed.topic), n.packed.message_type)
            for n in self.nodes
            if n.packed is not None
        )

    def operation_topics(self, *, fused: bool = False) -> list[tuple[str, str]]:
        """The topics of the running nodes besides the data topics, as ``topics()`` has
        them: ``/diagnostics`` and each ROS node's lifecycle ``transition_event``."""
        nodes = ["leapp_fused"] if fused else [node.name for node in self.nodes]
        events = "lifecycle_msgs/msg/TransitionEvent"
        return [
            (DIAGNOSTICS_TOPIC, "diagnostic_msgs/msg/DiagnosticArray"),
            *((self.resolve(f"{node}/{TRANSITION_EVENTS}"), events) for node in nodes),
        ]

    def resolve(self, topic: str) -> str:
        """The absolute name of a relative ``topic`` under this plan's namespace."""
        return f"{self.namespace.rstrip('/')}/{topic}"


# ROS 2 name tokens: a letter or underscore first, then letters, digits, underscores; no "__".
_TOKEN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def check_name(what: str, name: str) -> None:
    """Raise PlanError unless ``name`` is a valid ROS 2 node name / topic token."""
    if _TOKEN.match(name) and "__" not in name and not name.endswith("_"):
        return
    suggestion = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", name)).strip("_") or "x"
    if not suggestion[0].isalpha():
        suggestion = f"n_{suggestion}"
    raise PlanError(
        f"{what} {name!r} is not a valid ROS 2 name (letters, digits and single underscores, "
        f"starting with a letter); rename it, e.g. to {suggestion!r}, and export again"
    )


def check_namespace(namespace: str) -> str:
    """Normalize ``namespace`` to an absolute name, rejecting invalid tokens."""
    tokens = [t for t in namespace.strip().split("/") if t]
    for token in tokens:
        check_name("namespace token", token)
    return "/" + "/".join(tokens)
