"""A pipeline node's firing rule from its parameters: :func:`firing_rule` applies ``firing``,
``rate_hz``, ``max_input_age``, ``sync``, ``sync_slop_ms`` and ``triggers``
(:mod:`leapp_ros.plan.settings` documents each) to the plan's rule, :func:`trigger_ports`
resolves the names ``triggers`` gives, and :func:`file_firing` applies those a ROS 2
parameters file gives each node to a whole plan (what ``leapp-ros inspect``, the runner and
the launch files show). Every problem is a :class:`~leapp_ros.plan.settings.StartupError`
that says what to change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from leapp_ros.plan.param_sections import node_parameters
from leapp_ros.plan.pipeline import Firing, InputPlan, NodePlan, PipelinePlan
from leapp_ros.plan.settings import PARAMETERS, StartupError

__all__ = ["FIRING_PARAMETERS", "SYNC_MODES", "file_firing", "firing_rule", "trigger_ports"]

SYNC_MODES = ("arrival", "exact", "approximate")
FIRING_PARAMETERS = ("firing", "rate_hz", "max_input_age", "sync", "sync_slop_ms", "triggers")
"""The parameters :func:`firing_rule` reads."""


def file_firing(plan: PipelinePlan, document: Mapping[str, Any] | None) -> PipelinePlan:
    """``plan`` with the firing parameters (:data:`FIRING_PARAMETERS`) that the ROS 2
    parameters file ``document`` gives each node (its ``/**`` section, then the node's own)
    applied, as the node applies them when it starts.

    Raises:
        StartupError: a value of the wrong type, or a rule the node would refuse (named).
    """
    defaults = {name: default for name, default, _ in PARAMETERS if name in FIRING_PARAMETERS}
    nodes = []
    for node in plan.nodes:
        given = node_parameters(document, node.name, plan.namespace)
        if not any(name in given for name in FIRING_PARAMETERS):
            nodes.append(node)  # (as planned; a rule the node refuses is its own to report)
            continue
        settings = {**defaults, "triggers": None}
        for name in FIRING_PARAMETERS:
            if name in given:
                settings[name] = _file_value(node.name, name, given[name])
        nodes.append(replace(node, firing=firing_rule(node, settings)))
    return replace(plan, nodes=tuple(nodes))


def _file_value(node: str, name: str, value: Any) -> Any:
    """One firing parameter's value from a parameters file, checked as the node checks it."""
    where = f"node {node!r}: parameter {name}"
    if name == "triggers":
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise StartupError(f"{where} must be a list of names such as [state], got {value!r}")
        return tuple(names)
    if name in ("firing", "sync"):
        if not isinstance(value, str):
            raise StartupError(f"{where} must be a string, got {value!r}")
        return value
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or value < 0 or not math.isfinite(value):
        raise StartupError(f"{where} must be a number >= 0, got {value!r}")
    return float(value)


def trigger_ports(
    owner: str, names: Sequence[str] | None, ports: Sequence[tuple[str, InputPlan]]
) -> frozenset[int] | None:
    """The positions in ``ports`` (``(node, input plan)`` each) of the inputs that parameter
    ``triggers`` (``names``: ``port`` or ``node/port``; None when unset) names.

    Raises:
        StartupError: an empty list, a name that is no input, or one of an input that never
            triggers (feedback, state); the message lists the inputs that can.
    """
    if names is None:
        return None
    can = [f"{node}/{port.port}" for node, port in ports if port.triggers]
    if not names:
        raise StartupError(
            f"{owner}: parameter triggers lists no input; leave it unset to fire on every "
            f"external and data_flow input ({can}), or run on a timer (firing: timer)"
        )
    chosen: set[int] = set()
    for name in names:
        node, _, port_name = name.rpartition("/")
        found = [
            index
            for index, (owner_node, port) in enumerate(ports)
            if port.port == port_name and node in ("", owner_node)
        ]
        if not found:
            raise StartupError(
                f"{owner}: parameter triggers names {name!r}, which is no input here; the "
                f"inputs that can trigger are {can}"
            )
        never = [ports[index][1] for index in found if not ports[index][1].triggers]
        if never:
            raise StartupError(
                f"{owner}: parameter triggers names {name!r}, a {never[0].kind} input, which "
                "never triggers (feedback comes on the next tick, state stays inside the "
                f"node); the inputs that can trigger are {can}"
            )
        chosen.update(found)
    return frozenset(chosen)


def firing_rule(
    plan: NodePlan,
    settings: Mapping[str, Any],
    ports: Sequence[tuple[str, InputPlan]] | None = None,
    owner: str | None = None,
) -> Firing:
    """The plan's firing rule with the node's parameters applied, checked. ``ports`` are the
    inputs ``triggers`` may name, ``(node, input plan)`` each (default: the plan's own); the
    rule's ``triggers`` are the chosen ones' port names. ``owner`` names the node in errors
    (default ``node '<plan name>'``)."""
    mode = settings["firing"] or plan.firing.mode
    if mode not in ("inputs", "timer"):
        raise StartupError(f"parameter firing must be 'inputs' or 'timer', got {mode!r}")
    owner = owner or f"node {plan.name!r}"
    ports = [(plan.name, port) for port in plan.inputs] if ports is None else ports
    chosen = trigger_ports(owner, settings.get("triggers"), ports)
    sync = settings.get("sync", "arrival")
    if chosen is not None and mode != "inputs" and sync == "arrival":
        raise StartupError(
            f"{owner}: parameter triggers chooses the inputs that fire the node, but it runs "
            "on a timer (firing: timer), on the latest value of every input; unset one of "
            "them, or gather them by stamp (sync: exact), each tick taking the newest set"
        )
    triggers = None if chosen is None else tuple(sorted({ports[i][1].port for i in chosen}))
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
    if sync not in SYNC_MODES:
        raise StartupError(
            f"node {plan.name!r}: parameter sync must be one of {list(SYNC_MODES)}, got {sync!r}"
        )
    slop = settings.get("sync_slop_ms", 0.0) / 1000.0
    return replace(
        plan.firing,
        mode=mode,
        rate_hz=rate,
        max_input_age_s=age,
        sync=sync,
        sync_slop_s=slop,
        triggers=triggers,
    )
