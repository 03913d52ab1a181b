"""Which values an input port may take: its out-of-domain guard, from parameters.

Every input port of a pipeline node takes these ROS parameters (read once, at configure),
values in the port's element order (its last axis: a joint velocity port's joint names), a
single number applying to every element:

``ports.<port>.min`` / ``ports.<port>.max`` (number or number array)
    The range the policy was trained on. Before each run the node checks the port's current
    value; an element outside is *out of domain* (counted ``out_of_domain``, logged, and named
    on ``/diagnostics`` with its port, element name and value).
``ports.<port>.on_out_of_domain`` (``drop`` | ``safe``)
    What an out-of-domain value does: ``drop`` skips the run (the set is used up, nothing is
    published), ``safe`` skips it too and latches the safe action in the graph's command
    nodes until an operator releases it (``~/enable`` true, or a lifecycle transition;
    :mod:`leapp_ros.node.command_safety`); unset: the node's ``on_out_of_domain`` parameter
    (default ``drop``).

On ``leapp_fused`` a name applies to every node's port of that name, input or output (an
output's ``min`` / ``max`` are its limits, :mod:`leapp_ros.plan.limits`).
:func:`declare_input_bounds` declares them and returns one :class:`InputBounds` per port that
sets a range; :mod:`leapp_ros.node.domain_guard` checks them. No torch import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from leapp.spec import ModelSpec
from leapp_ros.plan.limits import number_array
from leapp_ros.plan.settings import StartupError

__all__ = ["DOMAIN_ACTIONS", "DOMAIN_PARAMETERS", "InputBounds", "declare_input_bounds"]

DOMAIN_ACTIONS = ("drop", "safe")

DOMAIN_PARAMETERS: tuple[tuple[str, str], ...] = (
    ("min", "inputs: the smallest value in the trained domain (one number, or one per element)"),
    ("max", "inputs: the largest value in the trained domain (one number, or one per element)"),
    ("on_out_of_domain", "inputs: 'drop' the set or publish the 'safe' action and latch"),
)
"""``ports.<port>.<name>`` parameters of every input port: ``(name, description)``."""


@dataclass(frozen=True, eq=False)
class InputBounds:
    """One input port's domain (arrays over its last axis) and what a value outside does."""

    port: str
    low: np.ndarray | None
    high: np.ndarray | None
    action: str = "drop"


def declare_input_bounds(
    node: Any, *models: ModelSpec, default_action: str = "drop"
) -> dict[str, InputBounds]:
    """Declare ``ports.<port>.{min,max,on_out_of_domain}`` on ``node`` for every input port
    of ``models`` (a name an output has too shares them); the ports that set a range, by
    name. ``default_action`` is the node's ``on_out_of_domain``.

    Raises:
        StartupError: a value of the wrong type or length, ``min`` above ``max``, an unknown
            action, or an action without a range; the message names the parameter.
    """
    from rcl_interfaces.msg import ParameterDescriptor

    owner = " ".join(repr(model.name) for model in models)
    shapes: dict[str, tuple[int, ...]] = {}
    for model in models:
        for port in model.inputs:
            shapes.setdefault(port.name, tuple(port.shape))
    found: dict[str, InputBounds] = {}
    for port, shape in shapes.items():
        given = {}
        for name, description in DOMAIN_PARAMETERS:
            descriptor = ParameterDescriptor(
                description=description, read_only=True, dynamic_typing=True
            )
            given[name] = node.declare_parameter(f"ports.{port}.{name}", None, descriptor).value
        bounds = input_bounds(
            f"node {owner}: parameter ports.{port}", port, shape, given, default_action
        )
        if bounds is not None:
            found[port] = bounds
    return found


def input_bounds(
    where: str, port: str, shape: tuple[int, ...], given: dict[str, Any], default_action: str
) -> InputBounds | None:
    """The bounds ``given`` (``{min, max, on_out_of_domain}``, None when unset) set on input
    ``port`` of ``shape``; None when they set no range."""
    width = shape[-1] if shape else 1
    low = number_array(f"{where}.min", given.get("min"), width)
    high = number_array(f"{where}.max", given.get("max"), width)
    action = given.get("on_out_of_domain")
    if action is not None and action not in (*DOMAIN_ACTIONS, "clamp"):
        raise StartupError(
            f"{where}.on_out_of_domain must be one of {list(DOMAIN_ACTIONS)} for an input, "
            f"got {action!r}"
        )
    if low is not None and high is not None and np.any(low > high):
        raise StartupError(f"{where}.min exceeds {where}.max: {low.tolist()} > {high.tolist()}")
    if low is None and high is None:
        if action in DOMAIN_ACTIONS:
            raise StartupError(f"{where}.on_out_of_domain is {action!r} but no min / max is set")
        return None
    if action not in DOMAIN_ACTIONS:  # unset, or an output's "clamp" under a shared name
        action = default_action
    return InputBounds(port, low, high, action)
