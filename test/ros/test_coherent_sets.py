"""Values of one instant stay together under load, over real DDS, in every deployment mode.

Two ways a client makes the inputs of one instant be used together (README: coherent input
sets), each tested with a client publishing a new instant every 2 ms (500 Hz) for 400 ticks
while the nodes keep their deployed QoS (best effort, depth 1: instants may be dropped, never
mixed):

- the **packed input**: the seed's preprocess takes ``state`` and ``velocity`` as one message
  on ``preprocess/packed_inputs``; every action must be eager PyTorch on the state and the
  velocity of one tick, and carry that tick;
- **ticks on the graph's edges**: in a diamond (``a -> b``, ``a -> c``, ``(b, c) -> d``) the
  client names each ``x`` with a tick; ``a``'s output carries it to ``b`` and ``c``, theirs to
  ``d``, which joins only the ``u`` and ``v`` of one tick. Every ``z`` must be eager PyTorch on
  one ``x`` and carry its tick.

Each load ends with the answer to its last instant: the last one published is never replaced
in a queue, and once its answer came every earlier answer has come. A load comes last on its
graph (see :func:`run_load`).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from support.ros import eager_seed

import leapp
from leapp import annotate
from leapp import session as session_module
from leapp_ros.messages.multiarray import PortCodec
from leapp_ros.messages.packed_inputs import PackedInput
from leapp_ros.messages.tick_label import label_tick, tick_label
from leapp_ros.testing import Deployment, graph_fixture

pytestmark = pytest.mark.ros

RATE_HZ = 500.0
TICKS = 400
FIRST_TICK = 1_000_000  # ticks are any growing whole numbers: a counter, or a stamp in ns
WAIT_S = 30.0


def run_load(graph, publisher, messages) -> None:
    """Publish ``messages`` with ``publisher`` at :data:`RATE_HZ`. Not counted as the
    harness's sent messages: some are dropped (best effort, depth 1), so the nodes' counters
    stay short of them and :meth:`GraphUnderTest.wait_received` no longer applies: a load
    comes last on its graph."""
    period, start = 1.0 / RATE_HZ, time.monotonic()
    spin = graph.probe.executor.spin_once
    for n, message in enumerate(messages):
        while (left := start + n * period - time.monotonic()) > 0:
            spin(timeout_sec=left)
        publisher.publish(message)


def answers(graph, output):
    """Every message received on ``output`` (``node/port``)."""
    return list(graph.endpoints.output(output)[2])


def await_tick(graph, output, tick) -> None:
    graph.probe.spin_until(
        lambda: any(tick_of(m) == tick for m in answers(graph, output)),
        WAIT_S,
        f"the answer to the last instant (tick {tick}) on {output}",
    )


def tick_of(message):
    return label_tick(message.layout.dim[0].label) if message.layout.dim else None


def assert_each_answer_is_one_instant(received, expected, what) -> None:
    """Each received message equals the expected value of one tick and carries that tick."""
    assert received, f"no {what} at all"
    table = np.stack([value.numpy() for value in expected])  # (ticks, elements)
    for message in received:
        value = np.frombuffer(message.data, np.float32)
        distance = np.abs(table - value).max(axis=1)
        nearest = int(distance.argmin())
        assert distance[nearest] < 1e-4, (
            f"a {what} computed from inputs of different instants (nearest instant off by "
            f"{distance[nearest]:.3g})"
        )
        assert tick_of(message) == FIRST_TICK + nearest, "the tick of its instant"


# --- the packed input of the seed's preprocess ------------------------------------------------

seed_graph = graph_fixture(
    lambda request: request.getfixturevalue("seed").path, deployments=list(Deployment)
)


def test_a_packed_message_that_is_not_the_packed_layout_is_dropped(seed_graph, seed):
    graph = seed_graph
    packed = PackedInput(graph.plan.node("preprocess"))
    topic, _ = graph.endpoints.packed["preprocess"]
    swapped = packed.to_message([torch.randn(6), torch.randn(3)])
    swapped.layout.dim[0].label, swapped.layout.dim[1].label = "velocity", "state"
    dropped = graph.wait_received()["preprocess"]["dropped"]
    graph.publish({topic: swapped})
    status = graph.wait_received()["preprocess"]
    assert status["dropped"] == dropped + 1
    state, velocity = torch.randn(6), torch.randn(3)
    graph.publish({topic: packed.to_message([state, velocity])})  # no tick: none goes out
    graph.probe.spin_until(
        lambda: graph.status()["policy"]["runs"] > status["runs"], WAIT_S, "an action"
    )
    graph.wait_received()
    action = answers(graph, "policy/action")[-1]
    assert tick_of(action) is None
    expected = eager_seed(seed, state, velocity)[1].numpy()
    np.testing.assert_allclose(np.frombuffer(action.data, np.float32), expected, atol=1e-5)


def test_every_action_of_packed_inputs_is_one_instant_under_load(seed_graph, seed):
    graph = seed_graph
    packed = PackedInput(graph.plan.node("preprocess"))
    _, publisher = graph.endpoints.packed["preprocess"]
    generator = torch.Generator().manual_seed(4)
    inputs = [(torch.randn(6, generator=generator), torch.randn(3, generator=generator))
              for _ in range(TICKS + 1)]  # fmt: skip
    messages = [
        packed.to_message([state, velocity], FIRST_TICK + n)
        for n, (state, velocity) in enumerate(inputs)
    ]
    before = len(answers(graph, "policy/action"))
    run_load(graph, publisher, messages)
    await_tick(graph, "policy/action", FIRST_TICK + TICKS)
    expected = [eager_seed(seed, state, velocity)[1] for state, velocity in inputs]
    received = answers(graph, "policy/action")[before:]
    assert_each_answer_is_one_instant(received, expected, "action")


# --- a diamond whose join gets the values of one tick ---------------------------------------


def diamond(x):
    x = annotate.input_tensors("a", {"x": x})
    y = annotate.output_tensors("a", {"y": x * 0.5 - 1}, export_with="jit")
    u = annotate.input_tensors("b", {"y": y})
    u = annotate.output_tensors("b", {"u": torch.tanh(u) * 2}, export_with="onnx")
    v = annotate.input_tensors("c", {"y": y})
    v = annotate.output_tensors("c", {"v": torch.sigmoid(v)}, export_with="jit")
    u, v = annotate.input_tensors("d", {"u": u, "v": v})
    return annotate.output_tensors("d", {"z": u * v - v}, export_with="jit")


def eager_diamond(x):
    y = x * 0.5 - 1
    u, v = torch.tanh(y) * 2, torch.sigmoid(y)
    return u * v - v


@pytest.fixture(scope="module")
def diamond_path(tmp_path_factory):
    session_module._active = None
    leapp.start("diamond", save_path=tmp_path_factory.mktemp("diamond"))
    with torch.no_grad():
        diamond(torch.randn(3))
    leapp.stop()
    return leapp.compile_graph().path


diamond_graph = graph_fixture(
    lambda request: request.getfixturevalue("diamond_path"), deployments=list(Deployment)
)


def test_a_join_takes_the_values_of_one_tick_under_load(diamond_graph):
    graph = diamond_graph
    codec = PortCodec("float32", (3,))
    generator = torch.Generator().manual_seed(5)
    xs = [torch.randn(3, generator=generator) * 3 for _ in range(TICKS + 1)]
    messages = []
    for n, x in enumerate(xs):
        message = codec.to_message(x)
        message.layout.dim[0].label = tick_label("dim0", FIRST_TICK + n)
        messages.append(message)
    before = len(answers(graph, "d/z"))
    run_load(graph, graph.endpoints.inputs["a/x"][2], messages)
    await_tick(graph, "d/z", FIRST_TICK + TICKS)
    received = answers(graph, "d/z")[before:]
    assert_each_answer_is_one_instant(received, [eager_diamond(x) for x in xs], "z")
