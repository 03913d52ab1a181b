"""Which nodes of a graph this host runs, for a graph spread over several machines.

Every node of a pipeline talks to the others only through its topics, so a graph can be split
between hosts that share a ROS domain: each host runs some of the nodes (``leapp-ros run
EXPORT --nodes preprocess``, ``ros2 launch leapp_ros pipeline.launch.py nodes:=preprocess``)
and DDS carries the topics between them. :func:`select_nodes` checks such a choice against the
plan; :func:`node_names` reads it from the command line or a launch argument. No rclpy import.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from leapp_ros.plan import NodePlan, PipelinePlan, PlanError

__all__ = ["node_names", "select_nodes"]


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
