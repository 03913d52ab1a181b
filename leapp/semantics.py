"""What a port means: :class:`TensorSemantics`, :class:`TemporalAxis` and the kind enums.

NVIDIA LEAPP 0.7.2's API for describing a tensor beyond its dtype and shape, accepted by
``annotate.input_tensors`` / ``output_tensors`` / ``state_tensors`` in place of a dict::

    pos, vel = annotate.input_tensors("policy", [
        TensorSemantics(name="joint_pos", ref=q, kind=InputKindEnum.JOINT_POSITION,
                        element_names=["hip", "knee", "ankle"]),
        TensorSemantics(name="joint_vel", ref=dq, kind="state/joint/velocity"),
    ])

``name`` becomes the port, ``ref`` its value, and the rest is written on that port's entry in
the spec: ``kind`` (an enum member or any string), ``element_names`` (one entry per named
axis, counted from the last axis: a list of names, a marker string, or None; a flat list of
names names the last axis), ``temporal_period_ms`` (set by a :class:`TemporalAxis` in
``element_names``) and every key of ``extra`` as a field of its own.

This module sits beside :mod:`leapp.errors` at the bottom of the package: the tracer and the
API both use it, and it imports nothing of leapp but the errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, ClassVar

import numpy as np
import torch

from leapp.errors import PortNameError, PortTypeError, SemanticsError

__all__ = [
    "TEMPORAL_AXIS",
    "InputKindEnum",
    "OutputKindEnum",
    "TemporalAxis",
    "TensorSemantics",
    "split_semantics",
]

#: the marker ``element_names`` holds for the axis a :class:`TemporalAxis` describes
TEMPORAL_AXIS = "__temporal_axis__"

#: fields every port entry of the spec has, which ``extra`` may not override
_PORT_FIELDS = frozenset(
    {"name", "dtype", "shape", "type", "kind", "element_names", "temporal_period_ms"}
)


class InputKindEnum(str, Enum):
    """Standard ``kind`` values of input ports (NVIDIA LEAPP's names and strings); a member
    also equals its string (``InputKindEnum.JOINT_POSITION == "state/joint/position"``)."""

    JOINT_POSITION = "state/joint/position"
    JOINT_VELOCITY = "state/joint/velocity"
    JOINT_EFFORT = "state/joint/effort"
    BODY_POSE = "state/body/pose"
    BODY_VEL = "state/body/velocity"
    BODY_ACC = "state/body/acceleration"
    BODY_LINEAR_ACCELERATION = "state/body/linear_acceleration"
    BODY_LINEAR_VELOCITY = "state/body/linear_velocity"
    BODY_ANGULAR_ACCELERATION = "state/body/angular_acceleration"
    BODY_ANGULAR_VELOCITY = "state/body/angular_velocity"
    BODY_ROTATION = "state/body/rotation"
    BODY_POSITION = "state/body/position"
    WRENCH = "state/wrench"
    VECTOR3D = "state/vector3d"
    COMMAND_JOINT_POSITION = "command/joint/position"
    COMMAND_JOINT_VELOCITY = "command/joint/velocity"
    COMMAND_JOINT_TORQUES = "command/joint/torques"
    COMMAND_BODY_ROTATION = "command/body/rotation"
    COMMAND_BODY_VELOCITY = "command/body/velocity"
    COMMAND_POSE = "command/body/pose"


class OutputKindEnum(str, Enum):
    """Standard ``kind`` values of output ports (NVIDIA LEAPP's names and strings); a member
    also equals its string (``OutputKindEnum.KP == "kp"``)."""

    KP = "kp"
    KD = "kd"
    JOINT_POSITION = "target/joint/position"
    JOINT_VELOCITY = "target/joint/velocity"
    JOINT_TORQUES = "target/joint/torques"
    JOINT_EFFORT = "target/joint/effort"
    BODY_POSITION = "target/body/position"
    BODY_LINEAR_ACCELERATION = "target/body/linear_acceleration"
    BODY_ORIENTATION = "target/body/orientation"
    BODY_LINEAR_VELOCITY = "target/body/linear_velocity"
    BODY_ANGULAR_ACCELERATION = "target/body/angular_acceleration"


@dataclass(frozen=True)
class TemporalAxis:
    """An ``element_names`` entry marking a time axis whose steps are ``period_ms`` apart."""

    period_ms: float

    def __post_init__(self) -> None:
        period = self.period_ms
        if isinstance(period, bool) or not isinstance(period, (int, float)) or period <= 0:
            raise SemanticsError(
                f"TemporalAxis(period_ms={period!r}): the period must be a positive number of "
                "milliseconds, e.g. TemporalAxis(20) for steps 20 ms apart."
            )


@dataclass(eq=False)
class TensorSemantics:
    """A named tensor with its meaning; ``name`` is the port, ``ref`` the value.

    ``element_names`` is normalized to one entry per named axis: ``["x", "y", "z"]`` becomes
    ``[["x", "y", "z"]]``; ``[TemporalAxis(20), names]`` becomes ``["__temporal_axis__",
    names]`` with ``temporal_period_ms`` 20. Entries name the last axes of ``ref`` (so
    ``[["x", "y", "z"]]`` fits a ``[1, 3]`` tensor), and a list of names must have one name
    per element of its axis. ``extra`` keys are written as fields of their own on the port.
    Compared by identity (``ref`` is a tensor).
    """

    _INTERNAL_FIELDS: ClassVar[frozenset[str]] = frozenset({"ref", "name"})

    name: str | None = None
    ref: Any = None
    kind: InputKindEnum | OutputKindEnum | str | None = None
    element_names: list[Any] | None = None
    temporal_period_ms: float | None = field(default=None, init=False)
    extra: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        known_period, self.temporal_period_ms = self.temporal_period_ms, None
        what = f"TensorSemantics({self.name!r})"
        if self.name is not None and not isinstance(self.name, str):
            raise PortTypeError(f"{what}: name must be a str (the port name), got {self.name!r}.")
        if not isinstance(self.ref, (torch.Tensor, np.ndarray)):
            raise PortTypeError(
                f"{what}: ref must be the tensor it describes (a torch.Tensor or np.ndarray), "
                f"got {type(self.ref).__name__}; pass ref=<the tensor>."
            )
        _check_kind(what, self.kind)
        if self.element_names is not None:
            names, period = _normalize(what, self.element_names, known_period is not None)
            _check_fit(what, names, tuple(self.ref.shape))
            self.element_names = names
            self.temporal_period_ms = period if period is not None else known_period
        if self.extra is not None:
            self.extra = _checked_extra(what, self.extra)

    def to_dict(self) -> dict[str, Any]:
        """The semantic fields that are set (``kind`` as given), ``extra`` flattened in."""
        result = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in self._INTERNAL_FIELDS and f.name != "extra"
            if getattr(self, f.name) is not None
        }
        result.update(self.extra or {})
        return result

    def update(self, values: Mapping[str, Any]) -> None:
        """Set semantic fields from ``values``; keys that are not fields go to ``extra``."""
        settable = {f.name for f in fields(self) if f.init} - self._INTERNAL_FIELDS
        for key, value in values.items():
            if key in settable:
                setattr(self, key, value)
            else:
                self.extra = {**(self.extra or {}), key: value}
        self.__post_init__()

    def spec_fields(self) -> dict[str, Any]:
        """The fields this adds to the port's spec entry, as plain YAML data."""
        result: dict[str, Any] = {}
        if self.kind is not None:
            result["kind"] = self.kind.value if isinstance(self.kind, Enum) else self.kind
        if self.element_names is not None:
            result["element_names"] = [
                list(axis) if isinstance(axis, list) else axis for axis in self.element_names
            ]
        if self.temporal_period_ms is not None:
            result["temporal_period_ms"] = self.temporal_period_ms
        result.update(_plain(self.extra or {}))
        return result


def split_semantics(payload: Any, where: str) -> tuple[dict[str, Any], dict[str, dict]]:
    """``({port: ref}, {port: spec fields})`` for a TensorSemantics or a list of them.

    ``where`` says which call got the payload, for the messages (e.g. ``"annotate.input_tensors
    ('policy') at run.py:12"``).
    """
    items = [payload] if isinstance(payload, TensorSemantics) else list(payload)
    strays = sorted({type(i).__name__ for i in items if not isinstance(i, TensorSemantics)})
    if strays:
        raise PortTypeError(
            f"{where}: a list holding TensorSemantics must hold only TensorSemantics, but it "
            f"also holds {', '.join(strays)}. Wrap every tensor in TensorSemantics(name=..., "
            "ref=...), or pass a dict {name: tensor} instead."
        )
    tensors: dict[str, Any] = {}
    semantics: dict[str, dict] = {}
    for item in items:
        if item.name is None:
            raise PortTypeError(
                f"{where}: TensorSemantics(ref=..., kind={item.kind!r}) has no name; give "
                "each one name=<port name>."
            )
        if item.name in tensors:
            raise PortNameError(
                f"{where}: two TensorSemantics are named {item.name!r}; each port of a node "
                "needs its own name."
            )
        tensors[item.name] = item.ref
        semantics[item.name] = item.spec_fields()
    return tensors, semantics


# ------------------------------------------------------------------------ element names
def _normalize(what: str, names: Any, sentinel_allowed: bool) -> tuple[list[Any], float | None]:
    """One entry per axis, and the period of a TemporalAxis among them (NVIDIA's rules)."""
    if isinstance(names, str):
        names = [names] if names == TEMPORAL_AXIS else [[names]]
    if not isinstance(names, (list, tuple)) or not names:
        raise PortTypeError(
            f"{what}: element_names must be a non-empty list, got {names!r}; pass the names of "
            "the last axis (['x', 'y', 'z']) or one entry per axis ([TemporalAxis(20), names])."
        )
    axes: list[Any] = []
    period = None
    per_axis = False  # plain strings are one axis's names unless another entry is an axis
    for item in names:
        if isinstance(item, TemporalAxis):
            if period is not None:
                raise SemanticsError(f"{what}: element_names holds more than one TemporalAxis.")
            period, item = item.period_ms, TEMPORAL_AXIS
        elif isinstance(item, str) and item == TEMPORAL_AXIS and not sentinel_allowed:
            raise SemanticsError(
                f"{what}: {TEMPORAL_AXIS!r} is reserved; mark a time axis with TemporalAxis"
                "(period_ms) instead."
            )
        elif isinstance(item, (list, tuple)):
            if not all(isinstance(n, str) and n != TEMPORAL_AXIS for n in item):
                raise SemanticsError(
                    f"{what}: element_names entry {item!r} must list plain names (strings); a "
                    "TemporalAxis is an entry of its own, not inside an axis's names."
                )
            item = list(item)
        elif item is not None and not isinstance(item, str):
            raise PortTypeError(
                f"{what}: element_names entry {item!r} is a {type(item).__name__}; use names "
                "(str), a list of names per axis, None for an unnamed axis, or a TemporalAxis."
            )
        per_axis = per_axis or not isinstance(item, str) or item == TEMPORAL_AXIS
        axes.append(item)
    return (axes if per_axis else [axes]), period


def _check_fit(what: str, axes: list[Any], shape: tuple[int, ...]) -> None:
    """Entries name the last ``len(axes)`` axes; a list has one name per element."""
    if len(axes) > len(shape):
        raise SemanticsError(
            f"{what}: element_names has {len(axes)} axis entries but ref has shape "
            f"{list(shape)} ({len(shape)} axes); give at most one entry per axis."
        )
    for offset, entry in enumerate(axes):
        axis = len(shape) - len(axes) + offset
        if isinstance(entry, list) and len(entry) != shape[axis]:
            raise SemanticsError(
                f"{what}: element_names entry {offset} has {len(entry)} names but axis {axis} "
                f"of ref (shape {list(shape)}) has {shape[axis]} elements; give one name per "
                "element."
            )


# ---------------------------------------------------------------------------- the rest
def _check_kind(what: str, kind: Any) -> None:
    value = kind.value if isinstance(kind, Enum) else kind
    if kind is not None and not isinstance(value, str):
        raise PortTypeError(
            f"{what}: kind must be an InputKindEnum/OutputKindEnum member or a string such as "
            f"'state/joint/position', got {kind!r}."
        )
    if value == "":
        raise SemanticsError(f"{what}: kind is empty; leave it None or name the kind.")


def _checked_extra(what: str, extra: Any) -> dict[str, Any]:
    if not isinstance(extra, Mapping):
        raise PortTypeError(f"{what}: extra must be a dict of field: value, got {extra!r}.")
    for key, value in extra.items():
        if not isinstance(key, str) or key in _PORT_FIELDS:
            raise SemanticsError(
                f"{what}: extra key {key!r} cannot be a field of the port's spec entry: keys "
                f"are strings other than {', '.join(sorted(_PORT_FIELDS))}; rename it."
            )
        _check_plain(what, key, value)
    return dict(extra)


def _check_plain(what: str, key: str, value: Any) -> None:
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_plain(what, key, item)
    elif isinstance(value, Mapping):
        for item in value.values():
            _check_plain(what, key, item)
    elif not (value is None or isinstance(value, (str, int, float, bool, Enum))):
        raise PortTypeError(
            f"{what}: extra[{key!r}] holds a {type(value).__name__}, which the spec (YAML) "
            "cannot hold; use strings, numbers, booleans, None, and lists or dicts of them."
        )


def _plain(value: Any) -> Any:
    """``value`` as built-in YAML data (enum members as their value, NumPy scalars unwrapped)."""
    if isinstance(value, Enum):
        return _plain(value.value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value
