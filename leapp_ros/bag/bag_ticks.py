"""A bag as ticks of a pipeline: which recorded messages feed which graph input, grouped as the
nodes group them, decoded as the nodes decode them.

:func:`topic_map` says which bag topic feeds each of the graph's topics: the graph's own name
(``/<namespace>/<node>/<port>``, ``/<namespace>/<node>/joint_states``), or a remap rule
``FROM:=TO`` (FROM a graph topic, TO the bag's; relative names resolve in the namespace, as
ROS remapping does). :func:`load_ticks` reads the bag once and checks it as a whole before
anything starts: every external input topic present with the graph's message type and at least
one message, every message readable (robot messages too: a JointState's joints are picked by
name, in any order, as the node picks them), else a :class:`~leapp_ros.bag.bag_file.BagError`
naming the topic or file.

Ticks follow the recorded order: a tick is complete when every external input topic has a new
message, and holds the newest message of each (what a node firing on its inputs uses; older
ones are counted as ``superseded``); an incomplete set at the end is left over. A tick keeps
its messages' bytes only: its ``inputs`` are decoded again on each access, so a bag of camera
frames is held in memory once, as the bag's bytes, not a second time as tensors. With
``recorded=True`` the bag's output topics are read too, one value per tick: the k-th recorded
message when a topic has one per tick, else the first message received after the tick's
inputs and before the next tick's (None where there is none).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from leapp_ros.bag.bag_file import BagContents, BagError, read_bag
from leapp_ros.messages import cdr
from leapp_ros.messages.multiarray import MessageError, codec
from leapp_ros.messages.raw_multiarray import RawArrayCodec
from leapp_ros.messages.robot_codecs import OutputEncoder
from leapp_ros.messages.topic_io import TopicReader, topic_readers
from leapp_ros.plan.pipeline import OutputPlan, PipelinePlan

__all__ = [
    "BagTick",
    "BagTicks",
    "TickInputs",
    "as_tensor",
    "input_readers",
    "load_ticks",
    "output_decoder",
    "topic_map",
]


@dataclass(frozen=True)
class BagTick:
    """One tick: when its last input was recorded, the graph input topics' payloads and the
    ``"node/port"`` values they carry (a :class:`TickInputs`, decoded on access)."""

    index: int
    time_ns: int
    messages: Mapping[str, bytes]
    inputs: Mapping[str, torch.Tensor]


@dataclass(frozen=True)
class BagTicks:
    """What :func:`load_ticks` made of a bag: ``ticks`` in order, ``superseded`` input
    messages replaced by a newer one before their set was complete, the topics of an
    incomplete last set (``left_over``) and, with ``recorded``, the recorded value of each
    output per tick (``"node/port"`` -> one value or None per tick)."""

    bag: Path
    start_ns: int
    ticks: tuple[BagTick, ...]
    superseded: int
    left_over: tuple[str, ...]
    recorded: Mapping[str, tuple[torch.Tensor | None, ...]]
    unrecorded: tuple[str, ...]  # outputs without a topic in the bag (with ``recorded``)

    def seconds(self, tick: BagTick) -> float:
        """``tick``'s time since the bag's first message."""
        return (tick.time_ns - self.start_ns) / 1e9


def topic_map(plan: PipelinePlan, remaps: Sequence[str] = ()) -> dict[str, str]:
    """Graph topic -> bag topic for every data topic of ``plan`` (absolute names).

    Raises:
        BagError: a rule is not ``FROM:=TO``, or FROM is no topic of the graph.
    """
    topics = {topic for topic, _ in plan.topics()}
    mapping = {topic: topic for topic in topics}
    for rule in remaps:
        source, separator, target = rule.partition(":=")
        if not separator or not source or not target:
            raise BagError(f"remap {rule!r} is not FROM:=TO (e.g. preprocess/joint_states:=/js)")
        graph_topic, bag_topic = _absolute(plan, source), _absolute(plan, target)
        if graph_topic not in topics:
            raise BagError(
                f"remap {rule!r}: {graph_topic} is no topic of graph {plan.namespace}; its "
                f"topics are {', '.join(sorted(topics))}"
            )
        mapping[graph_topic] = bag_topic
    return mapping


def _absolute(plan: PipelinePlan, name: str) -> str:
    return name if name.startswith("/") else plan.resolve(name)


def load_ticks(
    plan: PipelinePlan,
    bag: str | os.PathLike[str] | BagContents,
    remaps: Sequence[str] = (),
    *,
    recorded: bool = False,
) -> BagTicks:
    """The ticks of external inputs in ``bag`` for the graph of ``plan``; with ``recorded``
    also the recorded outputs (see the module documentation).

    Raises:
        BagError: the bag is unreadable, lacks an input topic (or, with ``recorded``, every
            output topic), has one of another type, or holds a message that cannot be read.
    """
    mapping = topic_map(plan, remaps)
    readers = input_readers(plan)
    contents = bag if isinstance(bag, BagContents) else read_bag(bag, set(mapping.values()))
    for topic, (_, reader) in readers.items():
        _check_topic(contents, mapping[topic], reader.message_type, f"input {topic}", plan)
    feeding = {mapping[topic]: topic for topic in readers}
    ticks, pending, superseded = [], {}, 0
    for message in contents.messages:
        topic = feeding.get(message.topic)
        if topic is None:
            continue
        superseded += topic in pending
        pending[topic] = message
        if len(pending) == len(readers):
            ticks.append(_tick(len(ticks), pending, readers, contents))
            pending = {}
    if not ticks:
        raise BagError(
            f"bag {contents.path} holds no complete set of inputs: every tick needs a message "
            f"on each of {', '.join(mapping[t] for t in readers)}"
        )
    outputs, unrecorded = {}, ()
    if recorded:
        outputs, unrecorded = _recorded_outputs(plan, contents, mapping, ticks)
    return BagTicks(
        contents.path,
        contents.start_ns,
        tuple(ticks),
        superseded,
        tuple(sorted(pending)),
        outputs,
        unrecorded,
    )


def input_readers(plan: PipelinePlan) -> dict[str, tuple[Any, TopicReader]]:
    """Graph input topic (absolute) -> (node plan, the node's reader of it)."""
    readers = {}
    for node in plan.nodes:
        for reader in topic_readers(node.inputs):
            if node.inputs[reader.indices[0]].kind == "external":
                readers[plan.resolve(reader.topic)] = (node, reader)
    return readers


def _check_topic(
    contents: BagContents, bag_topic: str, message_type: str, what: str, plan: PipelinePlan
) -> None:
    found = contents.types.get(bag_topic)
    if found is None:
        graph_topic = what.split(" ", 1)[1]
        listed = ", ".join(f"{t} ({k})" for t, k in sorted(contents.types.items())) or "none"
        alike = [topic for topic, kind in sorted(contents.types.items()) if kind == message_type]
        source = alike[0] if len(alike) == 1 else "/bag/topic"
        hint = (
            f"map it with --remap {graph_topic.removeprefix(plan.namespace + '/')}:={source}"
            if bag_topic == graph_topic
            else "fix the remap rule"
        )
        raise BagError(
            f"bag {contents.path} has no topic {bag_topic} ({what}, {message_type}); its topics "
            f"are {listed}; {hint}"
        )
    if found != message_type:
        raise BagError(
            f"bag {contents.path}: topic {bag_topic} ({what}) holds {found} messages, the graph "
            f"takes {message_type}; record the graph's topic or remap another one"
        )
    if not contents.count(bag_topic):
        raise BagError(f"bag {contents.path}: topic {bag_topic} ({what}) holds no message")


class TickInputs(Mapping[str, torch.Tensor]):
    """A tick's ``"node/port"`` values, decoded from its messages' bytes on each access (a
    tensor of its own each time)."""

    def __init__(self, sources: Mapping[str, tuple[TopicReader, int, bytes]]):
        self._sources = dict(sources)

    def __getitem__(self, key: str) -> torch.Tensor:
        reader, position, data = self._sources[key]
        return as_tensor(reader.read_raw(data)[position])

    def __iter__(self) -> Iterator[str]:
        return iter(self._sources)

    def __len__(self) -> int:
        return len(self._sources)


def _tick(
    index: int,
    pending: Mapping[str, Any],
    readers: Mapping[str, tuple[Any, TopicReader]],
    contents: BagContents,
) -> BagTick:
    sources: dict[str, tuple[TopicReader, int, bytes]] = {}
    for topic, message in pending.items():
        node, reader = readers[topic]
        at = f"{message.topic} at {(message.time_ns - contents.start_ns) / 1e9:.3f} s"
        try:
            reader.read_raw(message.data)  # every message is checked before anything starts
        except MessageError as e:
            raise BagError(
                f"bag {contents.path}: the message on {at} cannot be read as the graph's input "
                f"{topic}: {e}"
            ) from e
        for n, position in enumerate(reader.indices):
            key = f"{node.name}/{node.inputs[position].port}"
            sources[key] = (reader, n, message.data)
    time_ns = max(message.time_ns for message in pending.values())
    return BagTick(index, time_ns, {t: m.data for t, m in pending.items()}, TickInputs(sources))


def as_tensor(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.clone()
    return torch.from_numpy(np.array(value))


def output_decoder(port: OutputPlan) -> Any:
    """A function from one output message's CDR bytes to the port's tensor."""
    if port.binding is None:
        raw = RawArrayCodec(codec(port))
        return lambda data: as_tensor(raw.from_bytes(data))
    encoder = OutputEncoder(port.binding, port.dtype, port.shape, port.labels)
    fields = cdr.layout(encoder.message_class)
    return lambda data: as_tensor(encoder.decode(cdr.read(data, fields)))


def _recorded_outputs(
    plan: PipelinePlan, contents: BagContents, mapping: Mapping[str, str], ticks: list[BagTick]
) -> tuple[dict[str, tuple[torch.Tensor | None, ...]], tuple[str, ...]]:
    recorded, unrecorded = {}, []
    bounds = [tick.time_ns for tick in ticks[1:]] + [2**63]
    for node in plan.nodes:
        for port in node.outputs:
            key, topic = f"{node.name}/{port.port}", plan.resolve(port.topic)
            bag_topic = mapping[topic]
            if bag_topic not in contents.types or not contents.count(bag_topic):
                unrecorded.append(key)
                continue
            _check_topic(contents, bag_topic, port.message_type, f"output {topic}", plan)
            decode = output_decoder(port)
            messages = [m for m in contents.messages if m.topic == bag_topic]
            if len(messages) == len(ticks):
                chosen = messages
            else:
                chosen = [
                    next((m for m in messages if tick.time_ns <= m.time_ns < bound), None)
                    for tick, bound in zip(ticks, bounds, strict=True)
                ]
            values = []
            for message in chosen:
                try:
                    values.append(None if message is None else decode(message.data))
                except MessageError as e:
                    raise BagError(
                        f"bag {contents.path}: a message on {bag_topic} at "
                        f"{(message.time_ns - contents.start_ns) / 1e9:.3f} s cannot be read "
                        f"as output {key}: {e}"
                    ) from e
            recorded[key] = tuple(values)
    if not recorded:
        raise BagError(
            f"bag {contents.path} records none of the graph's outputs, so there is nothing to "
            "compare against; record them (leapp-ros record) or compare with leapp.Pipeline"
        )
    return recorded, tuple(unrecorded)
