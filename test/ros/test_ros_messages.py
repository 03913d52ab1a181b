"""Tensor <-> std_msgs MultiArray conversion (leapp_ros.messages.multiarray): every dtype of the
mapping table, 0-d and 3-d shapes, the layout, zero-copy receiving, and every malformed case."""

from __future__ import annotations

import array

import numpy as np
import pytest
import torch
import yaml
from rclpy.serialization import deserialize_message, serialize_message
from support.budget import measured

from leapp_ros.messages.multiarray import SUPPORTED_DTYPES, MessageError, PortCodec, codec
from leapp_ros.messages.multiarray import from_message as message_to_tensor
from leapp_ros.messages.multiarray import to_message as tensor_to_message
from leapp_ros.plan.pipeline import InputPlan, OutputPlan, message_type

SHAPES = [(), (5,), (2, 3, 4)]


def random_tensor(dtype: str, shape: tuple[int, ...]) -> torch.Tensor:
    torch_dtype = getattr(torch, dtype)
    if dtype == "bool":
        return torch.rand(shape) > 0.5
    if torch_dtype.is_floating_point:
        return (torch.randn(shape) * 100).to(torch_dtype)
    info = torch.iinfo(torch_dtype)
    low, high = max(info.min, -(2**40)), min(info.max, 2**40)
    return torch.randint(low, high, shape, dtype=torch.int64).to(torch_dtype)


def output_port(dtype: str, shape: tuple[int, ...], labels: tuple[str, ...] = ()) -> OutputPlan:
    labels = labels or tuple(f"dim{i}" for i in range(len(shape)))
    return OutputPlan("out", "node/out", message_type(dtype), dtype, shape, labels)


def input_port(dtype: str, shape: tuple[int, ...]) -> InputPlan:
    return InputPlan("x", "external", "node/x", message_type(dtype), dtype, shape)


def over_the_wire(message):
    """The message as a subscriber receives it: serialized and deserialized by rclpy."""
    return deserialize_message(serialize_message(message), type(message))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
def test_every_dtype_round_trips_exactly(dtype, shape):
    tensor = random_tensor(dtype, shape)
    message = over_the_wire(tensor_to_message(tensor, output_port(dtype, shape)))
    received = message_to_tensor(message, input_port(dtype, shape))
    assert received.dtype == tensor.dtype
    assert received.shape == tensor.shape
    assert torch.equal(received, tensor)


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
def test_message_class_is_the_plans_message_type(dtype):
    message = tensor_to_message(random_tensor(dtype, (3,)), output_port(dtype, (3,)))
    assert f"std_msgs/msg/{type(message).__name__}" == message_type(dtype)


def test_bool_travels_as_uint8_and_any_nonzero_byte_is_true():
    port = input_port("bool", (4,))
    message = codec(port).message_class(data=array.array("B", [0, 1, 2, 255]))
    assert message_to_tensor(message, port).tolist() == [False, True, True, True]


def test_float16_and_bfloat16_travel_as_float32():
    for dtype in ("float16", "bfloat16"):
        message = tensor_to_message(random_tensor(dtype, (3,)), output_port(dtype, (3,)))
        assert type(message).__name__ == "Float32MultiArray"


def test_layout_has_one_dim_per_axis_with_label_size_and_row_major_stride():
    tensor = torch.arange(24, dtype=torch.float64).reshape(2, 3, 4)
    port = output_port("float64", (2, 3, 4), ("__temporal_axis__", "dim1", "dim2"))
    message = tensor_to_message(tensor, port)
    dims = [(d.label, d.size, d.stride) for d in message.layout.dim]
    assert dims == [("__temporal_axis__", 2, 24), ("dim1", 3, 12), ("dim2", 4, 4)]
    assert message.layout.data_offset == 0
    assert list(message.data) == list(range(24))  # row-major


def test_scalar_has_no_dims_and_one_element():
    message = tensor_to_message(torch.tensor(7, dtype=torch.int64), output_port("int64", ()))
    assert list(message.layout.dim) == []
    assert list(message.data) == [7]


def test_non_contiguous_tensor_is_published_row_major():
    tensor = torch.arange(6, dtype=torch.float32).reshape(2, 3).t()  # shape (3, 2), transposed
    message = tensor_to_message(tensor, output_port("float32", (3, 2)))
    assert list(message.data) == tensor.flatten().tolist()


def test_message_data_is_an_array_not_a_list():
    message = tensor_to_message(torch.zeros(3), output_port("float32", (3,)))
    assert isinstance(message.data, array.array) and message.data.typecode == "f"


def test_messages_never_share_a_layout():
    port = output_port("float32", (2,))
    first = tensor_to_message(torch.zeros(2), port)
    first.layout.data_offset = 5
    first.layout.dim[0].size = 7
    second = tensor_to_message(torch.zeros(2), port)
    assert (second.layout.data_offset, second.layout.dim[0].size) == (0, 2)


def test_a_reused_message_is_refilled_in_place():
    port_codec = PortCodec("int16", (3,))
    message = port_codec.new_message()
    for values in ([1, 2, 3], [4, 5, 6]):
        tensor = torch.tensor(values, dtype=torch.int16)
        assert port_codec.to_message(tensor, reuse=message) is message
        assert torch.equal(port_codec.from_message(over_the_wire(message)), tensor)


def test_received_tensor_shares_the_messages_memory():
    port = input_port("float32", (2, 3))
    message = over_the_wire(tensor_to_message(torch.randn(2, 3), output_port("float32", (2, 3))))
    received = message_to_tensor(message, port)
    address, _ = message.data.buffer_info()
    assert received.data_ptr() == address


def test_empty_layout_is_accepted_when_the_element_count_matches():
    port = input_port("float32", (2, 3))
    message = codec(port).message_class(data=array.array("f", range(6)))
    assert message_to_tensor(message, port).tolist() == [[0, 1, 2], [3, 4, 5]]


def test_plain_data_message_as_ros2_topic_pub_builds_it_is_accepted():
    fill = pytest.importorskip(
        "rosidl_runtime_py", reason="rosidl_runtime_py comes with ros2cli (launch stack)"
    ).set_message_fields
    port = input_port("float32", (2, 3))
    message = codec(port).message_class()
    fill(message, yaml.safe_load("{data: [1, 2.5, -3, 4, 5, 6]}"))  # what `ros2 topic pub` does
    received = message_to_tensor(over_the_wire(message), port)
    assert received.tolist() == [[1.0, 2.5, -3.0], [4.0, 5.0, 6.0]]


def test_plain_data_message_of_the_wrong_length_is_refused():
    port = input_port("float32", (2, 3))
    for length in (5, 7, 0):
        message = codec(port).message_class(data=array.array("f", range(length)))
        with pytest.raises(MessageError, match=rf"expected 6 float32 .*\[2, 3\], got {length}"):
            message_to_tensor(message, port)


def test_plain_data_message_with_a_data_offset_is_refused():
    port = input_port("int16", (3,))
    message = codec(port).message_class(data=array.array("h", range(3)))
    message.layout.data_offset = 2
    with pytest.raises(MessageError, match="expected data_offset 0, got 2"):
        message_to_tensor(message, port)


def test_unset_strides_are_accepted():
    port = input_port("int32", (2, 2))
    message = tensor_to_message(torch.zeros(2, 2, dtype=torch.int32), output_port("int32", (2, 2)))
    for dim in message.layout.dim:
        dim.stride = 0
    assert message_to_tensor(message, port).shape == (2, 2)


def test_wrong_length_raises_message_error_naming_expected_and_got():
    port = input_port("float64", (2, 3, 4))
    message = codec(port).message_class(data=array.array("d", range(23)))
    with pytest.raises(MessageError, match=r"expected 24 float64 .*\[2, 3, 4\], got 23"):
        message_to_tensor(message, port)


def test_wrong_layout_sizes_raise_message_error():
    port = input_port("float32", (2, 3))
    message = tensor_to_message(torch.zeros(3, 2), output_port("float32", (3, 2)))
    with pytest.raises(
        MessageError, match=r"\(size, stride\) \[\(2, 6\), \(3, 3\)\] .*got \[\(3, 6\), \(2, 2\)\]"
    ):
        message_to_tensor(message, port)


def test_wrong_number_of_dims_raises_message_error():
    port = input_port("float32", (6,))
    message = tensor_to_message(torch.zeros(2, 3), output_port("float32", (2, 3)))
    with pytest.raises(MessageError, match="expected layout dims"):
        message_to_tensor(message, port)


def test_wrong_stride_raises_message_error():
    port = input_port("float32", (2, 3))
    message = tensor_to_message(torch.zeros(2, 3), output_port("float32", (2, 3)))
    message.layout.dim[1].stride = 4  # padded rows are not supported
    with pytest.raises(MessageError, match="expected layout dims"):
        message_to_tensor(message, port)


def test_nonzero_data_offset_raises_message_error():
    port = input_port("float32", (3,))
    message = tensor_to_message(torch.zeros(3), output_port("float32", (3,)))
    message.layout.data_offset = 1
    with pytest.raises(MessageError, match="expected data_offset 0, got 1"):
        message_to_tensor(message, port)


def test_publishing_a_tensor_of_the_wrong_shape_or_dtype_raises_message_error():
    port = output_port("float32", (3,))
    with pytest.raises(MessageError, match=r"expected a float32 tensor of shape \[3\], got"):
        tensor_to_message(torch.zeros(4), port)
    with pytest.raises(MessageError, match="got float64"):
        tensor_to_message(torch.zeros(3, dtype=torch.float64), port)


def test_unsupported_dtype_raises_message_error_listing_the_supported_ones():
    with pytest.raises(MessageError, match=r"dtype 'complex64' has no std_msgs.*float32"):
        PortCodec("complex64", (2,))


def test_conversion_of_100k_floats_copies_buffers_and_makes_no_python_floats():
    """The codec moves the payload as one buffer (array.array of the tensor's bytes, then
    np.frombuffer), never as a Python list: 100k Python floats would allocate ~3.2 MB (24 bytes
    each plus the list) where the buffers take two copies of 0.4 MB. Allocation is counted, not
    timed; what the data path costs per message is bench/ros_latency.py's question."""
    port_codec = PortCodec("float32", (100_000,))
    tensor = torch.randn(100_000)
    received = over_the_wire(port_codec.to_message(tensor))
    payload = tensor.numel() * tensor.element_size()
    with measured() as out:
        port_codec.to_message(tensor)
    with measured() as back:
        port_codec.from_message(received)
    assert out.peak_bytes < 3 * payload, f"to_message allocated {out.peak_bytes} bytes"
    assert back.peak_bytes < 3 * payload, f"from_message allocated {back.peak_bytes} bytes"
    assert np.array_equal(port_codec.from_message(received).numpy(), tensor.numpy())
