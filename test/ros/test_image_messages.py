"""sensor_msgs/Image into a port, checked without DDS against NumPy written here.

Each frame is built here as a camera driver builds it (rclpy's typed Image: the pixels in the
encoding's channel order, rows padded to ``step``, 16- and 32-bit pixels byte-swapped for a
big-endian sender) from a logical RGBA or depth array, and the port's expected value is that
array rearranged here with plain NumPy (channels picked, axes moved, integer pixels times the
scale in the port's dtype). The frame is decoded the typed way (the rclpy message) and the raw
way (its CDR bytes from rclpy's serializer, and big-endian CDR), in every encoding, layout,
dtype and padding; frames of another size or encoding are MessageErrors naming both sides.
The live graph is tested in test_sensor_topics.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.serialization import serialize_message
from support.sensors import colour_frame, image

from leapp_ros.messages import cdr
from leapp_ros.messages.multiarray import MessageError
from leapp_ros.messages.robot_codecs import InputDecoder
from leapp_ros.plan.bindings import IMAGE, BindingError, PortOverride, bind_port
from leapp_ros.plan.sensor_layout import CAMERA_DEPTH as DEPTH
from leapp_ros.plan.sensor_layout import CAMERA_IMAGE as CAMERA
from leapp_ros.plan.sensor_layout import TERRAIN_HEIGHT as HEIGHT

H, W = 5, 7
RGBA = "rgba"  # the logical channel order of the test's colour frames (colour_frame's)


def decoder(kind, shape, dtype, names=None, override=None, copy=True):
    binding, note = bind_port("input", kind, shape, names, override, dtype=dtype)
    assert binding is not None and binding.message_type == IMAGE, note
    return InputDecoder(IMAGE, [(binding, dtype, shape)], copy=copy)


def decode_ways(dec, message):
    """The port value from the typed message, its CDR bytes and big-endian CDR (all equal)."""
    fields = cdr.layout(type(message))
    values = [
        dec.decode(message)[0],
        dec.decode(cdr.read(serialize_message(message), fields))[0],
        dec.decode(cdr.read(cdr.write(message, fields, little=False), fields))[0],
    ]
    for value in values[1:]:
        assert value.dtype == values[0].dtype
        np.testing.assert_array_equal(value, values[0])
    return values[0]


# (shape, dtype, names, channels in port order, layout) of colour and mono camera ports
COLOUR_PORTS = {
    "hwc_uint8": ((H, W, 3), "uint8", None, "rgb", "HWC"),
    "chw_float": ((3, H, W), "float32", None, "rgb", "CHW"),
    "nhwc_bgra": ((1, H, W, 4), "uint8", [["b", "g", "r", "a"]], "bgra", "NHWC"),
    "nchw_bgr_half": ((1, 3, H, W), "float16", [["b", "g", "r"], None, None], "bgr", "NCHW"),
    "hw_mono": ((H, W), "uint8", None, "r", "HW"),
    "nchw_mono_float": ((1, 1, H, W), "float32", None, "r", "NCHW"),
}
ENCODINGS_OF = {3: ["rgb8", "bgr8", "rgba8", "bgra8"], 4: ["rgba8", "bgra8"], 1: ["mono8"]}


def expected_colour(rgba, channels, layout, dtype, scale):
    """The port value of a frame of ``rgba``, rearranged here: channels, axes, dtype."""
    value = rgba[..., [RGBA.index(c) for c in channels]]  # [H, W, C]
    plain = layout.lstrip("N")
    value = value[..., 0] if "C" not in plain else value.transpose(["HWC".index(a) for a in plain])
    if layout.startswith("N"):
        value = value[None]
    if dtype == "uint8":
        return value.copy()
    return value.astype(dtype) * np.asarray(scale, dtype)


@pytest.mark.parametrize("pad", [0, 3], ids=["packed", "padded"])
@pytest.mark.parametrize(
    ("port", "encoding"),
    [
        (port, encoding)
        for port, (shape, *_, channels, _) in COLOUR_PORTS.items()
        for encoding in ENCODINGS_OF[len(channels)]
    ],
)
def test_every_colour_encoding_fills_every_layout_like_numpy(port, encoding, pad):
    shape, dtype, names, channels, layout = COLOUR_PORTS[port]
    dec = decoder(CAMERA, shape, dtype, names)
    rgba = np.random.default_rng(len(port) + pad).integers(0, 256, (H, W, 4), np.uint8)
    if encoding == "mono8":
        rgba[..., 1:] = rgba[..., :1]
    value = decode_ways(dec, image(colour_frame(rgba, encoding), encoding, pad=pad))
    expected = expected_colour(rgba, channels, layout, dtype, 1 / 255)
    assert value.dtype == np.dtype(dtype) and value.shape == shape
    np.testing.assert_array_equal(value, expected)


def test_float_frames_go_into_float_ports_as_sent_in_the_ports_channel_order():
    """32FC3 / 32FC4 / 32FC1 (a simulator's render): channels in the port's order, no scale."""
    rng = np.random.default_rng(5)
    for port in ("chw_float", "nchw_bgr_half", "nchw_mono_float"):
        shape, dtype, names, channels, layout = COLOUR_PORTS[port]
        dec = decoder(CAMERA, shape, dtype, names)
        floats = rng.standard_normal((H, W, len(channels))).astype(np.float32)
        frame = image(floats if len(channels) > 1 else floats[..., 0], f"32FC{len(channels)}")
        plain = layout.lstrip("N")
        expected = floats.transpose(["HWC".index(a) for a in plain]).astype(dtype)
        value = decode_ways(dec, frame)
        np.testing.assert_array_equal(value, expected.reshape(shape))
    dec = decoder(CAMERA, (H, W, 3), "uint8")
    with pytest.raises(MessageError, match=r"'32FC3'.*takes rgb8, bgr8, rgba8, bgra8;"):
        dec.decode(image(np.zeros((H, W, 3), np.float32), "32FC3"))


@pytest.mark.parametrize("big", [False, True], ids=["little", "big_endian"])
@pytest.mark.parametrize("pad", [0, 2], ids=["packed", "padded"])
@pytest.mark.parametrize(
    ("shape", "dtype", "scale"),
    [((H, W), "float32", None), ((1, H, W), "float64", 1e-4), ((H, W, 1), "float16", None)],
)
def test_depth_in_millimetres_and_metres_becomes_metres(shape, dtype, scale, pad, big):
    override = PortOverride(scale=scale) if scale else None
    dec = decoder(DEPTH, shape, dtype, override=override)
    rng = np.random.default_rng(pad + big)
    millimetres = rng.integers(0, 65536, (H, W)).astype(np.uint16)
    metres = (rng.random((H, W)) * 10).astype(np.float32)
    from_mm = decode_ways(dec, image(millimetres, "16UC1", pad=pad, big=big))
    from_m = decode_ways(dec, image(metres, "32FC1", pad=pad, big=big))
    factor = np.asarray(scale or 0.001, dtype)
    np.testing.assert_array_equal(from_mm, (millimetres.astype(dtype) * factor).reshape(shape))
    np.testing.assert_array_equal(from_m, metres.astype(dtype).reshape(shape))
    assert from_mm.dtype == from_m.dtype == np.dtype(dtype)


def test_a_uint16_depth_port_takes_16uc1_as_sent_and_refuses_32fc1():
    dec = decoder(DEPTH, (H, W), "uint16")
    millimetres = np.arange(H * W, dtype=np.uint16).reshape(H, W) * 997
    np.testing.assert_array_equal(
        decode_ways(dec, image(millimetres, "16UC1", big=True)), millimetres
    )
    with pytest.raises(MessageError, match=r"'32FC1'.*takes 16UC1"):
        dec.decode(image(np.zeros((H, W), np.float32), "32FC1"))


def test_an_elevation_grid_is_a_32fc1_image_of_heights():
    override = PortOverride(message="sensor_msgs/msg/Image")
    dec = decoder(HEIGHT, (1, H, W), "float32", override=override)
    heights = np.random.default_rng(3).standard_normal((H, W)).astype(np.float32)
    heights[1, 2] = np.nan  # a cell without data: on_nonfinite decides
    value = decode_ways(dec, image(heights, "32FC1", pad=4))
    np.testing.assert_array_equal(value, heights[None])
    with pytest.raises(MessageError, match="takes 32FC1"):
        dec.decode(image(np.zeros((H, W), np.uint16), "16UC1"))


def test_a_frame_of_another_size_is_an_error_naming_both_sizes():
    dec = decoder(DEPTH, (H, W), "float32")
    frame = image(np.zeros((H + 1, W * 2), np.float32), "32FC1")
    with pytest.raises(MessageError, match=rf"Image of {W * 2}x{H + 1} .* port of {W}x{H}"):
        dec.decode(frame)


def test_encodings_a_port_cannot_take_and_short_data_are_errors():
    dec = decoder(CAMERA, (H, W, 3), "uint8")
    with pytest.raises(MessageError, match=r"'mono8'.*takes rgb8, bgr8, rgba8, bgra8;"):
        dec.decode(image(np.zeros((H, W), np.uint8), "mono8"))
    with pytest.raises(MessageError, match="'yuv422'"):
        dec.decode(image(np.zeros((H, W, 2), np.uint8), "yuv422"))
    short = image(np.zeros((H, W, 3), np.uint8), "rgb8")
    short.data = short.data[:-1]
    with pytest.raises(MessageError, match=rf"needs {H * W * 3} bytes .* it has {H * W * 3 - 1}"):
        dec.decode(short)


def test_a_frame_needing_no_conversion_is_a_read_only_view_of_the_payload():
    """copy=False (a model that never writes into its inputs): a view; else one copy."""
    from sensor_msgs.msg import Image

    fields = cdr.layout(Image)
    rgba = np.random.default_rng(0).integers(0, 256, (H, W, 4), np.uint8)
    payload = serialize_message(image(colour_frame(rgba, "rgb8"), "rgb8"))
    wire = np.frombuffer(payload, np.uint8)
    view = decoder(CAMERA, (H, W, 3), "uint8", copy=False)
    shared = view.decode(cdr.read(payload, fields))[0]
    assert np.shares_memory(shared, wire) and not shared.flags.writeable
    owned = decoder(CAMERA, (H, W, 3), "uint8").decode(cdr.read(payload, fields))[0]
    assert not np.shares_memory(owned, wire) and owned.flags.writeable
    np.testing.assert_array_equal(shared, owned)
    padded = serialize_message(image(colour_frame(rgba, "rgb8"), "rgb8", pad=1))
    copied = view.decode(cdr.read(padded, fields))[0]  # rows padded: one contiguous copy
    assert copied.flags.c_contiguous and not np.shares_memory(copied, np.frombuffer(padded, "B"))


def test_encode_round_trips_through_decode_for_the_harness():
    for port, (shape, dtype, names, *_) in COLOUR_PORTS.items():
        dec = decoder(CAMERA, shape, dtype, names)
        rng = np.random.default_rng(len(port))
        value = rng.integers(0, 256, shape).astype(dtype)
        if dtype != "uint8":
            value = value * np.asarray(1 / 255, dtype)
        np.testing.assert_array_equal(dec.decode(dec.encode([value]))[0], value)
    depth = decoder(DEPTH, (H, W), "float32")
    metres = np.random.default_rng(1).random((H, W)).astype(np.float32)
    assert depth.encode([metres]).encoding == "32FC1"
    np.testing.assert_array_equal(depth.decode(depth.encode([metres]))[0], metres)
    halves = decoder(CAMERA, (3, H, W), "float32")
    frame = halves.encode([np.full((3, H, W), 0.5, np.float32)])  # no 8-bit frame holds 0.5
    assert frame.encoding == "32FC3"
    np.testing.assert_array_equal(halves.decode(frame)[0], np.full((3, H, W), 0.5, np.float32))


# ------------------------------------------------------------------ the choice of a layout


@pytest.mark.parametrize(
    ("shape", "names", "override", "layout", "channels"),
    [
        ((H, W, 3), None, None, "HWC", ("r", "g", "b")),
        ((3, H, W), None, None, "CHW", ("r", "g", "b")),
        ((4, 6, 3), [["blue", "green", "red"]], None, "HWC", ("b", "g", "r")),
        ((3, 6, 4), [["r", "g", "b"], None, None], None, "CHW", ("r", "g", "b")),
        ((3, 6, 3), None, PortOverride(layout="chw"), "CHW", ("r", "g", "b")),
        (
            (3, 6, 3),
            None,
            PortOverride(layout="HWC", names=("b", "g", "r")),
            "HWC",
            ("b", "g", "r"),
        ),
        ((1, H, W, 4), None, None, "NHWC", ("r", "g", "b", "a")),
        ((1, H, W), None, None, "CHW", ("mono",)),
    ],
)
def test_the_layout_comes_from_shape_names_or_ports_layout(
    shape, names, override, layout, channels
):
    binding, _ = bind_port("input", "state/camera/image", shape, names, override, dtype="uint8")
    assert (binding.layout, binding.elements) == (layout, channels)


def test_an_ambiguous_shape_keeps_its_multiarray_and_asks_for_a_layout():
    binding, note = bind_port("input", "state/camera/image", (3, 6, 3), None, dtype="uint8")
    assert binding is None and "set ports.<port>.layout" in note


@pytest.mark.parametrize(
    ("kind", "shape", "dtype", "override", "match"),
    [
        ("state/camera/image", (H, W, 3), "uint8", PortOverride(scale=0.5), "float port"),
        ("state/camera/depth", (H, W), "uint8", PortOverride(layout="HW"), "no image encoding"),
        ("state/camera/depth", (H, W, 3), "float32", PortOverride(layout="HWC"), "one channel"),
        ("state/camera/image", (2, H, W, 3), "uint8", PortOverride(layout="NHWC"), "must be 1"),
        ("state/camera/image", (H, W, 3), "uint8", PortOverride(layout="WHC"), "none of"),
        ("state/camera/image", (H, W, 3), "int32", PortOverride(layout="HWC"), "not int32"),
        ("state/body/rotation", (4,), "float32", PortOverride(layout="HW"), "image and height"),
    ],
)
def test_overrides_that_do_not_fit_an_image_are_errors(kind, shape, dtype, override, match):
    with pytest.raises(BindingError, match=match):
        bind_port("input", kind, shape, None, override, dtype=dtype, where="node 'n' input 'i'")
