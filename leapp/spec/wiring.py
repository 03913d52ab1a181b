"""Checks of a spec's wiring: its edges (``pipeline.data_flow``, ``pipeline.feedback_flow``)
and pipeline inputs and outputs against the ports of its models. Part of
:func:`leapp.spec.load`'s checks (:mod:`leapp.spec.parser`); problems read like theirs,
``"<yaml path>: expected <what> but found <what>"``.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from leapp.spec.pairs import as_complex
from leapp.spec.schema import ModelSpec, Spec, TensorSpec

__all__ = ["FLOW_KEYS", "check_wiring"]

FLOW_KEYS = ("data_flow", "feedback_flow")


class _Problems(list):  # type: ignore[type-arg]
    def __init__(self, doubtful: AbstractSet[int]) -> None:
        super().__init__()
        self.doubtful = doubtful

    def add(self, where: str, message: str) -> None:
        self.append(f"{where}: {message}")


def check_wiring(spec: Spec, doubtful: AbstractSet[int] = frozenset()) -> list[str]:
    """Problems with the edges and the pipeline inputs/outputs, each ``"<yaml path>:
    <message>"``: they must name real ports, data flows must go forward, the two ends of an
    edge must agree in dtype and shape, every input must be fed exactly once and every output
    must be routed (to an edge or to the pipeline outputs).

    ``doubtful`` holds the ids of ports built from values already reported as invalid; edges
    touching them are not checked for agreement (that would report a consequence twice).
    """
    problems = _Problems(doubtful)
    order = {model.name: i for i, model in enumerate(spec.models)}
    feeders: dict[str, list[str]] = {}
    for section in FLOW_KEYS:
        for source, targets in getattr(spec.pipeline, section).items():
            where = f"pipeline.{section}.{source}"
            out = _resolve(spec, source, "output", where, problems)
            for j, target in enumerate(targets):
                inp = _resolve(spec, target, "input", f"{where}[{j}]", problems)
                if inp is None:
                    continue
                feeders.setdefault(target, []).append(f"pipeline.{section}.{source}")
                if out is None:
                    continue
                _check_edge(source, out, target, inp, f"{where}[{j}]", problems)
                src_node, dst_node = source.split("/")[0], target.split("/")[0]
                if section == "data_flow" and order[src_node] >= order[dst_node]:
                    problems.add(f"{where}[{j}]", _backward_edge(source, target))
    for section, role in (("inputs", "input"), ("outputs", "output")):
        for node, names in getattr(spec.pipeline, section).items():
            for j, port in enumerate(names):
                key = f"{node}/{port}"
                found = _resolve(spec, key, role, f"pipeline.{section}.{node}[{j}]", problems)
                if found is not None and section == "inputs":
                    feeders.setdefault(key, []).append(f"pipeline.inputs.{node}")
    for model in spec.models:
        for i, port in enumerate(model.inputs):
            key = f"{model.name}/{port.name}"
            fed_by = feeders.get(key, [])
            if not fed_by:
                problems.add(
                    f"models.{model.name}.inputs[{i}]",
                    f"expected {key} to be fed by exactly one of pipeline.data_flow, "
                    f"pipeline.feedback_flow or pipeline.inputs but nothing feeds it; add it to "
                    f"pipeline.inputs.{model.name} or connect an output to it",
                )
            elif len(fed_by) > 1:
                problems.add(
                    f"models.{model.name}.inputs[{i}]",
                    f"expected {key} to be fed exactly once but found {len(fed_by)} feeds "
                    f"({', '.join(fed_by)}); keep one",
                )
    _check_routing(spec, problems)
    return list(problems)


def _check_routing(spec: Spec, problems: _Problems) -> None:
    """Every model output must go somewhere: to an edge or to the pipeline outputs."""
    routed = {source for section in FLOW_KEYS for source in getattr(spec.pipeline, section)}
    for model in spec.models:
        listed = set(spec.pipeline.outputs.get(model.name, ()))
        for i, port in enumerate(model.outputs):
            key = f"{model.name}/{port.name}"
            if key not in routed and port.name not in listed:
                problems.add(
                    f"models.{model.name}.outputs[{i}]",
                    f"expected {key} in pipeline.outputs.{model.name}, pipeline.data_flow or "
                    f"pipeline.feedback_flow but nothing routes it (node {model.name!r} has "
                    f"unroutable outputs); add it to pipeline.outputs.{model.name}, or re-export "
                    "if the YAML was edited by hand",
                )


def _backward_edge(source: str, target: str) -> str:
    src_node, dst_node = source.split("/")[0], target.split("/")[0]
    if src_node == dst_node:
        found = f"{source} feeds an input of its own node"
    else:
        found = f"{source} feeds {target} and {dst_node!r} is listed before {src_node!r}"
    return (
        f"expected a forward edge (models lists producers before consumers) but {found}; "
        "reorder models, or use feedback_flow for a loop"
    )


def _resolve(
    spec: Spec, key: str, role: str, where: str, problems: _Problems
) -> TensorSpec | None:
    """The ``role`` ("input" or "output") port called ``key`` ("node/port"), or a problem."""
    node, sep, port = key.partition("/")
    if not sep or not node or not port or "/" in port:
        problems.add(where, f"expected '<node>/<port>' (an {role}) but found {key!r}")
        return None
    models = {model.name: model for model in spec.models}
    if node not in models:
        problems.add(
            where, f"expected a node of models ({', '.join(models)}) but found {node!r} in {key!r}"
        )
        return None
    ports = {p.name: p for p in (models[node].inputs if role == "input" else models[node].outputs)}
    if port not in ports:
        other = "output" if role == "input" else "input"
        hint = f", which is an {other}" if _has_port(models[node], port, other) else ""
        problems.add(
            where,
            f"expected an {role} of node {node!r} ({', '.join(ports) or 'none'}) but found "
            f"{port!r}{hint}",
        )
        return None
    return ports[port]


def _has_port(model: ModelSpec, name: str, role: str) -> bool:
    return any(p.name == name for p in (model.inputs if role == "input" else model.outputs))


def _check_edge(
    source: str, out: TensorSpec, target: str, inp: TensorSpec, where: str, problems: _Problems
) -> None:
    if out.dtype == inp.dtype and out.shape == inp.shape:
        return
    carried, taken = as_complex(out), as_complex(inp)  # complex values written as real pairs
    if carried.dtype == taken.dtype and carried.shape == taken.shape:
        return
    if id(out) in problems.doubtful or id(inp) in problems.doubtful:
        return  # already reported
    problems.add(
        where,
        f"expected {target} to match {source} (dtype {out.dtype}, shape {list(out.shape)}) but "
        f"found dtype {inp.dtype}, shape {list(inp.shape)}; make both ports agree",
    )
