"""The harness's side of a plan's topics: :class:`Endpoints`.

One probe publisher per external input topic and per packed input (reliable: the nodes' own
publisher QoS; the nodes' subscriptions keep theirs) and one probe subscription per output
topic; tensors made into messages and back; how many messages went out on each input topic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from leapp.errors import PipelineError
from leapp_ros.messages.multiarray import MessageError
from leapp_ros.messages.packed_inputs import PackedInput
from leapp_ros.plan.pipeline import PipelinePlan
from leapp_ros.testing.probe import Inbox, Probe
from leapp_ros.testing.topics import InputSender, OutputReader, driven_outputs, input_senders

__all__ = ["Endpoints"]


class Endpoints:
    """The probe's publishers and subscriptions for ``plan`` (see the module documentation).

    Attributes:
        inputs: by external input ``"node/port"``: ``(topic, sender, publisher)``; the ports
            one message carries share the topic and the publisher.
        outputs: by output ``"node/port"``: ``(topic, reader, inbox)``.
        packed: by node, the topic (absolute) and publisher of its packed input
            (:mod:`leapp_ros.messages.packed_inputs`), for nodes that have one.
        sent: the messages published on each input topic (absolute name).
    """

    def __init__(self, plan: PipelinePlan, probe: Probe):
        self.plan = plan
        self.inputs: dict[str, tuple[str, InputSender, Any]] = {}
        self.outputs: dict[str, tuple[str, OutputReader, Inbox]] = {}
        self.sent: dict[str, int] = {}
        for node in plan.nodes:
            for port in node.outputs:
                reader, topic = OutputReader(port), plan.resolve(port.topic)
                inbox = probe.subscribe(topic, reader.message_class)
                self.outputs[f"{node.name}/{port.port}"] = (topic, reader, inbox)
        for sender in input_senders(plan):
            topic = plan.resolve(sender.ports[0].topic or "")
            publisher = probe.publisher(topic, sender.message_class)
            for key in sender.keys:  # several keys when one message carries several ports
                self.inputs[key] = (topic, sender, publisher)
        self.packed: dict[str, tuple[str, Any]] = {}
        for node in plan.nodes:
            if node.packed is not None:
                topic = plan.resolve(node.packed.topic)
                message_class = PackedInput(node).message_class
                self.packed[node.name] = (topic, probe.publisher(topic, message_class))

    def counts(self) -> dict[str, int]:
        """The messages received so far on each output, by ``"node/port"``."""
        return {key: len(inbox) for key, (_, _, inbox) in self.outputs.items()}

    def messages(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """``{topic: message}``: one message per input topic of ``inputs``
        (``{"node/port": tensor}``).

        Raises:
            PipelineError: an unknown input, or a tensor that does not fit its port.
        """
        unknown = [key for key in inputs if key not in self.inputs]
        if unknown:
            raise PipelineError(
                f"{', '.join(map(repr, unknown))}: not an external input of pipeline "
                f"{self.plan.name!r}; its external inputs are {', '.join(self.inputs)}"
            )
        messages: dict[str, Any] = {}
        for key in inputs:
            topic, sender, _ = self.inputs[key]
            try:
                messages[topic] = sender.to_message(inputs)
            except MessageError as e:
                raise PipelineError(f"input {key!r}: {e}") from e
        return messages

    def publish(self, messages: Mapping[str, Any]) -> None:
        """Publish ``{absolute input topic: message or CDR bytes}``, once each, and count them.

        Raises:
            PipelineError: a topic that is no external input topic.
        """
        publishers = {topic: publisher for topic, _, publisher in self.inputs.values()}
        publishers.update(self.packed.values())
        unknown = sorted(set(messages) - set(publishers))
        if unknown:
            raise PipelineError(
                f"{', '.join(unknown)}: no external input topic of pipeline {self.plan.name!r}; "
                f"its input topics are {', '.join(sorted(publishers))}"
            )
        for topic, message in messages.items():
            publishers[topic].publish(message)
            self.sent[topic] = self.sent.get(topic, 0) + 1

    def awaited(self, inputs: Iterable[str]) -> list[str]:
        """The outputs (``"node/port"``) the nodes publish when ``inputs`` arrive.

        Raises:
            PipelineError: the inputs make no node fire.
        """
        keys = list(inputs)
        awaited = [key for key in driven_outputs(self.plan, keys) if key in self.outputs]
        if not awaited:
            raise PipelineError(
                f"inputs {sorted(keys)} make no node of pipeline {self.plan.name!r} fire "
                f"(a node needs all of its inputs); its external inputs are "
                f"{', '.join(self.inputs)}; or pass outputs=[...] to wait for"
            )
        return awaited

    def output(self, key: str) -> tuple[str, OutputReader, Inbox]:
        """The topic, reader and inbox of output ``key``.

        Raises:
            PipelineError: no output of that name.
        """
        entry = self.outputs.get(key)
        if entry is None:
            raise PipelineError(
                f"{key!r}: not an output of pipeline {self.plan.name!r}; its outputs are "
                f"{', '.join(self.outputs)}"
            )
        return entry

    def checked(self, outputs: Iterable[str]) -> list[str]:
        """``outputs`` as a list, each checked to be an output (PipelineError otherwise)."""
        keys = list(outputs)
        for key in keys:
            self.output(key)
        return keys
