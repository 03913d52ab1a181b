"""Fuzzing the message codecs (leapp_ros.messages.multiarray, leapp_ros.messages.robot_codecs)
with hypothesis.

The rule: whatever message arrives, decoding it gives a MessageError or a value of the port's
shape and dtype, never another exception. Messages are random: MultiArray layouts (dims with
random sizes, strides and labels, data offsets), data of any length and of another MultiArray
type than the port's, JointStates with random, missing and repeated names and fields of any
length, Imu / Twist / Pose fields holding any float (NaN, infinities, huge). Inputs that once
failed are kept as explicit examples. ``bench/fuzz.py`` runs the same checks for longer.
"""

from __future__ import annotations

import array
import math
import re

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from leapp_ros.messages.multiarray import SUPPORTED_DTYPES, MessageError, PortCodec, codec
from leapp_ros.messages.robot_codecs import InputDecoder, message_class
from leapp_ros.plan.bindings import (
    IMU,
    JOINT_STATE,
    POSE_STAMPED,
    TWIST,
    TWIST_STAMPED,
    Binding,
    PortOverride,
    bind_port,
)
from leapp_ros.plan.pipeline import InputPlan, message_type

#: how many examples, their randomness and deadline come from the profile (test/conftest.py);
#: bench/fuzz.py runs the same checks for longer
SETTINGS = settings(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

UINT32 = 2**32 - 1
MULTIARRAYS = sorted({message_type(dtype) for dtype in SUPPORTED_DTYPES})
NUMERIC = ["float32", "float64", "float16", "int8", "int32", "int64", "uint8", "uint64", "bool"]

# --- MultiArray ports ----------------------------------------------------------------------

shapes = st.lists(st.integers(0, 4), max_size=3).map(tuple)
labels = st.text(max_size=8)


@st.composite
def layouts(draw, shape: tuple[int, ...]) -> tuple[list[tuple[str, int, int]], int]:
    """``(dims as (label, size, stride), data_offset)``: the right layout, an empty one, or a
    random one (sizes and strides anywhere in uint32)."""
    size_of = st.one_of(st.integers(0, 6), st.integers(0, UINT32))
    row_major = [(f"dim{i}", n, math.prod(shape[i:])) for i, n in enumerate(shape)]
    dims = draw(
        st.one_of(
            st.just(row_major),
            st.just([]),
            st.just([(label, n, 0) for label, n, _ in row_major]),
            st.lists(st.tuples(labels, size_of, size_of), max_size=4),
        )
    )
    offset = draw(st.one_of(st.just(0), st.integers(0, UINT32)))
    return dims, offset


@st.composite
def multiarray_cases(draw) -> tuple[str, tuple[int, ...], object]:
    """``(port dtype, port shape, message)``; the message is mostly of the port's type."""
    from std_msgs.msg import MultiArrayDimension, MultiArrayLayout

    dtype = draw(st.sampled_from(SUPPORTED_DTYPES))
    shape = draw(shapes)
    size = math.prod(shape)
    kind = draw(st.one_of(st.just(message_type(dtype)), st.sampled_from(MULTIARRAYS)))
    message = message_class(kind)()
    typecode = message.data.typecode
    count = draw(st.one_of(st.just(size), st.integers(0, 2 * size + 3)))
    raw = draw(st.binary(min_size=count * array.array(typecode).itemsize, max_size=4096))
    data = array.array(typecode)
    data.frombytes(raw[: count * data.itemsize])
    message.data = data
    dims, offset = draw(layouts(shape))
    message.layout = MultiArrayLayout(
        dim=[MultiArrayDimension(label=a, size=b, stride=c) for a, b, c in dims],
        data_offset=offset,
    )
    return dtype, shape, message


def check_multiarray(dtype: str, shape: tuple[int, ...], message: object) -> None:
    """Both decoders of the port give a MessageError or the port's dtype and shape."""
    port_codec = codec(InputPlan("x", "external", "node/x", message_type(dtype), dtype, shape))
    try:
        value = port_codec.array_from_message(message)
    except MessageError:
        pass
    else:
        if dtype == "bfloat16":
            assert isinstance(value, torch.Tensor) and value.dtype == torch.bfloat16
        else:
            assert isinstance(value, np.ndarray) and value.dtype == np.dtype(dtype)
        assert tuple(value.shape) == shape
    try:
        tensor = port_codec.from_message(message)
    except MessageError:
        return
    assert isinstance(tensor, torch.Tensor)
    assert (tensor.dtype, tuple(tensor.shape)) == (getattr(torch, dtype), shape)


def multiarray(kind: str, data: list, dims=(), offset: int = 0) -> object:
    from std_msgs.msg import MultiArrayDimension, MultiArrayLayout

    message = message_class(kind)(data=data)
    message.layout = MultiArrayLayout(
        dim=[MultiArrayDimension(label=a, size=b, stride=c) for a, b, c in dims],
        data_offset=offset,
    )
    return message


@SETTINGS
@given(multiarray_cases())
@example(("float32", (), multiarray("std_msgs/msg/Float64MultiArray", [0.0])))  # found
@example(("float32", (2,), multiarray("std_msgs/msg/Int8MultiArray", [0, 0])))  # found
@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # float16 of 1e38 is inf
def test_a_multiarray_decodes_to_the_port_or_is_a_message_error(case):
    check_multiarray(*case)


# Found by fuzzing: a message of another MultiArray type than the port's.
@pytest.mark.parametrize(
    ("dtype", "shape", "kind", "data"),
    [
        ("float32", (2, 1), "std_msgs/msg/Float64MultiArray", [0.0, 0.0]),
        ("float32", (2,), "std_msgs/msg/Float64MultiArray", [0.0, 0.0]),
        ("float32", (), "std_msgs/msg/Int8MultiArray", [0]),
        ("int32", (3,), "std_msgs/msg/Float32MultiArray", [1.0, 2.0, 3.0]),
        ("bool", (2,), "std_msgs/msg/Int8MultiArray", [1, 0]),
    ],
)
def test_a_multiarray_of_another_type_than_the_ports_is_a_message_error(dtype, shape, kind, data):
    port_codec = PortCodec(dtype, shape)
    message = multiarray(kind, data)
    with pytest.raises(MessageError, match=r"expected .*MultiArray"):
        port_codec.array_from_message(message)
    with pytest.raises(MessageError, match=r"expected .*MultiArray"):
        port_codec.from_message(message)


def test_a_port_without_elements_decodes_an_empty_message():
    port_codec = PortCodec("float32", (2, 0))
    value = port_codec.array_from_message(multiarray("std_msgs/msg/Float32MultiArray", []))
    assert value.shape == (2, 0)


# --- robot messages ------------------------------------------------------------------------

JOINTS = ("a", "b", "c", "d")
FIXED_KINDS = (
    ("state/body/angular_velocity", (3,), (), ""),
    ("state/body/linear_acceleration", (1, 3), (), ""),
    ("state/body/rotation", (4,), (("x", "y", "z", "w"),), ""),
    ("command/body/velocity", (3,), (), ""),
    ("command/body/velocity", (1, 6), (), TWIST_STAMPED),
    ("command/body/velocity", (1,), (("yaw_rate",),), ""),
    ("state/body/position", (3,), (), ""),
    ("command/body/pose", (7,), (), ""),
)
doubles = st.floats(allow_nan=True, allow_infinity=True)


def fixed_binding(kind: str, shape, names, message: str) -> Binding:
    binding, _ = bind_port("input", kind, shape, names or None, PortOverride(message=message))
    assert binding is not None and binding.message_type in (
        IMU,
        TWIST,
        TWIST_STAMPED,
        POSE_STAMPED,
    )
    return binding


@st.composite
def fixed_cases(draw) -> tuple[InputDecoder, object, list[tuple[str, tuple[int, ...]]]]:
    """A decoder of an Imu, Twist(Stamped) or PoseStamped topic, with 1-3 ports of random
    dtypes, and a message whose every bound field holds a random float."""
    import functools

    kind, shape, names, message_name = draw(st.sampled_from(FIXED_KINDS))
    binding = fixed_binding(kind, shape, names, message_name)
    dtypes = draw(st.lists(st.sampled_from(NUMERIC), min_size=1, max_size=3))
    ports = [(binding, dtype, shape) for dtype in dtypes]
    decoder = InputDecoder(binding.message_type, ports)
    message = decoder.message_class()
    for path in binding.elements:
        *parents, leaf = path.split(".")
        setattr(functools.reduce(getattr, parents, message), leaf, draw(doubles))
    return decoder, message, [(dtype, shape) for dtype in dtypes]


@st.composite
def joint_cases(draw) -> tuple[InputDecoder, object, list[tuple[str, tuple[int, ...]]]]:
    """A JointState decoder with 1-3 ports (random joints, fields, dtypes, shapes) and a
    message naming random joints (missing, extra, repeated) with fields of random length."""
    from sensor_msgs.msg import JointState

    ports, expected = [], []
    for _ in range(draw(st.integers(1, 3))):
        joints = tuple(draw(st.lists(st.sampled_from(JOINTS), min_size=1, unique=True)))
        field = draw(st.sampled_from(("position", "velocity", "effort")))
        shape = draw(st.sampled_from([(len(joints),), (1, len(joints))]))
        binding, _ = bind_port("input", f"state/joint/{field}", shape, (list(joints),))
        dtype = draw(st.sampled_from(NUMERIC))
        ports.append((binding, dtype, shape))
        expected.append((dtype, shape))
    names = draw(st.lists(st.sampled_from((*JOINTS, "e", "")), max_size=6))
    message = JointState(name=names)
    for field in ("position", "velocity", "effort"):
        count = draw(st.one_of(st.just(len(names)), st.integers(0, 7)))
        setattr(
            message,
            field,
            array.array("d", draw(st.lists(doubles, min_size=count, max_size=count))),
        )
    return InputDecoder(JOINT_STATE, ports), message, expected


def check_decoder(decoder: InputDecoder, message: object, expected: list) -> None:
    """A MessageError, or one array per port of its dtype and shape."""
    try:
        values = decoder.decode(message)
    except MessageError:
        return
    assert [(v.dtype, v.shape) for v in values] == [(np.dtype(d), s) for d, s in expected]


@SETTINGS
@given(fixed_cases())
@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # float32 of 1e308 is inf
def test_an_imu_twist_or_pose_decodes_to_the_ports_or_is_a_message_error(case):
    check_decoder(*case)


# Found by fuzzing: an integer port given a value it cannot hold.
@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        ("int8", 128.0),
        ("uint8", -1.0),
        ("int32", math.nan),
        ("int64", 2.0**63),
        ("uint64", math.inf),
    ],
)
def test_an_integer_port_refuses_a_value_it_cannot_hold(dtype, value):
    from geometry_msgs.msg import Twist, Vector3

    binding = fixed_binding("command/body/velocity", (3,), (), "")
    decoder = InputDecoder(TWIST, [(binding, dtype, (3,))])
    with pytest.raises(
        MessageError, match=rf"Twist carries \[{re.escape(repr(value))}\] for a port"
    ):
        decoder.decode(Twist(linear=Vector3(x=value)))
    joints = _joint_decoder(dtype)
    with pytest.raises(MessageError, match="JointState carries"):
        joints.decode(_joint_state([1.0, value]))


def test_an_integer_port_reads_the_largest_value_it_holds():
    decoder = _joint_decoder("int64")
    (value,) = decoder.decode(_joint_state([-(2.0**63), 2.0**62]))
    assert value.tolist() == [-(2**63), 2**62]


def _joint_decoder(dtype: str) -> InputDecoder:
    binding, _ = bind_port("input", "state/joint/position", (2,), (["a", "b"],))
    return InputDecoder(JOINT_STATE, [(binding, dtype, (2,))])


def _joint_state(position: list[float]) -> object:
    from sensor_msgs.msg import JointState

    return JointState(name=["a", "b"], position=array.array("d", position))


@SETTINGS
@given(joint_cases())
def test_a_joint_state_decodes_to_the_ports_or_is_a_message_error(case):
    check_decoder(*case)
