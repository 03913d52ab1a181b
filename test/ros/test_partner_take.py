"""One wake per input set: a node completes a set from the messages already waiting.

Over real DDS, with the node spun on an executor of its own that the test holds still while
the sender publishes. The seed's preprocess node (alone, as with one process per node) and
the fused node (the whole pipeline) fire on a state and a velocity. When both are waiting, the
executor calls one of the two callbacks and that callback takes the other message itself; the
set fires once, like eager PyTorch. A partner that has not arrived is left to the executor,
and a waiting partner that is rejected spoils its set exactly as when the executor hands it
over. The node keeps its deployed QoS; "waiting in the reader" is an rcl wait set on the
node's subscriptions that takes nothing, not a pause.
"""

from __future__ import annotations

import array
import math

import pytest
import torch
from support.ros import eager_seed, waiting_topics

from leapp_ros.testing import Probe, reserve_domain_id
from leapp_ros.testing.delivery import connection_gaps

pytestmark = pytest.mark.ros

NAMESPACE = "/torch_pipeline"
INPUTS = ("state", "velocity")
WAIT_S = 20.0  # a generous bound on any one event


def floats(values):
    from std_msgs.msg import Float32MultiArray

    return Float32MultiArray(data=array.array("f", values))


class Subject:
    """A node on the executor of ``probe`` (spun only when the test says so), ``sender``'s
    publishers of its inputs and inbox of its result, and the executor's calls per input."""

    def __init__(self, kind, seed, probe, sender):
        from rclpy.parameter import Parameter
        from std_msgs.msg import Float32MultiArray

        from leapp_ros.node.fused_node import FusedPipelineNode
        from leapp_ros.node.pipeline_node import PipelineNode

        spec = Parameter("spec_path", Parameter.Type.STRING, str(next(seed.path.glob("*.yaml"))))
        if kind == "fused":
            self.node = FusedPipelineNode(
                namespace=NAMESPACE, context=probe.context, parameter_overrides=[spec]
            )
            self.data = self.node._stages[0]
            self.result = f"{NAMESPACE}/policy/action"
        else:
            self.node = PipelineNode(
                "preprocess",
                namespace=NAMESPACE,
                context=probe.context,
                parameter_overrides=[spec],
            )
            self.data = self.node._data
            self.result = f"{NAMESPACE}/preprocess/obs"
        self.kind, self.probe, self.sender = kind, probe, sender
        self.calls = dict.fromkeys(INPUTS, 0)  # messages the executor handed over, per input
        self.inputs = []
        for subscription in self.node.subscriptions:
            port = subscription.topic_name.rsplit("/", 1)[1]
            if port in INPUTS:
                subscription.callback = self._counted(port, subscription.callback)
                self.inputs.append(subscription)
        probe.executor.add_node(self.node)
        self.publishers = {
            port: sender.publisher(f"{NAMESPACE}/preprocess/{port}", Float32MultiArray)
            for port in INPUTS
        }
        self.inbox = sender.subscribe(self.result, Float32MultiArray)
        probe.spin_until(self.connected, WAIT_S, "every hop matched both ways")

    def connected(self) -> bool:
        """Whether the sender's endpoints and the node have matched each other both ways."""
        self.sender.executor.spin_once(timeout_sec=0)
        records = {record["node"]: record for record in self.node._status_records("ready")}
        publishers = [(p.topic_name, p.get_subscription_count()) for p in self.publishers.values()]
        return not connection_gaps(records, publishers, [(self.inbox.topic, self.inbox.matched())])

    def waiting(self) -> list[str]:
        """The node's inputs with a message waiting in their reader (nothing is taken; the
        node's executor does not spin)."""
        return waiting_topics(self.probe.context, self.inputs)

    def wait_waiting(self, count: int) -> None:
        """Until ``count`` inputs have a message waiting (the node's executor stays still)."""
        self.sender.spin_until(lambda: len(self.waiting()) >= count, WAIT_S, "waiting messages")

    def _counted(self, port, callback):
        def on_message(message):
            self.calls[port] += 1
            callback(message)

        return on_message

    def send(self, port, values):
        self.publishers[port].publish(floats(values))

    def spin_until(self, condition, what):
        self.probe.spin_until(condition, WAIT_S, what)

    def answer(self, count):
        self.sender.spin_until(lambda: len(self.inbox) >= count, WAIT_S, f"{self.result}")
        return torch.tensor(self.inbox[count - 1].data)

    def expected(self, seed, state, velocity):
        obs, action = eager_seed(seed, state, velocity)
        return action if self.kind == "fused" else obs


@pytest.fixture(params=["one node", "fused"])
def subject(request, seed):
    with (
        reserve_domain_id() as domain_id,
        Probe(domain_id) as probe,
        Probe(domain_id, "sender") as sender,
    ):
        subject = Subject(request.param, seed, probe, sender)
        try:
            yield subject
        finally:
            subject.node.destroy_node()


def test_a_set_whose_messages_wait_fires_once_from_one_executor_callback(subject, seed):
    for round_ in range(1, 4):
        state, velocity = torch.randn(6) * 2, torch.randn(3)
        runs, calls = subject.data.runs, sum(subject.calls.values())
        subject.send("state", state.tolist())
        subject.send("velocity", velocity.tolist())
        subject.wait_waiting(2)  # both wait in the node's readers; nothing spins it meanwhile
        subject.spin_until(lambda r=runs: subject.data.runs > r, "the set to fire")
        assert subject.waiting() == [], "a message is left for the executor to hand over"
        assert subject.data.runs == runs + 1
        assert sum(subject.calls.values()) == calls + 1, subject.calls
        torch.testing.assert_close(
            subject.answer(round_), subject.expected(seed, state, velocity), rtol=1e-5, atol=1e-5
        )


def test_a_partner_that_has_not_arrived_is_left_to_the_executor(subject, seed):
    state, velocity = torch.randn(6), torch.randn(3)
    subject.send("state", state.tolist())
    subject.spin_until(lambda: subject.calls["state"] == 1, "the state")
    assert subject.data.runs == 0, "fired without a velocity"  # (it fires in the callback)
    subject.send("velocity", velocity.tolist())
    subject.spin_until(lambda: subject.data.runs == 1, "the set to fire")
    assert subject.calls == {"state": 1, "velocity": 1}
    torch.testing.assert_close(
        subject.answer(1), subject.expected(seed, state, velocity), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("bad", INPUTS)
def test_a_rejected_waiting_partner_spoils_its_set_once(subject, seed, bad):
    sizes = {"state": 6, "velocity": 3}
    for port in INPUTS:
        values = [math.nan] * sizes[port] if port == bad else [0.5] * sizes[port]
        subject.send(port, values)
    subject.wait_waiting(2)
    subject.spin_until(lambda: subject.data.incomplete_sets == 1, "the spoilt set")
    assert subject.waiting() == [], "a message is left for the executor to hand over"
    assert (subject.data.runs, subject.data.nonfinite_inputs) == (0, 1)
    assert sum(subject.calls.values()) == 1, subject.calls  # the partner was taken, not handed
    state, velocity = torch.randn(6), torch.randn(3)
    subject.send("state", state.tolist())
    subject.send("velocity", velocity.tolist())
    subject.spin_until(lambda: subject.data.runs == 1, "the next set to fire")
    assert subject.data.incomplete_sets == 1
    torch.testing.assert_close(
        subject.answer(1), subject.expected(seed, state, velocity), rtol=1e-5, atol=1e-5
    )
