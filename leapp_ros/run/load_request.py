"""A composition_interfaces ``LoadNode`` request, checked and turned into what the node it
asks for is created with (:class:`~leapp_ros.run.composition.ComponentContainer` serves it).

The container loads ``leapp_ros::PipelineNode`` of package ``leapp_ros`` only
(:func:`check_plugin`). The node takes only what the request says: ``remap_rules``,
``node_name`` and ``node_namespace`` become its ROS arguments as rclcpp builds them
(:func:`node_arguments`), ``parameters`` its parameter overrides (:func:`parameters_of`),
``log_level`` (10 debug, 20 info, 30 warn, 40 error, 50 fatal; 0 leaves it) the level of its
logger (:func:`log_level_of`). ``extra_arguments`` may hold ``use_intra_process_comms`` (a
bool, default false as in rclcpp; :func:`intra_process_asked`) and ``forward_global_arguments``
(false only); anything else is refused. A request that cannot be served raises
:class:`CompositionError`, whose message becomes the response's ``error_message``. No rclpy
import at module level.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leapp.errors import LeappError

__all__ = [
    "PACKAGE",
    "PLUGIN",
    "ROS_LOG_LEVELS",
    "CompositionError",
    "check_plugin",
    "cpus_asked",
    "intra_process_asked",
    "log_level_of",
    "node_arguments",
    "one_line",
    "parameters_of",
]

PACKAGE = "leapp_ros"
PLUGIN = "leapp_ros::PipelineNode"
ROS_LOG_LEVELS = {10: "debug", 20: "info", 30: "warn", 40: "error", 50: "fatal"}


class CompositionError(LeappError):
    """A load or unload request cannot be served; the message becomes its ``error_message``."""


def node_arguments(remap_rules: Sequence[str], node_name: str, namespace: str) -> list[str]:
    """The ROS arguments of a loaded node, built as rclcpp's ComponentManager builds them (so
    a ``__node`` or ``__ns`` remap rule wins over ``node_name`` and ``namespace``); a relative
    namespace is taken from the root (rcl accepts only absolute ones in a remap)."""
    arguments = ["--ros-args"]
    for rule in remap_rules:
        arguments += ["-r", rule]
    if node_name:
        arguments += ["-r", f"__node:={node_name}"]
    if namespace:
        arguments += ["-r", f"__ns:=/{namespace.lstrip('/')}"]
    return arguments


def check_plugin(package: str, plugin: str) -> None:
    if (package, plugin) != (PACKAGE, PLUGIN):
        raise CompositionError(
            f"this container loads only plugin {PLUGIN!r} of package {PACKAGE!r}, not "
            f"{plugin!r} of {package!r}; load other components into their own container "
            "(rclcpp_components' component_container for C++ ones)"
        )


def intra_process_asked(arguments: Sequence[Any]) -> bool:
    """Refuse what the container does not take; whether ``use_intra_process_comms`` is on."""
    from rcl_interfaces.msg import ParameterType

    intra_process = False
    for argument in arguments:
        name, value = argument.name, argument.value
        if name not in ("use_intra_process_comms", "forward_global_arguments"):
            raise CompositionError(
                f"unknown extra argument {name!r}; this container accepts "
                "use_intra_process_comms (a bool) and forward_global_arguments (false)"
            )
        if value.type != ParameterType.PARAMETER_BOOL:
            raise CompositionError(f"extra argument {name!r} must be a boolean")
        if name == "forward_global_arguments" and value.bool_value:
            raise CompositionError(
                "extra argument forward_global_arguments must be false: the container's own "
                "ROS arguments (its -r __node:= and __ns:=) would rename the node; put what "
                "the node needs into the request's remap rules and parameters"
            )
        if name == "use_intra_process_comms":
            intra_process = value.bool_value
    return intra_process


def log_level_of(level: int) -> int | None:
    if level == 0:
        return None
    if level not in ROS_LOG_LEVELS:
        known = ", ".join(f"{number} ({name})" for number, name in ROS_LOG_LEVELS.items())
        raise CompositionError(
            f"log_level {level} is not a ROS log level; use 0 or one of {known}"
        )
    return level


def parameters_of(messages: Sequence[Any]) -> list[Any]:
    """The request's parameters as rclpy Parameters."""
    from rclpy.parameter import Parameter

    parameters = []
    for message in messages:
        try:
            parameter = Parameter.from_parameter_msg(message)
        except Exception as e:
            raise CompositionError(
                f"parameter {message.name!r} has no usable value ({one_line(e)}); give it a "
                "value of a ROS parameter type"
            ) from e
        parameters.append(parameter)
    return parameters


def cpus_asked(parameters: Sequence[Any]) -> tuple[int, ...] | None:
    """The CPUs a request's ``cpu_affinity`` asks for, sorted; None when unset or not numbers
    (the node itself then says what is wrong with it)."""
    from leapp_ros.plan.settings import StartupError, whole_numbers

    values = [p.value for p in parameters if p.name == "cpu_affinity"]
    try:
        numbers = whole_numbers("cpu_affinity", values[-1] if values else None)
    except StartupError:
        return None
    return tuple(sorted(set(numbers))) or None


def one_line(error: object) -> str:
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip())
