"""The packed input message and the tick of a MultiArray, as messages (no DDS): what a node
reads from them, typed and as CDR bytes, and what it refuses.

A packed message carries every external MultiArray input of a node, one layout dim per port
labelled with its name; a tick (``@<n>`` after the first label) names the instant and leaves
the tensor as any MultiArray reader sees it.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from rclpy.serialization import deserialize_message, serialize_message

from leapp import spec as spec_module
from leapp_ros.messages.multiarray import MessageError, codec
from leapp_ros.messages.packed_inputs import PackedInput
from leapp_ros.messages.raw_multiarray import RawArrayCodec
from leapp_ros.messages.tick_label import label_tick, tick_label
from leapp_ros.messages.topic_io import OutputWriter, TopicReader
from leapp_ros.plan.pipeline import make_plan


def node_plan(tmp_path, inputs, name="n"):
    """A one-node plan whose inputs are ``{name: (dtype, shape)}`` (all external)."""
    ports = [
        {"name": port, "dtype": dtype, "shape": list(shape), "type": "tensor"}
        for port, (dtype, shape) in inputs.items()
    ]
    spec = {
        "models": {
            name: {
                "inputs": ports,
                "outputs": [{"name": "out", "dtype": "float32", "shape": [2], "type": "tensor"}],
                "parameters": {"model_path": f"{name}.pt", "backend": "jit"},
            }
        },
        "pipeline": {"data_flow": {}, "inputs": {name: list(inputs)}, "outputs": {name: ["out"]}},
    }
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return make_plan(spec_module.load(path, verify_checksums=False)).node(name)


def over_the_wire(message):
    return deserialize_message(serialize_message(message), type(message))


SEED_LIKE = {"state": ("float32", (6,)), "velocity": ("float32", (3,))}


@pytest.mark.parametrize("tick", [None, 7, 1_733_400_000_123_456_789])
def test_a_packed_message_gives_every_port_its_values_typed_and_raw(tmp_path, tick):
    packed = PackedInput(node_plan(tmp_path, SEED_LIKE))
    state, velocity = np.arange(6, dtype=np.float32), -np.arange(3, dtype=np.float32)
    message = packed.to_message([state, velocity], tick)
    assert [(d.label, d.size, d.stride) for d in message.layout.dim] == [
        (tick_label("state", tick), 6, 6),
        ("velocity", 3, 3),
    ]
    for read, payload in ((packed.read, over_the_wire(message)),
                          (packed.read_raw, serialize_message(message))):  # fmt: skip
        got = read(payload)
        np.testing.assert_array_equal(got[0], state)
        np.testing.assert_array_equal(got[1], velocity)
        assert packed.tick(payload) == tick


def test_ports_of_different_dtypes_pack_into_float64_exactly(tmp_path):
    node = node_plan(tmp_path, {"a": ("int32", (2, 2)), "b": ("bool", (3,)), "c": ("float32", ())})
    assert node.packed.message_type == "std_msgs/msg/Float64MultiArray"
    packed = PackedInput(node)
    a = np.array([[2**31 - 1, -(2**31)], [5, 0]], np.int32)
    b, c = np.array([True, False, True]), np.array(0.1, np.float32)
    got = packed.read_raw(serialize_message(packed.to_message([a, b, c], 3)))
    assert [value.dtype for value in got] == [np.int32, np.bool_, np.float32]
    for value, sent in zip(got, (a, b, c), strict=True):
        np.testing.assert_array_equal(value, sent)


@pytest.mark.parametrize(
    ("inputs", "why"),
    [
        ({"state": ("float32", (6,))}, "one input: its own topic is one message already"),
        ({"a": ("int64", (2,)), "b": ("float32", (2,))}, "int64 fits no float64 exactly"),
        ({"packed_inputs": ("float32", (2,)), "b": ("float32", (2,))}, "a port has the topic"),
    ],
)
def test_a_node_without_a_packed_input(tmp_path, inputs, why):
    assert node_plan(tmp_path, inputs).packed is None, why


def test_an_empty_layout_takes_the_ports_in_order(tmp_path):
    packed = PackedInput(node_plan(tmp_path, SEED_LIKE))
    message = packed.to_message([np.ones(6, np.float32), np.zeros(3, np.float32)])
    message.layout.dim = []
    for read, payload in ((packed.read, message), (packed.read_raw, serialize_message(message))):
        state, velocity = read(payload)
        assert state.tolist() == [1.0] * 6 and velocity.tolist() == [0.0] * 3


@pytest.mark.parametrize(
    "spoil",
    [
        lambda m: m.layout.dim.reverse(),  # ports in another order
        lambda m: setattr(m.layout.dim[1], "label", "vel"),
        lambda m: setattr(m.layout.dim[1], "size", 4),
        lambda m: setattr(m, "data", m.data[:-1]),
    ],
    ids=["order", "label", "size", "length"],
)
def test_a_message_that_is_not_the_packed_layout_is_refused(tmp_path, spoil):
    packed = PackedInput(node_plan(tmp_path, SEED_LIKE))
    message = packed.to_message([np.zeros(6, np.float32), np.zeros(3, np.float32)], 1)
    spoil(message)
    expected = r"state \(6\), velocity \(3\)"
    with pytest.raises(MessageError, match=expected):
        packed.read(message)
    with pytest.raises(MessageError, match=expected):
        packed.read_raw(serialize_message(message))


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "typed"])
def test_a_tick_leaves_the_tensor_as_any_multiarray_reader_sees_it(tmp_path, raw):
    node = node_plan(tmp_path, {"x": ("float32", (2, 3)), "y": ("float32", (1,))})
    writer = OutputWriter(node.outputs[0], raw=raw)
    value = np.array([0.5, -2.0], np.float32)

    def sent(tick):  # as a subscriber receives it (the typed writer reuses one message)
        message = writer.write(value, None, tick)
        if raw:
            return deserialize_message(message, writer.message_class)
        return over_the_wire(message)

    ticked, plain = sent(123456), sent(None)
    assert ticked.layout.dim[0].label == "dim0@123456" and plain.layout.dim[0].label == "dim0"
    assert [(d.size, d.stride) for d in ticked.layout.dim] == [(2, 2)]
    assert ticked.layout.data_offset == 0 and list(ticked.data) == list(plain.data)


def test_a_ticked_message_is_read_in_place_on_the_raw_path(tmp_path, monkeypatch):
    node = node_plan(tmp_path, {"x": ("float32", (4,)), "y": ("float32", (1,))})
    reader = TopicReader(node.inputs, [0])
    payload = RawArrayCodec(codec(node.inputs[0])).to_bytes(np.arange(4, dtype=np.float32), 99)
    monkeypatch.setattr(RawArrayCodec, "_parsed", lambda self, payload: pytest.fail("parsed"))
    assert reader.read_raw(payload)[0].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert reader.tick(payload) == 99


@pytest.mark.parametrize(
    ("label", "tick"),
    [("dim0", None), ("dim0@42", 42), ("a@b@17", 17), ("x@", None), ("x@4a", None), ("@0", 0)],
)
def test_the_tick_is_the_whole_number_after_the_last_at_sign(label, tick):
    assert label_tick(label) == tick


@pytest.mark.parametrize("tick", [None, 1234])
def test_a_message_whose_padding_holds_other_bytes_is_read_in_place(tmp_path, monkeypatch, tick):
    """rclpy's serializer leaves the padding after a label as it finds it in memory."""
    packed = PackedInput(node_plan(tmp_path, SEED_LIKE))
    state, velocity = np.arange(6, dtype=np.float32), np.ones(3, np.float32)
    payload = bytearray(serialize_message(packed.to_message([state, velocity], tick)))
    label = tick_label("state", tick).encode() + b"\0"
    padding = 12 + len(label)  # after the first label, up to the next 4-byte boundary
    assert padding % 4, "the first label is followed by padding"
    payload[padding : padding + 4 - padding % 4] = b"\xab" * (4 - padding % 4)
    monkeypatch.setattr(RawArrayCodec, "_parsed", lambda self, payload: pytest.fail("parsed"))
    got = packed.read_raw(bytes(payload))
    assert got[0].tolist() == state.tolist() and got[1].tolist() == velocity.tolist()
    assert packed.tick(bytes(payload)) == tick
