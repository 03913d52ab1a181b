"""Which nodes of a graph this host runs, for a graph spread over several machines.

Every node of a pipeline talks to the others only through its topics, so a graph can be split
between hosts that share a ROS domain: each host runs some of the nodes (``leapp-ros run
EXPORT --nodes preprocess``, ``ros2 launch leapp_ros pipeline.launch.py nodes:=preprocess``)
and DDS carries the topics between them. :func:`select_nodes` checks such a choice against the
plan; :func:`node_names` reads it from the command line or a launch argument;
:func:`container_name` names the component container that holds a host's share, composed, so
that two hosts' containers never share a name. No rclpy import.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from leapp_ros.plan.pipeline import NodePlan, PipelinePlan, PlanError

__all__ = ["CONTAINER_NAME", "container_name", "node_names", "select_nodes"]

CONTAINER_NAME = "leapp_container"
"""The name of a container holding every node of a graph (``-r __node:=`` renames it)."""


def node_names(values: str | Iterable[str]) -> tuple[str, ...]:
    """The node names in comma lists (``"a,b"``, or several such values), in order, blanks
    dropped: ``node_names(["preprocess", "policy, filter"]) == ("preprocess", "policy",
    "filter")``."""
    if isinstance(values, str):
        values = [values]
    return tuple(name.strip() for value in values for name in value.split(",") if name.strip())


def select_nodes(plan: PipelinePlan, names: Sequence[str] | None) -> tuple[NodePlan, ...]:
    """The nodes of ``plan`` that ``names`` names, in pipeline order (repeats count once);
    every node when ``names`` is None.

    Raises:
        PlanError: a name is not a node of the pipeline, or ``names`` names no node; the
            message lists the pipeline's nodes.
    """
    if names is None:
        return plan.nodes
    known = [node.name for node in plan.nodes]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise PlanError(
            f"pipeline {plan.name!r} has no node {', '.join(map(repr, unknown))}; choose "
            f"among its nodes: {', '.join(known)}"
        )
    if not names:
        raise PlanError(
            f"the choice of nodes to run names none; name some of the nodes of pipeline "
            f"{plan.name!r} ({', '.join(known)}), or leave the choice out to run them all"
        )
    return tuple(node for node in plan.nodes if node.name in names)


def container_name(pipeline: Sequence[str], held: Iterable[str]) -> str:
    """The name of the container node that holds the nodes ``held`` of a pipeline whose nodes
    are ``pipeline`` (in pipeline order): ``leapp_container`` when it holds every node, else
    ``leapp_container_<its first node in pipeline order>``.

    Containers of disjoint shares of one graph get different names (the first node of one
    share is in no other), so hosts that each compose a share can run under one namespace
    without two nodes of the same name; the name depends on the set held, not on the order
    it was named in. ``container_name(("preprocess", "policy"), ["policy"]) ==
    "leapp_container_policy"``.

    Raises:
        ValueError: ``held`` names none of ``pipeline``'s nodes.
    """
    chosen = set(held)
    share = [name for name in pipeline if name in chosen]
    if not share:
        raise ValueError(f"a container holds some of the nodes {list(pipeline)}, not none")
    if len(share) == len(pipeline):
        return CONTAINER_NAME
    return f"{CONTAINER_NAME}_{share[0]}"
