"""Where a ramp-in starts: the measured position of an output port's joints
(``ports.<port>.blend_from``, :mod:`leapp_ros.plan.limits`).

:func:`subscribe_measured` gives every output port whose ramp names ``blend_from`` a
subscription of its own to that external input's topic (the input's message and QoS: a
``sensor_msgs/JointState`` read by joint name, as the node owning the input reads it) and hands
its ramp (:class:`~leapp_ros.node.ramp.PortRamp`) the newest value, element by element in the
output's order, matched by name (the output's and the input's element names, or the robot
message's joints); a port without names on either side takes the input's elements in order
when both have as many.

Where the input is one of the node's own (a fused node, a node that reads the joints and
commands them), the value of the set the node runs on comes first: the blend then starts from
the position of the very inputs its first command answers. Two subscriptions to one topic take
a message in no fixed order, so the node's own subscription may run on a message the measured
one has not taken yet (the first after a restart: no measured position at all, and the blend
would be skipped).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from leapp_ros.messages.topic_io import TopicReader
from leapp_ros.node.domain_guard import element_names
from leapp_ros.node.match_count import MatchCount
from leapp_ros.plan.pipeline import InputPlan, NodePlan, PipelinePlan
from leapp_ros.plan.settings import StartupError, qos_profile

__all__ = ["find_input", "subscribe_measured"]


def find_input(plan: PipelinePlan, name: str, where: str) -> tuple[NodePlan, int]:
    """The external input ``name`` (``port`` or ``node/port``) of ``plan``: its node and
    index.

    Raises:
        StartupError: no external input, or more than one, has that name.
    """
    node_name, _, port = name.rpartition("/")
    found = [
        (node, index)
        for node in plan.nodes
        for index, entry in enumerate(node.inputs)
        if entry.kind == "external" and entry.port == port and node_name in ("", node.name)
    ]
    if len(found) != 1:
        known = [
            f"{n.name}/{p.port}" for n in plan.nodes for p in n.inputs if p.kind == "external"
        ]
        problem = "names no external input" if not found else "is ambiguous"
        raise StartupError(
            f"{where} {name!r} {problem} of pipeline {plan.name!r}; its external inputs are "
            f"{known}: name one as <node>/<port>"
        )
    return found[0]


def _order(
    output: tuple[str, ...] | None, measured: tuple[str, ...] | None, width: int, where: str
) -> np.ndarray:
    """Indices into the measured values, one per element of the output."""
    if output and measured:
        missing = [name for name in output if name not in measured]
        if missing:
            raise StartupError(
                f"{where}: the measured input has no element(s) {missing} (it has "
                f"{list(measured)}): name the input that carries the output's joints"
            )
        return np.array([measured.index(name) for name in output])
    if len(measured or ()) not in (0, width):
        raise StartupError(f"{where}: the output has no element names to match by")
    return np.arange(width)


def subscribe_measured(
    node: Any, plan: PipelinePlan, paths: Sequence[Any]
) -> list[tuple[Any, str, MatchCount]]:
    """Subscribe ``node`` (rclpy) to the measured input of every ramp of ``paths`` (data paths
    of ``plan``'s nodes) that names one: per subscription, its data path, topic (full name)
    and publishers matched (for the status record's ``publishers``).

    Raises:
        StartupError: ``blend_from`` names no usable input (the message says which).
    """
    subscriptions = []
    for data in paths:
        guard = data.guard
        for port in () if guard is None else guard.ramps:
            source = port.limits.blend_from
            if source is None:
                continue
            where = f"node {data.name!r}: parameter ports.{port.limits.port}.blend_from"
            owner, index = find_input(plan, source, where)
            entry: InputPlan = owner.inputs[index]
            output = data.plan.outputs[port.index]
            specs = {p.name: p for p in data.plan.model.outputs}
            inputs = {p.name: p for p in owner.model.inputs}
            order = _order(
                element_names(specs.get(output.port), output.binding),
                element_names(inputs.get(entry.port), entry.binding),
                output.shape[-1] if output.shape else 1,
                where,
            )
            reader = TopicReader(owner.inputs, [index])
            cell: list[Any] = [None]
            taken = data.measured_cell(reader)
            own = next((path for path in paths if path.plan.name == owner.name), None)

            def take(
                message: Any, reader: TopicReader = reader, cell: list = cell, taken=taken
            ) -> None:
                taken[0] += 1
                try:
                    value = np.asarray(reader.read(message)[0], dtype=np.float64)
                except Exception:  # a malformed message: the ramp starts from the one before
                    return
                if np.isfinite(value).all():
                    cell[0] = value

            def newest(
                cell: list = cell, order: np.ndarray = order, own: Any = own, index: int = index
            ) -> np.ndarray | None:
                value = _own_value(own, index)
                if value is None:
                    value = cell[0]
                return None if value is None else value.reshape(-1)[order]

            port.ramp.measured = newest
            matched = MatchCount()
            subscription = node.create_subscription(
                reader.message_class,
                entry.topic,
                take,
                qos_profile(entry.qos),
                event_callbacks=matched.subscription_callbacks(),
            )
            reader.resolved = subscription.topic_name
            subscriptions.append((data, subscription.topic_name, matched))
    return subscriptions


def _own_value(own: Any, index: int) -> np.ndarray | None:
    """The current value of input ``index`` of data path ``own`` (None: no such path, no
    value yet, or not finite)."""
    if own is None or own.values[index] is None:
        return None
    value = np.asarray(own.values[index], dtype=np.float64)
    return value if np.isfinite(value).all() else None
