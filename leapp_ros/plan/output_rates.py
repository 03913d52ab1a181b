"""At what rate an output port publishes: targets between results, and action chunks played out.

Every output port of a pipeline node takes these ROS parameters (read once, at configure):

``ports.<port>.output_rate_hz`` (number, Hz)
    > 0: between two results of the node the port publishes a target at this rate (a joint
    controller's rate, e.g. 500), computed from the results by ``interpolate``; an action
    chunk (an output whose first axis is LEAPP's temporal axis, ``__temporal_axis__`` with
    ``temporal_period_ms``) is played out point by point, one row per message. Unset or 0
    (default): one message per result, as computed.
``ports.<port>.interpolate`` (``hold`` | ``linear``)
    How the targets between results are made (default ``hold``): ``hold`` publishes each
    point until the next one is due; ``linear`` goes in a straight line from the last
    published value to the new target over one period (one period of the node's
    ``rate_hz``; for a chunk, ``temporal_period_ms`` from point to point).

The formula (:class:`~leapp_ros.node.target_player.TargetPlayer`): a result gives points
``c_0 .. c_(T-1)`` (``T = 1`` for a plain target), ``Δ`` apart, and ``p``, the value published
last (``c_0`` when nothing was). With ``n = output_rate_hz × Δ``, the ``i``-th target after the
result (``i = 1, 2, ...``) is at ``u = i / n`` periods and ``k = floor(u)``: ``hold`` publishes
``c_min(k, T-1)``; ``linear`` publishes ``a + (b - a)(u - k)`` with ``a = p`` for ``k = 0``, else
``c_(k-1)``, and ``b = c_k``, and ``c_(T-1)`` once ``k >= T``. ``min`` / ``max`` / ``max_step``
(:mod:`leapp_ros.plan.limits`) apply to every published target (``max_step`` per published
step). The next result replaces the rest of the current one.

:func:`declare_output_rates` declares the parameters; :func:`output_rates` checks them against
the node's plan and firing rule. No torch import.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from leapp.spec import ModelSpec
from leapp_ros.plan.bindings import JOINT_TRAJECTORY
from leapp_ros.plan.pipeline import Firing, NodePlan, OutputPlan, PipelinePlan
from leapp_ros.plan.settings import StartupError

__all__ = [
    "INTERPOLATIONS",
    "RATE_PARAMETERS",
    "TEMPORAL_AXIS",
    "OutputRate",
    "consumed_outputs",
    "declare_output_rates",
    "output_rates",
    "played_port",
]

INTERPOLATIONS = ("hold", "linear")
TEMPORAL_AXIS = "__temporal_axis__"

RATE_PARAMETERS: tuple[tuple[str, str], ...] = (
    ("output_rate_hz", "outputs: publish targets at this rate between results (0: per result)"),
    ("interpolate", "outputs: 'hold' or 'linear' targets between results (output_rate_hz)"),
)
"""``ports.<port>.<name>`` parameters of every output port: ``(name, description)``."""


@dataclass(frozen=True)
class OutputRate:
    """One output port played out at its own rate (see the module documentation)."""

    port: str
    index: int  # the port's position among the node's outputs
    rate_hz: float
    interpolate: str = "hold"
    period_s: float = 0.0  # Δ: between the points of a result (a node period, or a chunk's)
    chunk: bool = False  # the port's first axis is time: one row per message

    @property
    def steps(self) -> float:
        """``n``: the targets published per period ``Δ`` (a whole number when near one)."""
        steps = self.rate_hz * self.period_s
        return float(round(steps)) if abs(steps - round(steps)) < 1e-9 else steps


def declare_output_rates(node: Any, *models: ModelSpec) -> dict[str, dict[str, Any]]:
    """Declare ``ports.<port>.{output_rate_hz,interpolate}`` on ``node`` for every output port
    of ``models``; the values given, by port name (ports that set neither left out)."""
    from rcl_interfaces.msg import ParameterDescriptor

    found: dict[str, dict[str, Any]] = {}
    ports = dict.fromkeys(port.name for model in models for port in model.outputs)
    for port in ports:
        given = {}
        for name, description in RATE_PARAMETERS:
            descriptor = ParameterDescriptor(
                description=description, read_only=True, dynamic_typing=True
            )
            given[name] = node.declare_parameter(f"ports.{port}.{name}", None, descriptor).value
        if any(value is not None for value in given.values()):
            found[port] = given
    return found


def output_rates(
    given: Mapping[str, Mapping[str, Any]],
    node: NodePlan,
    firing: Firing,
    consumed: Sequence[str] = (),
    owner: str | None = None,
) -> tuple[OutputRate, ...]:
    """The output ports of ``node`` that ``given`` (:func:`declare_output_rates`) plays out,
    checked; ``firing`` is the node's rule (its ``rate_hz`` is the period of ``linear``),
    ``consumed`` the ports another node reads.

    Raises:
        StartupError: a value of the wrong type, ``interpolate`` without ``output_rate_hz``,
            ``linear`` without a known node rate, an output another node consumes, or a chunk
            sent as one JointTrajectory; the message names the parameter and what to do.
    """
    owner = owner or f"node {node.name!r}"
    found = []
    for index, port in enumerate(node.outputs):
        values = given.get(port.port)
        if values is None:
            continue
        where = f"{owner}: parameter ports.{port.port}"
        rate, mode = values.get("output_rate_hz"), values.get("interpolate")
        if mode is not None and mode not in INTERPOLATIONS:
            raise StartupError(
                f"{where}.interpolate must be one of {INTERPOLATIONS}, got {mode!r}"
            )
        number = isinstance(rate, (int, float)) and not isinstance(rate, bool)
        if rate is not None and (not number or not math.isfinite(rate) or rate < 0):
            raise StartupError(f"{where}.output_rate_hz must be a number >= 0, got {rate!r}")
        if not rate:
            if mode is not None:
                raise StartupError(
                    f"{where}.interpolate needs {where}.output_rate_hz, the rate of the "
                    "targets between results (a controller's, e.g. 500)"
                )
            continue
        found.append(_played(where, port, index, float(rate), mode or "hold", node, firing))
        if port.port in consumed:
            raise StartupError(
                f"{where}.output_rate_hz: output {port.port!r} feeds another node, which takes "
                "each result as it comes; play out only outputs that go to the robot"
            )
    return tuple(found)


def _played(
    where: str,
    port: OutputPlan,
    index: int,
    rate: float,
    mode: str,
    node: NodePlan,
    firing: Firing,
) -> OutputRate:
    if port.dtype not in ("float16", "float32", "float64"):
        raise StartupError(f"{where}.output_rate_hz: output {port.port!r} is {port.dtype}; "
                           "targets are played out for float outputs only")  # fmt: skip
    chunk = bool(port.labels) and port.labels[0] == TEMPORAL_AXIS and len(port.shape) >= 2
    if chunk:
        if port.message_type == JOINT_TRAJECTORY:
            raise StartupError(
                f"{where}.output_rate_hz: a JointTrajectory carries the whole chunk, its points "
                "timed by temporal_period_ms, for the controller to play; unset output_rate_hz, "
                "or send rows (ports.<port>.message: std_msgs/msg/Float64MultiArray)"
            )
        period_ms = node.model.output(port.port).temporal_period_ms
        if not period_ms:
            raise StartupError(f"{where}: chunk {port.port!r} has no temporal_period_ms")
        period = period_ms / 1e3
    elif firing.rate_hz:
        period = 1.0 / firing.rate_hz
    elif mode == "linear":
        raise StartupError(
            f"{where}.interpolate: linear goes to each result over one period of the node, "
            "whose rate is not known; set -p rate_hz:=<Hz> (the rate results come at)"
        )
    else:
        period = 0.0  # hold: each result until the next, whatever the period
    if period and rate * period < 1 - 1e-9:
        raise StartupError(
            f"{where}.output_rate_hz is {rate:g} Hz, slower than the points it plays "
            f"({1 / period:g} Hz): give a rate of at least that"
        )
    return OutputRate(port.port, index, rate, mode, period, chunk)


def played_port(port: OutputPlan, rate: OutputRate | None) -> OutputPlan:
    """The plan of what ``port``'s messages carry: one row of a chunk played out, else the
    port as it is."""
    from dataclasses import replace

    if rate is None or not rate.chunk:
        return port
    binding = port.binding
    if binding is not None:
        binding = replace(binding, period_s=0.0)
    return replace(port, shape=port.shape[1:], labels=port.labels[1:], binding=binding)


def consumed_outputs(plan: PipelinePlan, node: str) -> frozenset[str]:
    """The output ports of ``node`` that another node of ``plan`` reads (over a topic)."""
    return frozenset(
        port.source.split("/", 1)[1]
        for other in plan.nodes
        for port in other.inputs
        if port.source is not None and port.kind != "state" and port.source.split("/")[0] == node
    )
