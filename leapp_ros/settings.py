"""What a pipeline node needs before it runs, from its ROS parameters and the export.

The parameters every :class:`~leapp_ros.node.PipelineNode` declares (:data:`PARAMETERS`,
:func:`declare_parameters`), the spec (:func:`load_spec`), the firing rule once the parameters
are applied to the plan's (:func:`firing_rule`), the first values of feedback and state inputs
(:func:`initial_values`) and rclpy QoS profiles (:func:`qos_profile`). Every problem is a
:class:`StartupError` that says what to change; ``leapp_node`` turns it into exit code 2.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from leapp.errors import LeappError
from leapp.spec import Spec
from leapp_ros.plan import Firing, NodePlan, QosPlan

__all__ = [
    "PARAMETERS",
    "StartupError",
    "declare_parameters",
    "firing_rule",
    "initial_values",
    "load_spec",
    "qos_profile",
    "whole_numbers",
]


class StartupError(LeappError):
    """A pipeline node cannot start: bad parameters, spec, model or initial values."""


PARAMETERS: tuple[tuple[str, Any, str], ...] = (
    ("spec_path", "", "export folder of the pipeline, or its YAML spec"),
    ("pipeline_node", "", "pipeline node to run (default: the ROS node name)"),
    ("firing", "inputs", "'inputs': run when every triggering input is new; 'timer': rate_hz"),
    ("rate_hz", 0.0, "timer rate in Hz; 0 means pipeline.configs.frequency of the spec"),
    ("max_input_age", 0.0, "skip runs whose inputs are older than this many seconds (0: off)"),
    ("cpu_latency_us", -1, "hold a CPU wake-up latency request of this many us (-1: off)"),
    ("cpu_affinity", (), "run this process on these CPUs only (unset: anywhere)"),
)
"""``(name, default, description)``; a default of ``()`` is an integer array, unset."""


def declare_parameters(node: Any) -> dict[str, Any]:
    """Declare every parameter of :data:`PARAMETERS` on ``node``; their values, checked.

    Numbers accept integers too (``-p rate_hz:=50``) and must be finite and >= 0; integers
    (``cpu_latency_us``) must be whole numbers, -1 or more; integer arrays (``cpu_affinity``)
    whole numbers >= 0, and come back as a tuple (empty when unset).
    """
    from rcl_interfaces.msg import ParameterDescriptor, ParameterType

    values: dict[str, Any] = {}
    for name, default, description in PARAMETERS:
        if default == ():  # any type here, checked below: -p cpu_affinity:=1 means [1]
            array = ParameterDescriptor(
                description=description, read_only=True, dynamic_typing=True
            )
            values[name] = whole_numbers(name, node.declare_parameter(name, None, array).value)
            continue
        numeric = isinstance(default, float)
        whole = isinstance(default, int)
        descriptor = ParameterDescriptor(
            description=description,
            read_only=True,
            dynamic_typing=numeric or whole,  # accept 50 as well as 50.0 (checked below)
            type=ParameterType.PARAMETER_STRING
            if isinstance(default, str)
            else ParameterType.PARAMETER_NOT_SET,
        )
        value = node.declare_parameter(name, default, descriptor).value
        if whole:
            values[name] = _whole_number(name, value)
            continue
        if numeric and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise StartupError(f"parameter {name} must be a number, got {value!r}")
        if numeric and (value < 0 or not math.isfinite(value)):
            raise StartupError(f"parameter {name} must be >= 0, got {value!r}")
        values[name] = float(value) if numeric else value
    return values


def _whole_number(name: str, value: Any) -> int:
    """An integer parameter's value: whole numbers only (2.0 is accepted as 2), -1 or more."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise StartupError(f"parameter {name} must be a whole number, got {value!r}")
    if value < -1:
        raise StartupError(f"parameter {name} must be -1 (off) or >= 0, got {value}")
    return value


def whole_numbers(name: str, value: Any) -> tuple[int, ...]:
    """An integer array parameter's value: whole numbers >= 0; one number counts as a list of
    one, unset (None) as an empty list."""
    numbers = (value,) if isinstance(value, int) and not isinstance(value, bool) else value
    if numbers is None:
        return ()
    # a list or tuple from YAML / the command line, an array.array from a Parameter message
    sequence = isinstance(numbers, Sequence) and not isinstance(numbers, (str, bytes))
    if not sequence or any(
        isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in numbers
    ):
        shown = list(numbers) if sequence else repr(numbers)
        raise StartupError(
            f"parameter {name} must be whole numbers >= 0 such as [0, 1], got {shown}"
        )
    return tuple(numbers)


def load_spec(spec_path: str) -> Spec:
    """The spec at ``spec_path`` (the ``spec_path`` parameter), checksums verified."""
    from leapp import spec as spec_file

    if not spec_path:
        raise StartupError(
            "parameter spec_path is not set; pass -p spec_path:=<export folder or YAML file>"
        )
    return spec_file.load(spec_path, verify_checksums=True)


def firing_rule(plan: NodePlan, settings: Mapping[str, Any]) -> Firing:
    """The plan's firing rule with the node's parameters applied, checked."""
    mode = settings["firing"]
    if mode not in ("inputs", "timer"):
        raise StartupError(f"parameter firing must be 'inputs' or 'timer', got {mode!r}")
    rate = settings["rate_hz"] or plan.firing.rate_hz
    if mode == "inputs" and not any(port.triggers for port in plan.inputs):
        if not rate:
            raise StartupError(
                f"node {plan.name!r} has no input that can trigger it (only feedback or state "
                "inputs); run it on a timer: -p firing:=timer -p rate_hz:=<Hz>"
            )
        mode = "timer"
    if mode == "timer" and not rate:
        raise StartupError(
            f"node {plan.name!r}: firing is 'timer' but no rate is known; pass -p rate_hz:=<Hz> "
            "or export with graph_configs frequency"
        )
    age = settings["max_input_age"] or None
    return replace(plan.firing, mode=mode, rate_hz=rate, max_input_age_s=age)


def initial_values(path: Path | None, plan: NodePlan) -> dict[int, torch.Tensor]:
    """First values of the feedback and state inputs, by input index."""
    needed = {i: port for i, port in enumerate(plan.inputs) if port.kind in ("feedback", "state")}
    if not needed:
        return {}
    ports = [port.port for port in needed.values()]
    where = f"node {plan.name!r}: feedback/state input(s) {ports} need initial values, but"
    if path is None:
        raise StartupError(
            f"{where} the spec names no pipeline.initial_values file; add a safetensors file "
            "with keys '<node>/<port>' and name it there"
        )
    if not path.is_file():
        raise StartupError(f"{where} the initial values file {str(path)!r} does not exist")
    from safetensors.torch import load_file

    tensors = load_file(str(path))
    values = {}
    for index, port in needed.items():
        key = f"{plan.name}/{port.port}"
        value = tensors.get(key)
        if value is None:
            raise StartupError(f"{where} {str(path)!r} has no tensor {key!r}")
        expected = (getattr(torch, port.dtype), tuple(port.shape))
        if (value.dtype, tuple(value.shape)) != expected:
            raise StartupError(
                f"node {plan.name!r}: initial value {key!r} in {str(path)!r} is "
                f"{value.dtype} {list(value.shape)}, the port is {port.dtype} {list(port.shape)}"
            )
        values[index] = value
    return values


def qos_profile(qos: QosPlan) -> Any:
    """The rclpy QoSProfile of a plan's QoS."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    reliable = qos.reliability == "reliable"
    durable = qos.durability == "transient_local"
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=qos.depth,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if durable else DurabilityPolicy.VOLATILE,
    )
