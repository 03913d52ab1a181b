"""The pipeline nodes inside a fused node (:mod:`leapp_ros.node.fused_node`), as stages: each
one's data path (:class:`~leapp_ros.node.data_path.NodeData`) and its links to the others,
in producer-before-consumer order (:func:`load_stages`).

A stage's ``data_links`` hand an output to a consumer in the same tick, its
``feedback_links`` on the next one; ``publish_now`` are the pipeline results (published as soon
as the stage has run), ``publish_later`` the intermediates another stage consumes (published
once the tick is over, each with what says whether anyone wants it). :func:`tick_firing` is
the fused node's firing rule, :func:`external_readers` a stage's input topics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from leapp.errors import SpecError
from leapp.spec import Spec
from leapp.spec.order import execution_order
from leapp_ros.messages.packed_inputs import PackedInput
from leapp_ros.messages.topic_io import OutputWriter, TopicReader
from leapp_ros.node.data_path import NodeData
from leapp_ros.node.input_sets import InputSets
from leapp_ros.node.match_count import MatchCount
from leapp_ros.plan.firing_settings import firing_rule
from leapp_ros.plan.pipeline import NodePlan, PipelinePlan
from leapp_ros.plan.settings import StartupError

__all__ = [
    "OWNER",
    "Stage",
    "external_readers",
    "load_stages",
    "stage_input_sets",
    "tick_firing",
]

OWNER = "leapp_fused (its triggers are external inputs; values between nodes come in the tick)"


@dataclass(eq=False)
class Stage(NodeData):
    """One pipeline node inside the fused node: its data path and its links to the others."""

    producers: frozenset[int] = frozenset()  # stages whose outputs it reads in the same tick
    data_links: list[tuple[int, Stage, int]] = field(default_factory=list)
    feedback_links: list[tuple[int, Stage, int]] = field(default_factory=list)
    publish_now: list[tuple[int, Any, OutputWriter]] = field(default_factory=list)
    # intermediates, published after the outputs; each with what says whether anyone wants it
    publish_later: list[tuple[int, Any, OutputWriter, Callable[[], int]]] = field(
        default_factory=list
    )
    publishers: list[Any] = field(default_factory=list)
    input_counts: list[tuple[str, MatchCount]] = field(default_factory=list)  # by topic


def load_stages(
    spec: Spec, plan: PipelinePlan, *, check_nonfinite: bool, **guards: Any
) -> list[Stage]:
    """The pipeline's nodes as stages in producer-before-consumer order, wired together;
    ``guards`` (``limits``, ``bounds``, ``rate_hz``) as :meth:`NodeData.load` takes them."""
    order = _node_order(plan)
    position = {node.name: n for n, node in enumerate(order)}
    stages = []
    for node in order:
        stage = Stage.load(spec, plan, node, check_nonfinite=check_nonfinite, **guards)
        stage.producers = frozenset(
            position[port.source.split("/", 1)[0]]
            for port in node.inputs
            if port.kind == "data_flow" and port.source is not None
        )
        stages.append(stage)
    by_name = {stage.name: stage for stage in stages}
    for consumer in stages:
        for index, port in enumerate(consumer.plan.inputs):
            if port.kind not in ("data_flow", "feedback") or port.source is None:
                continue
            producer_name, output = port.source.split("/", 1)
            producer = by_name[producer_name]
            link = (producer.plan.outputs.index(producer.plan.output(output)), consumer, index)
            links = producer.data_links if port.kind == "data_flow" else producer.feedback_links
            links.append(link)
    return stages


def _node_order(plan: PipelinePlan) -> list[NodePlan]:
    """The plan's nodes, producers before consumers (data_flow), otherwise in plan order."""
    needs = {
        node.name: {
            port.source.split("/", 1)[0]
            for port in node.inputs
            if port.kind == "data_flow" and port.source is not None
        }
        for node in plan.nodes
    }
    try:
        names = execution_order(needs, pipeline=plan.name)
    except SpecError as e:
        raise StartupError(str(e)) from e
    return [plan.node(name) for name in names]


def tick_firing(plan: PipelinePlan, settings: dict[str, Any]) -> Any:
    """The tick rule: the nodes' firing parameters applied to the pipeline as one node (its
    triggers name external inputs: values between nodes come within the tick)."""
    from dataclasses import replace

    externals = [
        (node.name, p) for node in plan.nodes for p in node.inputs if p.kind == "external"
    ]
    rules = {node.name: node.firing for node in plan.nodes}
    base = plan.nodes[0].firing
    if len(set(rules.values())) > 1:  # the spec's node_frequency: no one rule for a tick
        if not settings["firing"]:
            shown = {name: rule.describe() for name, rule in rules.items()}
            raise StartupError(
                f"{OWNER}: the spec gives its nodes rates of their own "
                f"(pipeline.configs.node_frequency: {shown}), but a fused node runs every "
                "node per tick, at one rate: run one process per node or composed, or give "
                "the fused node its rule (-p firing:=timer -p rate_hz:=<Hz>, or "
                "-p firing:=inputs)"
            )
        base = replace(base, mode="inputs", rate_hz=plan.frequency)  # the pipeline's
    whole = replace(
        plan.nodes[0], name=plan.name, inputs=tuple(p for _, p in externals), firing=base
    )
    return firing_rule(whole, settings, externals, owner=OWNER)


def external_readers(stage: Stage) -> list[Any]:
    """One reader per external input topic of ``stage``, and its packed input if it has one."""
    topics: dict[str, list[int]] = {}
    for index, port in enumerate(stage.plan.inputs):
        if port.kind == "external":
            topics.setdefault(port.topic, []).append(index)
    copy = not stage.reads_only
    readers: list[Any] = [TopicReader(stage.plan.inputs, i, copy=copy) for i in topics.values()]
    if stage.plan.packed is not None:
        readers.append(PackedInput(stage.plan, copy=copy))
    return readers


def stage_input_sets(stages: list[Stage], firing: Any, chosen: Any) -> InputSets:
    """The external inputs of every stage, keyed ``(stage number, input)``: the ``chosen``
    triggers (positions among them, parameter ``triggers``; None: all of them) form the sets
    that fire a tick, the others are newest-value inputs (all of them on a timer, unless the
    triggers are gathered by stamp: ``firing: timer`` with a ``sync``)."""
    externals = [
        (number, index)
        for number, stage in enumerate(stages)
        for index, port in enumerate(stage.plan.inputs)
        if port.kind == "external"
    ]
    timer = firing.mode != "inputs"
    if timer and firing.sync == "arrival":
        triggers: frozenset[tuple[int, int]] = frozenset()
    elif chosen is None:
        triggers = frozenset(externals)
    else:
        triggers = frozenset(externals[position] for position in chosen)
    held = {key: (stages[key[0]], key[1]) for key in externals}
    newest = {key: place for key, place in held.items() if key not in triggers}
    gathered = {key: held[key] for key in triggers} if timer else None
    return InputSets(triggers, newest, firing.max_input_age_s, gathered)
