"""Whether a running node may switch to another export's policy: :func:`switch_differences`
and :func:`carried_states`.

A node switches policies on a running graph (:mod:`leapp_ros.node.policy_switch`) only to an
export whose nodes it runs have the same ports: same input and output names in the same order
(the artifacts take and give their values by position), the same dtype, shape, ``kind`` and
``element_names`` of each, and the same wiring of those nodes (``data_flow`` and
``feedback_flow`` edges, ``pipeline.inputs`` and ``pipeline.outputs``), so that every topic,
message and link of the graph stays as it is. Anything else is a *difference*, listed in
words (``policy/obs: shape [15] -> [16]``); an export with any is refused. The weights, the
backend, the initial values and the system information may differ. Knows nothing of ROS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from leapp.spec import Spec

__all__ = ["PORT_FIELDS", "carried_states", "switch_differences"]

PORT_FIELDS = ("dtype", "shape", "kind", "element_names")
"""The fields of a port that must agree (besides its name and position)."""


def switch_differences(
    running: Spec, new: Spec, nodes: Sequence[str], *, whole: bool = False
) -> list[str]:
    """What keeps pipeline nodes ``nodes`` of ``running`` from running ``new``'s policy in
    their place, one line each (empty: nothing, the switch may go ahead); ``whole``: they are
    the whole graph (a fused node, ``leapp-ros switch``), so a node only ``new`` has, which
    nobody would run, is a difference too."""
    found: list[str] = []
    names = [model.name for model in new.models]
    if whole:
        found += [
            f"node {name!r} is only in the new export: the running graph has no node for it"
            for name in names
            if name not in nodes
        ]
    for name in nodes:
        if name not in names:
            found.append(f"node {name!r} is not in the new export (its nodes: {', '.join(names)})")
            continue
        old, fresh = running.model(name), new.model(name)
        for direction in ("inputs", "outputs"):
            found += _port_differences(name, direction, getattr(old, direction),
                                       getattr(fresh, direction))  # fmt: skip
        found += _wiring_differences(running.pipeline, new.pipeline, name)
    return found


def _port_differences(node: str, direction: str, old: Sequence[Any], new: Sequence[Any]):
    before, after = [p.name for p in old], [p.name for p in new]
    if before != after:
        return [f"{node}: {direction} {before} -> {after}"]
    found = []
    for port, other in zip(old, new, strict=True):
        for field in PORT_FIELDS:
            a, b = getattr(port, field), getattr(other, field)
            if a != b:
                found.append(f"{node}/{port.name}: {field} {_shown(a)} -> {_shown(b)}")
    return found


def _wiring_differences(old: Any, new: Any, node: str) -> list[str]:
    found = []
    for section in ("data_flow", "feedback_flow"):
        before = _edges(getattr(old, section), node)
        after = _edges(getattr(new, section), node)
        for source, target in sorted(before - after):
            found.append(f"{section} {source} -> {target}: not in the new export")
        for source, target in sorted(after - before):
            found.append(f"{section} {source} -> {target}: only in the new export")
    for section in ("inputs", "outputs"):
        before = tuple(getattr(old, section).get(node, ()))
        after = tuple(getattr(new, section).get(node, ()))
        if sorted(before) != sorted(after):
            found.append(f"pipeline.{section} of {node}: {list(before)} -> {list(after)}")
    return found


def _edges(flow: Mapping[str, Sequence[str]], node: str) -> set[tuple[str, str]]:
    """The edges of ``flow`` that leave or reach ``node``."""
    return {
        (source, target)
        for source, targets in flow.items()
        for target in targets
        if node in (source.split("/", 1)[0], target.split("/", 1)[0])
    }


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return str([_plain(v) for v in value])
    return str(value)


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, tuple) else value


def carried_states(
    names: Sequence[str], states: Mapping[str, Sequence[str]]
) -> tuple[dict[str, set[str]], list[str]]:
    """Which state inputs a switch carries over: ``names`` (``carry_state``: a port name, for
    that state input of every node having one, or ``<node>/<port>``) among ``states`` (each
    pipeline node's state input ports); ``({node: {port, ...}}, names matching none)``."""
    carried: dict[str, set[str]] = {node: set() for node in states}
    unknown = []
    for name in names:
        node, _, port = name.rpartition("/")
        hits = [n for n, ports in states.items() if port in ports and node in ("", n)]
        if not hits:
            unknown.append(name)
        for hit in hits:
            carried[hit].add(port)
    return carried, unknown
