"""What the harness derives from a plan: topic checks, driven outputs, messages.

:func:`topic_problems` lists every difference between what the rclpy graph API shows and what
:func:`leapp_ros.plan.pipeline.make_plan` planned (names, types, publishing and subscribing
nodes, message shapes); :func:`driven_outputs` says which outputs some inputs make the nodes
publish (firing on inputs); :func:`feedback_topics` which topics carry values fed back between
nodes; :class:`InputSender` and :class:`OutputReader` turn a test's tensors into the messages
of a topic and back (MultiArrays or robot messages). The nodes keep their own QoS: nothing here
changes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from leapp_ros.messages.multiarray import MessageError, codec
from leapp_ros.messages.robot_codecs import InputDecoder, OutputEncoder
from leapp_ros.plan.pipeline import (
    STAND_IN_TOPIC,
    STATUS_TOPIC,
    InputPlan,
    OutputPlan,
    PipelinePlan,
)

__all__ = [
    "InputSender",
    "OutputReader",
    "driven_outputs",
    "feedback_topics",
    "input_senders",
    "topic_problems",
]


def topic_problems(
    plan: PipelinePlan,
    node: Any,
    latest: Mapping[str, Any | None],
    publisher: str | None = None,
) -> list[str]:
    """Every difference between the ROS graph that rclpy ``node`` sees and ``plan``.

    Args:
        plan: the pipeline plan.
        node: an rclpy node in the graph's domain.
        latest: per output topic (absolute), the newest message received, or None.
        publisher: the ROS node that publishes every output and subscribes to every
            external input (a fused node); None: each pipeline node has its own.
    """
    expected = dict(plan.topics()) | dict(plan.packed_topics())
    found = dict(node.get_topic_names_and_types())
    prefix = plan.namespace.rstrip("/") + "/"
    status = (plan.resolve(STATUS_TOPIC), plan.resolve(STAND_IN_TOPIC))  # ours, hidden
    operations = dict(plan.operation_topics(fused=publisher is not None))
    problems = [
        f"{topic}: expected type {kind}, found {found.get(topic, 'none')}"
        for topic, kind in expected.items()
        if found.get(topic) != [kind]
    ]
    problems += [
        f"{topic}: not in the plan (types {kinds})"
        for topic, kinds in sorted(found.items())
        if topic.startswith(prefix)
        and topic not in expected
        and topic not in status
        and found[topic] != [operations.get(topic)]
    ]
    for plan_node in plan.nodes:
        for output in plan_node.outputs:
            topic = plan.resolve(output.topic)
            expected = publisher or plan_node.name
            if expected not in _names(node.get_publishers_info_by_topic(topic)):
                problems.append(f"{topic}: not published by node {expected!r}")
            message = latest.get(topic)
            plain = message is not None and output.binding is None
            dims = [dim.size for dim in message.layout.dim] if plain else None
            if dims is not None and dims != list(output.shape):
                problems.append(
                    f"{topic}: expected messages of shape {list(output.shape)}, received {dims}"
                )
        for port in plan_node.inputs:
            if port.topic is None or (publisher and port.kind != "external"):
                continue  # a fused node takes other nodes' outputs in memory
            topic = plan.resolve(port.topic)
            expected = publisher or plan_node.name
            if expected not in _names(node.get_subscriptions_info_by_topic(topic)):
                problems.append(f"{topic}: not subscribed by node {expected!r}")
    return problems


def driven_outputs(plan: PipelinePlan, inputs: Iterable[str]) -> list[str]:
    """The outputs (``"node/port"``) of every node that fires when ``inputs`` (external
    ``"node/port"``) arrive: a node fires when each of its external and data-flow inputs is
    given or produced by a node that fires."""
    fresh, fired = set(inputs), set()
    while True:
        firing = [
            node
            for node in plan.nodes
            if node.name not in fired
            and any(port.triggers for port in node.inputs)
            and all((port.source or f"{node.name}/{port.port}") in fresh
                    for port in node.inputs if port.triggers)
        ]  # fmt: skip
        if not firing:
            break
        for node in firing:
            fired.add(node.name)
            fresh.update(f"{node.name}/{port.port}" for port in node.outputs)
    return [f"{n.name}/{port.port}" for n in plan.nodes if n.name in fired for port in n.outputs]


def feedback_topics(plan: PipelinePlan) -> list[str]:
    """The topics (absolute) that carry a value fed back from one node to another: its
    consumer must have taken it before the next step's inputs reach that consumer."""
    return sorted(
        {
            plan.resolve(port.topic)
            for node in plan.nodes
            for port in node.inputs
            if port.kind == "feedback" and port.topic is not None
        }
    )


def _names(endpoints: Iterable[Any]) -> set[str]:
    return {endpoint.node_name for endpoint in endpoints}


class OutputReader:
    """The harness side of one output topic: its message class and its tensors."""

    def __init__(self, port: OutputPlan):
        self.port = port
        if port.binding is None:
            self._codec = codec(port)
            self.message_class = self._codec.message_class
        else:
            self._encoder = OutputEncoder(port.binding, port.dtype, port.shape, port.labels)
            self.message_class = self._encoder.message_class

    def from_message(self, message: Any) -> Any:
        """The output's tensor in ``message`` (a robot message's values in the port's order)."""
        if self.port.binding is None:
            return self._codec.from_message(message)
        import torch

        return torch.from_numpy(self._encoder.decode(message))


class InputSender:
    """The harness side of one external input topic, which may carry several ports (a
    JointState feeding position and velocity): ``keys`` (``"node/port"``) must be given
    together to :meth:`to_message`."""

    def __init__(self, node: str, ports: Sequence[InputPlan]):
        self.keys = tuple(f"{node}/{port.port}" for port in ports)
        self.ports = tuple(ports)
        bound = ports[0].binding is not None
        self._codec = None if bound else codec(ports[0])
        self._decoder = (
            InputDecoder(ports[0].message_type, [(p.binding, p.dtype, p.shape) for p in ports])
            if bound
            else None
        )
        self.message_class = (self._decoder or self._codec).message_class  # type: ignore[union-attr]

    def to_message(self, values: Mapping[str, Any]) -> Any:
        """One message carrying ``values`` (``{"node/port": tensor}``, every key of this topic).

        Raises:
            MessageError: a tensor does not fit its port, or a key of this topic is missing.
        """
        missing = [key for key in self.keys if key not in values]
        if missing:
            raise MessageError(
                f"{', '.join(self.keys)} come in one message; give {', '.join(missing)} too"
            )
        if self._codec is not None:
            return self._codec.to_message(values[self.keys[0]])
        arrays = []
        for key, port in zip(self.keys, self.ports, strict=True):
            value = values[key]
            shape = tuple(getattr(value, "shape", ()))
            if shape != tuple(port.shape):
                raise MessageError(f"expected shape {list(port.shape)}, got {list(shape)}")
            arrays.append(value.detach().numpy() if hasattr(value, "detach") else value)
        return self._decoder.encode(arrays)  # type: ignore[union-attr]


def input_senders(plan: PipelinePlan) -> list[InputSender]:
    """One sender per external input topic of every node."""
    senders = []
    for node in plan.nodes:
        topics: dict[str, list[InputPlan]] = {}
        for port in node.inputs:
            if port.kind == "external" and port.topic is not None:
                topics.setdefault(port.topic, []).append(port)
        senders += [InputSender(node.name, ports) for ports in topics.values()]
    return senders
