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
``ports.<port>.on_out_of_domain`` (``clamp`` | ``drop`` | ``safe``)
    What a result outside ``min`` / ``max`` does: ``clamp`` (default) clamps it as above;
    ``drop`` publishes nothing for that run, ``safe`` publishes the safe action and latches
    (:mod:`leapp_ros.plan.domain`, both counted ``out_of_domain``).
``ports.<port>.blend_s`` (number, seconds, >= 0)
    Ramp-in: after an activation, an e-stop release, a watchdog recovery or a guard release
    the port's commands move from where the robot is to the policy's over this long,
    counted in the node's own commands (:mod:`leapp_ros.node.ramp`); 0 (default): none.
``ports.<port>.blend_from`` (string)
    The external input port (``joint_pos`` or ``<node>/joint_pos``) whose newest message is
    the measured position a ramp starts from, element by element by name; unset: the last
    value the port published.

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
    "OUTPUT_DOMAIN_ACTIONS",
    "SAFE_ACTIONS",
    "OutputLimits",
    "declare_output_limits",
    "number_array",
    "output_limits",
]

SAFE_ACTIONS = ("silent", "hold", "values")
OUTPUT_DOMAIN_ACTIONS = ("clamp", "drop", "safe")

LIMIT_PARAMETERS: tuple[tuple[str, str], ...] = (
    ("safe_action", "outputs: 'silent', 'hold' (the last command) or 'values' (safe_values)"),
    ("safe_values", "outputs: what safe_action 'values' publishes, one number per element"),
    ("min", "outputs: the smallest value published (one number, or one per element)"),
    ("max", "outputs: the largest value published (one number, or one per element)"),
    ("max_step", "outputs: the largest change from the last published value in one run"),
    ("on_out_of_domain", "a value outside min / max: 'clamp' (outputs), 'drop' or 'safe'"),
    ("blend_s", "outputs: ramp-in from the measured or last command over this many seconds"),
    ("blend_from", "outputs: the external input (joint_pos) a ramp-in starts from, by name"),
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
    on_out_of_domain: str = "clamp"
    blend_s: float = 0.0
    blend_from: str | None = None

    @property
    def limits(self) -> bool:
        """Whether any limit applies to what the port publishes (``min`` / ``max`` clamp only
        with ``on_out_of_domain: clamp``)."""
        return self.clamps or self.max_step is not None

    @property
    def clamps(self) -> bool:
        """Whether ``min`` / ``max`` clamp the port's values."""
        bounded = self.low is not None or self.high is not None
        return bounded and self.on_out_of_domain == "clamp"


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
    low = number_array(f"{where}.min", given["min"], width)
    high = number_array(f"{where}.max", given["max"], width)
    step = number_array(f"{where}.max_step", given["max_step"], width)
    values = number_array(f"{where}.safe_values", given["safe_values"], width, one=False)
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
    domain = given.get("on_out_of_domain") or "clamp"
    if domain not in OUTPUT_DOMAIN_ACTIONS:
        raise StartupError(
            f"{where}.on_out_of_domain must be one of {list(OUTPUT_DOMAIN_ACTIONS)}, got "
            f"{domain!r}"
        )
    if domain != "clamp" and low is None and high is None:
        raise StartupError(f"{where}.on_out_of_domain is {domain!r} but no min / max is set")
    blend_s, blend_from = _blend(where, given.get("blend_s"), given.get("blend_from"))
    return OutputLimits(port, action, values, low, high, step, domain, blend_s, blend_from)


def _blend(where: str, seconds: Any, source: Any) -> tuple[float, str | None]:
    """``blend_s`` (a number >= 0, 0 when unset) and ``blend_from`` (a port name or None)."""
    if seconds is None:
        seconds = 0.0
    number = isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
    if not number or not math.isfinite(seconds) or seconds < 0:
        raise StartupError(f"{where}.blend_s must be a number of seconds >= 0, got {seconds!r}")
    if source is not None and (not isinstance(source, str) or not source):
        raise StartupError(
            f"{where}.blend_from must name an external input port such as joint_pos or "
            f"preprocess/joint_pos, got {source!r}"
        )
    if source is not None and not seconds:
        raise StartupError(f"{where}.blend_from is set but {where}.blend_s is not (> 0)")
    return float(seconds), source


def number_array(where: str, value: Any, width: int, *, one: bool = True) -> np.ndarray | None:
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
