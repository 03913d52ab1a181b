"""What a node's ``ports.<port>.*`` parameters say about one port's message: a
:class:`PortOverride`, read from parameter values by :func:`port_override`.

``message`` (a type, or ``multiarray``), ``kind``, ``names`` (element names of the last axis;
an image's channel names), ``order`` (an output's joints on the wire), ``layout`` (an image's
or height grid's axes, e.g. ``CHW``) and ``scale`` (what an integer pixel is multiplied by in
a float port). :mod:`leapp_ros.plan.bindings` says what each changes. Pure data, no rclpy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from leapp.errors import LeappError

__all__ = ["PORT_PARAMETERS", "OverrideError", "PortOverride", "port_override"]

PORT_PARAMETERS: tuple[tuple[str, str], ...] = (
    ("message", "message type (e.g. sensor_msgs/msg/JointState), or 'multiarray'"),
    ("kind", "the port's kind when the export has none (e.g. state/joint/position)"),
    ("names", "element names of the port's last axis (joint names; an image's channels)"),
    ("order", "outputs: joint order on the wire (a forward controller's joints)"),
    ("layout", "an image's axes (HW, HWC, CHW, NHWC, NCHW...) or a cloud's (P, HW)"),
    ("scale", "a float image port: integer pixel x scale (16UC1 depth: 0.001, 8-bit: 1/255)"),
)
"""``ports.<port>.<name>`` parameters of every port of a node: ``(name, description)``."""


class OverrideError(LeappError):
    """A ``ports.<port>.*`` parameter has a value of the wrong type."""


@dataclass(frozen=True)
class PortOverride:
    """What the node parameters ``ports.<port>.*`` say about one port (empty: the spec's)."""

    message: str = ""
    kind: str = ""
    names: tuple[str, ...] = ()
    order: tuple[str, ...] = ()
    layout: str = ""
    scale: float | None = None

    @property
    def given(self) -> bool:
        """Whether any parameter is set."""
        return self != PortOverride()


def port_override(where: str, values: Mapping[str, Any]) -> PortOverride:
    """The override of parameter ``values`` (``{name: value or None}``); ``where`` names them
    in errors (``node 'policy': parameters ports.q``).

    Raises:
        OverrideError: a value of the wrong type (a string, a list of names, a number > 0).
    """
    texts, lists = {}, {}
    for name in ("message", "kind", "layout"):
        value = values.get(name)
        if value is not None and not isinstance(value, str):
            raise OverrideError(f"{where}.{name} must be a string, got {value!r}")
        texts[name] = value or ""
    for name in ("names", "order"):
        value = values.get(name)
        sequence = isinstance(value, Sequence) and not isinstance(value, (str, bytes))
        if value is not None and not (sequence and all(isinstance(v, str) for v in value)):
            raise OverrideError(
                f"{where}.{name} must be a list of names such as [hip, knee], got {value!r}"
            )
        lists[name] = tuple(value or ())
    scale = values.get("scale")
    if scale is not None:
        number = isinstance(scale, (int, float)) and not isinstance(scale, bool)
        if not number or not math.isfinite(scale) or scale <= 0:
            raise OverrideError(f"{where}.scale must be a number > 0, got {scale!r}")
        scale = float(scale)
    return PortOverride(**texts, **lists, scale=scale)
