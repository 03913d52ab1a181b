"""What a pipeline node needs before it runs, from its ROS parameters and the export.

The parameters every :class:`~leapp_ros.node.pipeline_node.PipelineNode` declares
(:data:`PARAMETERS`, :func:`declare_parameters`; any other one is refused:
:func:`refuse_unknown_parameters`), the spec (:func:`load_spec`), the per-port message
overrides ``ports.<port>.*`` (:func:`declare_port_overrides`, or :func:`port_overrides` from a
parameters file) and rclpy QoS profiles (:func:`qos_profile`). The firing rule is
:mod:`leapp_ros.plan.firing_settings`, the first values of feedback and state inputs
:mod:`leapp_ros.plan.initial_values`. Every problem is a :class:`StartupError` that says what to
change; ``leapp_node`` turns it into exit code 2. No torch import.

The parameters of a pipeline node (all read once at startup):

``spec_path`` (string)
    The export folder or its YAML file. Required.
``pipeline_node`` (string)
    The pipeline node to run; default: the ROS node name.
``firing`` (``inputs`` | ``timer``)
    ``inputs``: run when every trigger (``triggers``) has a new message since the last run.
    ``timer``: run at ``rate_hz`` on the latest values, once every input has a value. Unset
    (default): ``timer`` for a node the spec gives a rate of its own
    (``pipeline.configs.node_frequency``), else ``inputs``. A node without triggering inputs
    runs on the timer when a rate is known.
``triggers`` (string array)
    The inputs whose messages fire the node (``firing: inputs``; on a timer with ``sync:
    exact | approximate``, those gathered by stamp, each tick taking the newest whole set), by
    port name (``state``, or ``<node>/state``); unset (default): every external and data-flow
    input. Every other external and data-flow input is a *newest-value* input: a run uses its
    latest message; one that has not arrived yet, or (with ``max_input_age``) arrived too long
    ago, skips the run, counted as ``stale``. Feedback and state inputs never trigger.
``rate_hz`` (number)
    Timer rate; 0 means the spec's: the node's ``pipeline.configs.node_frequency`` entry,
    else ``pipeline.configs.frequency``.
``max_input_age`` (number, seconds)
    When > 0, a run whose inputs include one received longer ago than this (a trigger of its
    set, a newest-value input, or on a timer any input) is skipped and counted as ``stale``
    (with ``firing: inputs`` an old trigger must then arrive anew).
``cpu_latency_us`` (integer, microseconds)
    When >= 0, the node holds a Linux CPU latency request of this many microseconds while it
    runs (:mod:`leapp_ros.plan.cpu_settings`): idle CPUs stay within that wake-up time, which cuts
    the cost of every message between processes at the price of power. -1 (default) leaves the
    system alone. Where the request cannot be made (it needs write access to
    ``/dev/cpu_dma_latency``) the node logs a warning that says how to get it and runs anyway.
``cpu_affinity`` (integer array)
    When set, the node's process runs on these CPUs only (every thread, also the middleware's),
    e.g. ``-p cpu_affinity:=[1]`` (one number is a list of one); a CPU the process may not use
    is a startup error. Nodes in one container share the process: give them the same CPUs (the
    container refuses different ones).
    Unset (default): anywhere.
``on_nonfinite`` (``drop`` | ``publish``)
    ``drop`` (default): an input message holding a NaN or an infinity is not used, nor is a
    run whose results hold one (nothing is published, state inputs keep their value); each is
    counted (``nonfinite_inputs``, ``nonfinite_outputs``) and logged at most once a second.
    ``publish``: such values go through as any other.
``on_out_of_domain`` (``drop`` | ``safe``)
    What an input value outside its ``ports.<port>.min`` / ``max`` does, for the ports that
    do not say (:mod:`leapp_ros.plan.domain`): ``drop`` (default) skips the run, ``safe``
    publishes the safe action and latches it until ``~/enable`` or a lifecycle transition.
``ports.<port>.message|kind|names|order|layout|scale``
    The message of an external input or an output (see :mod:`leapp_ros.plan.bindings` and the
    docs' how-to on robot messages): a type, or ``multiarray``; the port's kind and joint names for
    exports without semantics; the joint order on the wire of an output; an image's axes and
    pixel scale (:mod:`leapp_ros.plan.port_override`).
``autostart`` (bool)
    true (default): configure and activate at startup; false: wait for ``ros2 lifecycle``.
``input_timeout_ms`` (number)
    When > 0, an active node whose triggering inputs formed no set for this long publishes
    its safe action once per period (``ports.<port>.safe_action``, :mod:`leapp_ros.plan.limits`).
``estop_topic`` (string)
    A ``std_msgs/Bool`` topic (latched) the node listens to: true engages its e-stop.
``raw_messages`` (bool)
    true (default): the data topics are read and written as serialized CDR bytes
    (``raw=True`` subscriptions, pre-serialized publishes; :mod:`leapp_ros.messages.cdr`),
    the same messages on the wire without building rclpy message objects. Where the rmw is
    not known to hand out serialized messages, the node logs one line and uses rclpy's
    messages. false: always rclpy's messages.
``stand_in`` (string)
    The node name of the graph's stand-in (:mod:`leapp_ros.run.stand_in`), set by
    :func:`~leapp_ros.run.processes.plan_processes` when the graph has one: after each
    activation the node commands only once the stand-in's record (``_leapp/stand_in``) says
    it watches this process and no longer stands in for the node, so that the stand-in's
    last safe action comes before the node's first command, and a crash right after the
    start is covered too. Empty (default): no stand-in, no wait.
``qos_overrides./<ns>/<topic>.publisher|subscription.<policy>``
    The standard rclpy QoS overrides (history, depth, reliability) of every data topic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from leapp.errors import LeappError
from leapp.spec import ModelSpec, Spec
from leapp_ros.plan.param_sections import node_parameters
from leapp_ros.plan.pipeline import QosPlan
from leapp_ros.plan.port_override import (
    PORT_PARAMETERS,
    OverrideError,
    PortOverride,
    port_override,
)

__all__ = [
    "NONFINITE_POLICIES",
    "OTHER_PARAMETERS",
    "PARAMETERS",
    "PORT_PARAMETERS",
    "StartupError",
    "declare_parameters",
    "declare_port_overrides",
    "load_spec",
    "port_overrides",
    "qos_profile",
    "refuse_unknown_parameters",
    "whole_numbers",
]


class StartupError(LeappError):
    """A pipeline node cannot start: bad parameters, spec, model or initial values."""


PARAMETERS: tuple[tuple[str, Any, str], ...] = (
    ("spec_path", "", "export folder of the pipeline, or its YAML spec"),
    ("pipeline_node", "", "pipeline node to run (default: the ROS node name)"),
    ("firing", "", "'inputs': run when every trigger is new; 'timer': rate_hz (unset: spec's)"),
    ("rate_hz", 0.0, "timer rate in Hz; 0: the spec's (node_frequency, else frequency)"),
    ("max_input_age", 0.0, "skip runs whose inputs are older than this many seconds (0: off)"),
    ("cpu_latency_us", -1, "hold a CPU wake-up latency request of this many us (-1: off)"),
    ("cpu_affinity", (), "run this process on these CPUs only (unset: anywhere)"),
    ("on_nonfinite", "drop", "'drop': NaN/inf inputs and results are not used; 'publish'"),
    ("triggers", [], "the inputs that fire the node (unset: every external and data_flow one)"),
    ("sync", "arrival", "a set of inputs: 'arrival' (newest), 'exact' / 'approximate' (stamps)"),
    ("sync_slop_ms", 10.0, "sync 'approximate': largest spread of header stamps in one set"),
    ("autostart", True, "configure and activate at startup; false: wait for ros2 lifecycle"),
    ("input_timeout_ms", 0.0, "safe action when no input set came for this long (0: off)"),
    ("estop_topic", "", "a std_msgs/Bool topic: true engages the e-stop, false releases it"),
    ("raw_messages", True, "data topics as serialized CDR bytes (false: rclpy messages)"),
    ("on_out_of_domain", "drop", "an input outside ports.<port>.min / max: 'drop' or 'safe'"),
    ("stand_in", "", "the graph's stand-in node: command once it watches this process"),
)
"""``(name, default, description)``; a default of ``()`` is an integer array, ``[]`` a string
array, both unset."""

OTHER_PARAMETERS = ("publish_intermediate", "use_sim_time", "start_type_description_service")
"""Parameters a pipeline node leaves to others: ``leapp_fused``'s own, rclpy's."""

NONFINITE_POLICIES = ("drop", "publish")
OUT_OF_DOMAIN_POLICIES = ("drop", "safe")


def declare_parameters(node: Any) -> dict[str, Any]:
    """Declare every parameter of :data:`PARAMETERS` on ``node``; their values, checked.

    Numbers accept integers too (``-p rate_hz:=50``) and must be finite and >= 0; integers
    (``cpu_latency_us``) must be whole numbers, -1 or more; integer arrays (``cpu_affinity``)
    whole numbers >= 0, and come back as a tuple (empty when unset).
    """
    from rcl_interfaces.msg import ParameterDescriptor, ParameterType

    values: dict[str, Any] = {}
    for name, default, description in PARAMETERS:
        if default == []:  # a list of names, unset by default: -p triggers:=[state]
            names = ParameterDescriptor(
                description=description, read_only=True, dynamic_typing=True
            )
            values[name] = _names(name, node.declare_parameter(name, None, names).value)
            continue
        if default == ():  # any type here, checked below: -p cpu_affinity:=1 means [1]
            array = ParameterDescriptor(
                description=description, read_only=True, dynamic_typing=True
            )
            values[name] = whole_numbers(name, node.declare_parameter(name, None, array).value)
            continue
        if isinstance(default, bool):
            flag = ParameterDescriptor(
                description=description, read_only=True, type=ParameterType.PARAMETER_BOOL
            )
            values[name] = node.declare_parameter(name, default, flag).value
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
    if values["on_nonfinite"] not in NONFINITE_POLICIES:
        raise StartupError(
            f"parameter on_nonfinite must be 'drop' or 'publish', got {values['on_nonfinite']!r}"
        )
    if values["on_out_of_domain"] not in OUT_OF_DOMAIN_POLICIES:
        raise StartupError(
            "parameter on_out_of_domain must be 'drop' or 'safe', got "
            f"{values['on_out_of_domain']!r}"
        )
    return values


def declare_port_overrides(node: Any, *models: ModelSpec) -> dict[str, PortOverride]:
    """Declare ``ports.<port>.{message,kind,names,order}`` for every port of ``models`` (one
    for a ``leapp_node``, all for a fused node, where a name applies to every port that has
    it); the overrides that set anything, by port name."""
    from rcl_interfaces.msg import ParameterDescriptor

    owner = " ".join(repr(model.name) for model in models)
    ports = list(dict.fromkeys(p.name for m in models for p in (*m.inputs, *m.outputs)))
    found: dict[str, PortOverride] = {}
    for port in ports:
        values: dict[str, Any] = {}
        for name, description in PORT_PARAMETERS:
            key = f"ports.{port}.{name}"
            descriptor = ParameterDescriptor(
                description=description, read_only=True, dynamic_typing=True
            )
            values[name] = node.declare_parameter(key, None, descriptor).value
        override = _port_override(f"node {owner}: parameters ports.{port}", values)
        if override != PortOverride():
            found[port] = override
    given = getattr(node, "_parameter_overrides", {})  # rclpy's, from the command line / file
    unknown = sorted(n for n in given if n.startswith("ports.") and not node.has_parameter(n))
    if unknown:  # a warning, not an error: a "/**" section reaches every node
        node.get_logger().warning(
            f"node {owner}: parameter(s) {unknown} name no port of this node, ignored "
            f"them; its ports are {ports} and each takes ports.<port>."
            f"{'|'.join(name for name, _ in PORT_PARAMETERS)}"
            " (inputs also min|max|on_out_of_domain, outputs also safe_action|safe_values|"
            "min|max|max_step|on_out_of_domain|blend_s|blend_from|output_rate_hz|interpolate)"
        )
    return found


def port_overrides(
    document: Mapping[str, Any], nodes: Sequence[str], namespace: str = "/"
) -> dict[str, dict]:
    """The ``ports.<port>.*`` overrides a ROS 2 parameters file gives each of ``nodes`` (in
    ``namespace``), as ROS 2 gives them (:func:`node_parameters`)."""
    found: dict[str, dict[str, PortOverride]] = {}
    for node in nodes:
        ports: dict[str, dict[str, Any]] = {}
        for key, value in node_parameters(document, node, namespace).items():
            parts = key.split(".")
            if len(parts) == 3 and parts[0] == "ports":
                ports.setdefault(parts[1], {})[parts[2]] = value
        overrides = {
            port: _port_override(f"node {node!r}: parameters ports.{port}", values)
            for port, values in ports.items()
        }
        overrides = {port: o for port, o in overrides.items() if o.given}  # not limits alone
        if overrides:
            found[node] = overrides
    return found


def _port_override(where: str, values: Mapping[str, Any]) -> PortOverride:
    try:
        return port_override(where, values)
    except OverrideError as e:
        raise StartupError(str(e)) from None


def _whole_number(name: str, value: Any) -> int:
    """An integer parameter's value: whole numbers only (2.0 is accepted as 2), -1 or more."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise StartupError(f"parameter {name} must be a whole number, got {value!r}")
    if value < -1:
        raise StartupError(f"parameter {name} must be -1 (off) or >= 0, got {value}")
    return value


def _names(name: str, value: Any) -> tuple[str, ...] | None:
    """A string array parameter's value: None when unset, one string counting as a list of one."""
    if value is None:
        return None
    names = (value,) if isinstance(value, str) else value
    sequence = isinstance(names, Sequence) and not isinstance(names, bytes)
    if not sequence or not all(isinstance(n, str) and n for n in names):
        shown = list(names) if sequence else repr(names)
        raise StartupError(
            f"parameter {name} must be a list of names such as [state], got {shown}"
        )
    return tuple(names)


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


def refuse_unknown_parameters(node: Any, owner: str) -> None:
    """Raise unless every parameter given to ``node`` (command line, parameters file, load
    request) is one it declared, one of :data:`OTHER_PARAMETERS`, a ``ports.<port>.*``
    (:func:`declare_port_overrides` warns of those) or a ``qos_overrides.*`` (rclpy's).

    Raises:
        StartupError: naming the unknown parameters and the known ones, so that a typo
            (``trigers``, ``max_input_ages``) never passes unnoticed.
    """
    given = getattr(node, "_parameter_overrides", {})
    unknown = sorted(
        name
        for name in given
        if not node.has_parameter(name)
        and name not in OTHER_PARAMETERS
        and not name.startswith(("ports.", "qos_overrides."))
    )
    if unknown:
        known = [name for name, _, _ in PARAMETERS]
        raise StartupError(
            f"{owner}: unknown parameter(s) {unknown}; a leapp node takes {known}, "
            "ports.<port>.* and qos_overrides.* (leapp_fused also publish_intermediate): "
            "check the spelling in the parameters file or the -p arguments"
        )
