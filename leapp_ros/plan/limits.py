"""What an output port may publish: its safe action and its command limits, from parameters.

Every output port of a pipeline node takes these ROS parameters (read once, at configure),
values in the port's element order (the tensor's last axis: a joint target port's joint
names), a single number applying to every element:

``ports.<port>.safe_action`` (``silent`` | ``hold`` | ``values``)
    What the port publishes while the node cannot command (input timeout, e-stop, deactivate):
    ``silent`` (default) publishes nothing, so a controller's own timeout acts; ``hold``
    repeats the last value the port published (nothing before the first); ``values``
    publishes ``safe_values``.
``ports.<port>.safe_values`` (number array)
    The values of ``safe_action: values``; given alone, it implies that action.
``ports.<port>.min`` / ``ports.<port>.max`` (number or number array)
    Every published element is clamped into ``[min, max]`` (counted: ``clamped``).
``ports.<port>.max_step`` (number or number array, > 0)
    The largest change of an element from the port's last published value in one run
    (counted: ``step_limited``).

:func:`declare_output_limits` declares them on a node and returns one :class:`OutputLimits`
per output port that sets any (:func:`output_limits` reads values from elsewhere, a
parameters file); :mod:`leapp_ros.node.safety` applies them. No torch import.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from leapp.spec import ModelSpec
from leapp_ros.plan.settings import StartupError

__all__ = [
    "LIMIT_PARAMETERS",
    "SAFE_ACTIONS",
    "OutputLimits",
    "declare_output_limits",
    "output_limits",
]

SAFE_ACTIONS = ("silent", "hold", "values")

LIMIT_PARAMETERS: tuple[tuple[str, str], ...] = (
    ("safe_action", "outputs: 'silent', 'hold' (the last command) or 'values' (safe_values)"),
    ("safe_values", "outputs: what safe_action 'values' publishes, one number per element"),
    ("min", "outputs: the smallest value published (one number, or one per element)"),
    ("max", "outputs: the largest value published (one number, or one per element)"),
    ("max_step", "outputs: the largest change from the last published value in one run"),
)
"""``ports.<port>.<name>`` parameters of every output port: ``(name, description)``."""


@dataclass(frozen=True, eq=False)
class OutputLimits:
    """One output port's safe action and limits (arrays broadcast over the port's shape)."""

    port: str
    safe_action: str = "silent"
    safe_values: np.ndarray | None = None
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    max_step: np.ndarray | None = None

    @property
    def limits(self) -> bool:
        """Whether any limit applies to what the port publishes."""
        return self.low is not None or self.high is not None or self.max_step is not None


def declare_output_limits(node: Any, *models: ModelSpec) -> dict[str, OutputLimits]:
    """Declare ``ports.<port>.{safe_action,safe_values,min,max,max_step}`` on ``node`` for
    every output port of ``models`` (all of them for a fused node, where a name applies to
    every output of that name); the ports that set any, by port name.

    Raises:
        StartupError: a value has the wrong type or length, ``min`` exceeds ``max``, or
            ``safe_values`` lie outside them; the message names the parameter.
    """
    from rcl_interfaces.msg import ParameterDescriptor

    owner = " ".join(repr(model.name) for model in models)
    shapes: dict[str, tuple[int, ...]] = {}
    for model in models:
        for port in model.outputs:
            shapes.setdefault(port.name, tuple(port.shape))
    found: dict[str, OutputLimits] = {}
    for port, shape in shapes.items():
        given = {}
        for name, description in LIMIT_PARAMETERS:
            descriptor = ParameterDescriptor(
                description=description, read_only=True, dynamic_typing=True
            )
            given[name] = node.declare_parameter(f"ports.{port}.{name}", None, descriptor).value
        if any(value is not None for value in given.values()):
            where = f"node {owner}: parameter ports.{port}"
            found[port] = output_limits(where, port, shape, given)
    return found


def output_limits(
    where: str, port: str, shape: tuple[int, ...], given: dict[str, Any]
) -> OutputLimits:
    """The limits ``given`` (``{name: value or None}`` for every name of
    :data:`LIMIT_PARAMETERS`) of output ``port`` of ``shape``; ``where`` names the parameters
    in errors (``node 'policy': parameter ports.action``).

    Raises:
        StartupError: see :func:`declare_output_limits`.
    """
    width = shape[-1] if shape else 1
    low = _numbers(f"{where}.min", given["min"], width)
    high = _numbers(f"{where}.max", given["max"], width)
    step = _numbers(f"{where}.max_step", given["max_step"], width)
    values = _numbers(f"{where}.safe_values", given["safe_values"], width, one=False)
    action = given["safe_action"]
    if action is None:
        action = "values" if values is not None else "silent"
    if action not in SAFE_ACTIONS:
        raise StartupError(
            f"{where}.safe_action must be one of {list(SAFE_ACTIONS)}, got {action!r}"
        )
    if action == "values" and values is None:
        raise StartupError(
            f"{where}.safe_action is 'values' but {where}.safe_values is not set; give one "
            f"number per element ({width})"
        )
    if low is not None and high is not None and np.any(low > high):
        raise StartupError(f"{where}.min exceeds {where}.max: {low.tolist()} > {high.tolist()}")
    if step is not None and np.any(step <= 0):
        raise StartupError(f"{where}.max_step must be > 0, got {step.tolist()}")
    if values is not None and action == "values":
        outside = (low is not None and np.any(values < low)) or (
            high is not None and np.any(values > high)
        )
        if outside:
            raise StartupError(
                f"{where}.safe_values {values.tolist()} lie outside {where}.min / max"
            )
        values = np.broadcast_to(values, shape or (1,)).reshape(shape)
    return OutputLimits(port, action, values, low, high, step)


def _numbers(where: str, value: Any, width: int, *, one: bool = True) -> np.ndarray | None:
    """A number array parameter: one number (when ``one``) or ``width`` finite numbers."""
    if value is None:
        return None
    single = isinstance(value, (int, float)) and not isinstance(value, bool)
    numbers = [value] if single else value
    sequence = isinstance(numbers, Sequence) and not isinstance(numbers, (str, bytes))
    if not sequence or any(
        isinstance(n, bool) or not isinstance(n, (int, float)) or not math.isfinite(n)
        for n in numbers
    ):
        raise StartupError(f"{where} must be finite numbers such as [0.5, -0.5], got {value!r}")
    if len(numbers) != width and not (one and len(numbers) == 1):
        expected = f"1 or {width}" if one else str(width)
        raise StartupError(
            f"{where} has {len(numbers)} number(s); the port has {width} element(s) in its "
            f"last axis: give {expected}"
        )
    return np.asarray(numbers, dtype=np.float64)
