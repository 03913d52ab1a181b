"""Out-of-domain guards: whether a node's inputs (and guarded outputs) lie in the range the
policy was trained on (``ports.<port>.min`` / ``max``, :mod:`leapp_ros.plan.domain` and
:mod:`leapp_ros.plan.limits`).

:class:`InputGuard` checks the current value of every guarded input port of one pipeline node
before a run; :func:`first_outside` finds the first element of a value outside its bounds.
A finding is a :class:`Violation`, which names the node, the port, the element (by name:
the joint, the message field, else its index) and the value; what the node then does
(drop the set, or latch the safe action) is :mod:`leapp_ros.node.command_safety`'s. Knows
nothing of ROS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from leapp_ros.plan.domain import InputBounds
from leapp_ros.plan.pipeline import NodePlan

__all__ = ["InputGuard", "Violation", "element_names", "first_outside"]


@dataclass(frozen=True)
class Violation:
    """One value outside its port's domain: ``element`` of ``port`` (an ``input`` or an
    ``output``, ``direction``) of pipeline node ``node`` was ``value``, beyond ``bound``
    (``min`` or ``max``) ``limit``; ``action`` is what the port's guard does (``drop`` or
    ``safe``)."""

    node: str
    direction: str
    port: str
    element: str
    value: float
    bound: str
    limit: float
    action: str

    def describe(self) -> str:
        """``input joint_vel[elbow] = 12.5 above max 8`` (port, element and value)."""
        where = "below min" if self.bound == "min" else "above max"
        return (
            f"{self.direction} {self.port}[{self.element}] = {self.value:.6g} {where} "
            f"{self.limit:.6g}"
        )

    def record(self) -> dict[str, Any]:
        """The violation as the status record carries it."""
        return {
            "port": self.port,
            "element": self.element,
            "value": self.value,
            "bound": self.bound,
            "limit": self.limit,
            "action": self.action,
            "text": self.describe(),
        }


def element_names(spec_port: Any, binding: Any) -> tuple[str, ...] | None:
    """The names of a port's last-axis elements: its robot message's (joints, message fields),
    else the spec's ``element_names``; None when it has none."""
    if binding is not None and binding.elements:
        return tuple(binding.elements)
    names = getattr(spec_port, "element_names", None)
    if names and isinstance(names[-1], tuple):
        return names[-1]
    return None


def first_outside(
    value: Any, low: np.ndarray | None, high: np.ndarray | None
) -> tuple[int, str, float, float] | None:
    """The first element of ``value`` outside ``[low, high]`` (arrays over its last axis,
    or of one number): ``(element index on the last axis, "min" | "max", limit, value)``;
    None when every element is inside (NaN is never outside: the non-finite check owns it)."""
    array = np.asarray(value)
    for bound, limits, outside in (("min", low, np.less), ("max", high, np.greater)):
        if limits is None:
            continue
        mask = outside(array, limits)
        if mask.any():
            flat = int(np.argmax(mask.reshape(-1)))
            element = flat % array.shape[-1] if array.ndim else 0
            limit = float(limits[element if limits.size > 1 else 0])
            return element, bound, limit, float(array.reshape(-1)[flat])
    return None


class InputGuard:
    """The guarded input ports of one pipeline node (see the module documentation); ``of``
    gives None for a node none of whose inputs has a range."""

    def __init__(
        self, node: str, ports: Sequence[tuple[int, InputBounds, tuple[str, ...] | None]]
    ):
        self._node = node
        self._ports = tuple(ports)

    @classmethod
    def of(cls, plan: NodePlan, bounds: Mapping[str, InputBounds]) -> InputGuard | None:
        """The guard of ``plan``'s inputs that ``bounds`` (by port name) gives a range."""
        ports = []
        specs = {port.name: port for port in plan.model.inputs}
        for index, port in enumerate(plan.inputs):
            entry = bounds.get(port.port)
            if entry is not None:
                names = element_names(specs.get(port.port), port.binding)
                ports.append((index, entry, names))
        return cls(plan.name, ports) if ports else None

    @property
    def latches(self) -> bool:
        """Whether a port's action is ``safe``."""
        return any(bounds.action == "safe" for _, bounds, _ in self._ports)

    def check(self, values: Sequence[Any]) -> Violation | None:
        """The first out-of-domain element among the current ``values`` (one per input
        port; None for one that has not come yet), None when all are inside."""
        for index, bounds, names in self._ports:
            value = values[index]
            if value is None:
                continue
            found = first_outside(value, bounds.low, bounds.high)
            if found is not None:
                element, bound, limit, number = found
                name = names[element] if names and element < len(names) else str(element)
                return Violation(
                    self._node, "input", bounds.port, name, number, bound, limit, bounds.action
                )
        return None
