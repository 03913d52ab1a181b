"""Which sections of a ROS 2 parameters file reach a node, as ROS 2 decides it.

A parameters file's top-level keys name nodes by their absolute names: ``/**`` every node,
``/<ns>/<node>`` one, ``*`` one name of the path and ``**`` any number (``/**/<node>``: a node
of that name in any namespace). A key without a leading ``/`` is absolute all the same:
``<node>`` reaches ``/<node>`` in the root namespace, not a node of that name in a namespace.
leapp_ros reads a file's sections where it must know before the nodes start what they will be
given (the ports' messages, the firing rules, the stand-in's safe actions) and reads them the
same way, so that the plan and the running nodes never disagree; a section that names one of
the graph's nodes without its namespace reaches none of them, which
:func:`unreached_sections` reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["flat_parameters", "names_node", "node_parameters", "unreached_sections"]


def node_parameters(
    document: Mapping[str, Any] | None, node: str, namespace: str = "/"
) -> dict[str, Any]:
    """The parameters a ROS 2 parameters file gives the node ``node`` in ``namespace``, flat
    (``ports.q.kind``): every section whose key names it as ROS 2 reads keys, in file order
    (``/**``; ``/<ns>/<node>``; ``*`` for one name of the path, ``**`` for any number, e.g.
    ``/**/<node>``; a key without a leading ``/`` is absolute all the same, so ``<node>``
    reaches a node of that name in the root namespace only)."""
    merged: dict[str, Any] = {}
    name = f"{namespace.rstrip('/')}/{node}"
    for key, section in (document or {}).items():
        if names_node(str(key), name):
            merged.update(flat_parameters((section or {}).get("ros__parameters", {})))
    return merged


def unreached_sections(document: Mapping[str, Any], nodes: Sequence[str], namespace: str) -> str:
    """What is wrong with the sections of a parameters file ``document`` that name one of
    ``nodes`` without a namespace while the graph runs in ``namespace`` (not the root): ROS 2
    gives such a section to ``/<node>`` only, so none of the graph's nodes would get it.
    Empty where there is none."""
    if namespace.strip("/") == "":
        return ""
    bare = [str(key) for key in document if str(key).strip("/") in nodes]
    if not bare:
        return ""
    first = bare[0].strip("/")
    return (
        f"section(s) {bare} reach no node of this graph: ROS 2 reads a key without a "
        f"namespace as /{first} in the root namespace, and the graph's nodes are in "
        f"{namespace}; write '/**/{first}' (any namespace) or '{namespace.rstrip('/')}/{first}'"
    )


def names_node(key: str, name: str) -> bool:
    """Whether the parameters-file key ``key`` names the node of absolute name ``name``."""
    return _matches(key.strip("/").split("/"), name.strip("/").split("/"))


def _matches(pattern: list[str], parts: list[str]) -> bool:
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_matches(rest, parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and head in ("*", parts[0]) and _matches(rest, parts[1:])


def flat_parameters(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A ``ros__parameters`` tree as flat names (``{"ports": {"q": {"kind": k}}}`` as
    ``{"ports.q.kind": k}``)."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            flat.update(flat_parameters(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
