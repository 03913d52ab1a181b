"""The order a pipeline's nodes run in on each tick: :func:`execution_order`.

Every runtime runs the nodes producers before consumers (``pipeline.data_flow``); feedback
edges (``pipeline.feedback_flow``) deliver on the next tick, so they impose no order. Between
nodes that do not depend on each other the listed order (``models``) decides, so every runtime
(:class:`leapp.Pipeline`, the fused ROS node) runs one spec in one order::

    execution_order({"post": {"policy"}, "preprocess": set(), "policy": {"preprocess"}},
                    pipeline="p")
    # ['preprocess', 'policy', 'post']
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from itertools import pairwise

from leapp.errors import SpecError

__all__ = ["execution_order"]


def execution_order(needs: Mapping[str, Collection[str]], *, pipeline: str) -> list[str]:
    """The node names of ``needs`` (node -> the nodes whose data_flow outputs it reads), each
    after the nodes it needs and otherwise in the order of ``needs``.

    Raises:
        SpecError: a node needs one that is not in ``needs``, or data_flow has a cycle; the
            message names the nodes (``pipeline`` names the pipeline) and says what to do.
    """
    for node, producers in needs.items():
        unknown = sorted(set(producers) - needs.keys())
        if unknown:
            raise SpecError(
                f"pipeline {pipeline!r}: node {node!r} reads outputs of {unknown}, which are "
                f"no nodes of it ({', '.join(needs)}); fix pipeline.data_flow"
            )
    order: list[str] = []
    done: set[str] = set()
    while len(order) < len(needs):
        ready = next((n for n in needs if n not in done and done.issuperset(needs[n])), None)
        if ready is None:
            cycle = _cycle({n: needs[n] for n in needs if n not in done})
            path = ", ".join(f"{a} feeds {b}" for a, b in pairwise([*cycle, cycle[0]]))
            raise SpecError(
                f"pipeline {pipeline!r}: data_flow has a cycle through nodes {sorted(cycle)} "
                f"({path}); values that go back to an earlier node belong in feedback_flow"
            )
        order.append(ready)
        done.add(ready)
    return order


def _cycle(waiting: Mapping[str, Collection[str]]) -> list[str]:
    """One cycle among ``waiting`` (each needs at least one other of them), producers first."""
    seen: list[str] = []
    node = next(iter(waiting))
    while node not in seen:
        seen.append(node)
        node = next(n for n in waiting if n in waiting[node])  # the first listed that waits
    cycle = seen[seen.index(node) :][::-1]
    listed = list(waiting)
    start = min(range(len(cycle)), key=lambda i: listed.index(cycle[i]))
    return cycle[start:] + cycle[:start]  # from the first listed node of the cycle
