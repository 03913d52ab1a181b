"""A node's later runs checked against its first: one exported graph serves every run, so each
run must record the same graph, with the same ports, described by the same semantics.
"""

from __future__ import annotations

from leapp.errors import GraphError
from leapp.trace.tensors.node_trace import NodeTrace

__all__ = ["check_rerun"]


def check_rerun(first: NodeTrace, again: NodeTrace) -> None:
    """Raise a GraphError if run ``again`` of a node differs from its ``first`` run."""
    _check_same_structure(first, again)
    _check_same_semantics(first, again)


def _check_same_semantics(first: NodeTrace, again: NodeTrace) -> None:
    """A node that runs again must describe its ports as its first run did."""
    for role in ("input", "output"):
        before, now = getattr(first, f"{role}_semantics"), getattr(again, f"{role}_semantics")
        changed = [p for p in dict.fromkeys([*before, *now]) if before.get(p) != now.get(p)]
        if changed:
            port = changed[0]
            raise GraphError(
                f"node {first.node!r} ran again at {again.location} with different semantics "
                f"for {role} {port!r} than its first run at {first.location} (first "
                f"{before.get(port) or 'none'}, now {now.get(port) or 'none'}); one exported "
                "port has one meaning: pass the same TensorSemantics on every run."
            )


def _check_same_structure(first: NodeTrace, again: NodeTrace) -> None:
    """A node that runs again must record the same graph; otherwise the names collide."""

    def signature(trace: NodeTrace):
        ops = [(n.op, str(n.target)) for n in trace.graph.nodes if n.op != "get_attr"]
        ports = [(k, tuple(v.shape), v.dtype) for k, v in trace.input_examples.items()]
        outs = [(k, tuple(v.shape), v.dtype) for k, v in trace.output_examples.items()]
        return ops, ports, outs

    if signature(first) != signature(again):
        raise GraphError(
            f"node {first.node!r} ran again at {again.location} but recorded a different graph "
            f"or different ports than its first run at {first.location}. If these are two "
            "different nodes, give them different names; if it is one node, its Python control "
            "flow or input shapes changed between runs, which one exported graph cannot "
            "represent."
        )
