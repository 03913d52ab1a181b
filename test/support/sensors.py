"""A pipeline that sees: camera images, odometry and terrain heights in, exported for tests, and
frames built as drivers build them (independent of leapp_ros's codecs).

``camera`` (ONNX: its node gets read-only views of the payloads) takes a colour image in three
layouts, a mono image and a depth image in metres, and ``body`` (TorchScript, which takes
uint16 where ONNX export does not) an Odometry's twist and orientation, heights of a
PointCloud2 (points, and an organized grid), an elevation Image and a 16UC1 depth image as
sent; each output is an exact affine function of its input, so it shows the decoded tensor.
:func:`image`, :func:`cloud` and :func:`odometry` build rclpy messages from arrays with plain
NumPy; :data:`PARAMS` are the ``ports.<port>.*`` parameters the graph runs with.
"""

from __future__ import annotations

import array
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

import leapp
from leapp import InputKindEnum, TensorSemantics, annotate

__all__ = [
    "GRID",
    "PARAMS",
    "POINTS",
    "H",
    "W",
    "body",
    "camera",
    "cloud",
    "colour_frame",
    "depth_policy",
    "export_depth_policy",
    "export_sensing",
    "image",
    "odometry",
]

H, W = 6, 8  # camera frames
POINTS = 12  # height samples in cloud order
GRID = (3, 4)  # an organized cloud's grid
ELEVATION = (1, 4, 5)  # an elevation Image, [1, H, W]
CAMERA = "state/camera/image"  # Isaac ROS Deploy's kind (not in LEAPP's InputKindEnum)
DEPTH = "state/camera/depth"  # leapp_ros's kinds, as strings
HEIGHT = "state/terrain/height"

#: ports.<port>.* of the graph: Odometry for the gyro and orientation, an Image for the
#: elevation grid, 0..255 floats for the CHW colour port
PARAMS = {
    "ports": {
        "ang_vel": {"message": "nav_msgs/msg/Odometry"},
        "quat": {"message": "nav_msgs/msg/Odometry"},
        "elevation": {"message": "sensor_msgs/msg/Image"},
        "bgr_chw": {"scale": 1.0},
    }
}


def camera(rgb, bgr_chw, rgba, mono, depth):
    """The camera node: each image, as float, times 2 plus 1."""
    rgb, bgr_chw, rgba, mono, depth = annotate.input_tensors(
        "camera",
        [
            TensorSemantics(name="rgb", ref=rgb, kind=CAMERA, element_names=[["r", "g", "b"]]),
            TensorSemantics(
                name="bgr_chw", ref=bgr_chw, kind=CAMERA, element_names=[list("bgr"), None, None]
            ),
            TensorSemantics(name="rgba", ref=rgba, kind=CAMERA),
            TensorSemantics(name="mono", ref=mono, kind=CAMERA),
            TensorSemantics(name="depth", ref=depth, kind=DEPTH),
        ],
    )
    outputs = {
        f"{name}_out": value.float() * 2 + 1
        for name, value in (
            ("rgb", rgb),
            ("bgr", bgr_chw),
            ("rgba", rgba),
            ("mono", mono),
            ("depth", depth),
        )
    }
    annotate.output_tensors("camera", outputs, export_with="onnx")
    return outputs


def body(lin_vel, ang_vel, quat, heights, grid, elevation, depth_mm):
    """The body node: its inputs flat and side by side, as float, times 2 plus 1."""
    lin_vel, ang_vel, quat, heights, grid, elevation, depth_mm = annotate.input_tensors(
        "body",
        [
            TensorSemantics(name="lin_vel", ref=lin_vel, kind=InputKindEnum.BODY_LINEAR_VELOCITY),
            TensorSemantics(name="ang_vel", ref=ang_vel, kind=InputKindEnum.BODY_ANGULAR_VELOCITY),
            TensorSemantics(name="quat", ref=quat, kind=InputKindEnum.BODY_ROTATION),
            TensorSemantics(name="heights", ref=heights, kind=HEIGHT),
            TensorSemantics(name="grid", ref=grid, kind=HEIGHT),
            TensorSemantics(name="elevation", ref=elevation, kind=HEIGHT),
            TensorSemantics(name="depth_mm", ref=depth_mm, kind=DEPTH),
        ],
    )
    flat = (grid.reshape(-1), elevation.reshape(-1), depth_mm.reshape(-1).float())
    obs = torch.cat((lin_vel, ang_vel, quat, heights, *flat)) * 2 + 1
    annotate.output_tensors("body", {"obs": obs}, export_with="jit")
    return obs


def example_inputs() -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    images = (
        torch.zeros(H, W, 3, dtype=torch.uint8),
        torch.zeros(3, H, W),
        torch.zeros(1, H, W, 4, dtype=torch.uint8),
        torch.zeros(H, W, dtype=torch.uint8),
        torch.zeros(1, H, W),
    )
    state = (
        torch.zeros(3),
        torch.zeros(3),
        torch.tensor([1.0, 0.0, 0.0, 0.0]),
        torch.zeros(POINTS),
        torch.zeros(GRID),
        torch.zeros(ELEVATION),
        torch.zeros(H, W, dtype=torch.uint16),
    )
    return images, state


def export_sensing(save_path: Path) -> SimpleNamespace:
    """The pipeline ``sensing`` exported into ``save_path``: ``path`` (the export folder) and
    ``params`` (a ROS 2 parameters file with :data:`PARAMS` for every node, ``on_nonfinite``
    left at its default)."""
    import yaml

    images, state = example_inputs()
    leapp.start(name="sensing", save_path=save_path)
    with torch.no_grad():
        camera(*images)
        body(*state)
    leapp.stop()
    compiled = leapp.compile_graph()
    params = save_path / "sensing_params.yaml"
    params.write_text(yaml.safe_dump({"/**": {"ros__parameters": PARAMS}}), encoding="utf-8")
    return SimpleNamespace(path=compiled.path.parent, params=params)


DEPTH_FRAME = (48, 64)  # the depth policy's camera


def depth_policy(depth, lin_vel, heights, weights):
    """A depth encoder (ONNX: 8x8 average pooling) and a policy (TorchScript) taking its
    latent, the body's linear velocity (Odometry) and height samples (PointCloud2)."""
    (depth,) = annotate.input_tensors(
        "encoder", [TensorSemantics(name="depth", ref=depth, kind=DEPTH)]
    )
    latent = torch.nn.functional.avg_pool2d(depth, 8).reshape(-1)
    annotate.output_tensors("encoder", {"latent": latent}, export_with="onnx")
    latent, lin_vel, heights = annotate.input_tensors(
        "policy",
        [
            TensorSemantics(name="latent", ref=latent),
            TensorSemantics(name="lin_vel", ref=lin_vel, kind=InputKindEnum.BODY_LINEAR_VELOCITY),
            TensorSemantics(name="heights", ref=heights, kind=HEIGHT),
        ],
    )
    action = torch.tanh(weights @ torch.cat((latent, lin_vel, heights)))
    annotate.output_tensors("policy", {"action": action}, export_with="jit")
    return latent, action


def export_depth_policy(save_path: Path) -> SimpleNamespace:
    """:func:`depth_policy` exported as ``depth_policy`` into ``save_path``: ``path`` and
    ``weights`` (seeded; eager PyTorch calls :func:`depth_policy` with them)."""
    rows, columns = DEPTH_FRAME
    weights = torch.randn(
        4, rows * columns // 64 + 3 + POINTS, generator=torch.Generator().manual_seed(5)
    )
    leapp.start(name="depth_policy", save_path=save_path)
    with torch.no_grad():
        depth_policy(
            torch.zeros(1, 1, rows, columns), torch.zeros(3), torch.zeros(POINTS), weights
        )
    leapp.stop()
    compiled = leapp.compile_graph()
    return SimpleNamespace(path=compiled.path.parent, weights=weights)


def image(pixels: np.ndarray, encoding: str, *, pad: int = 0, big: bool = False):
    """An rclpy Image of ``pixels`` ([H, W] or [H, W, C] in the encoding's channel order and
    pixel type), rows padded with ``pad`` bytes of 0xAB, big-endian pixels if ``big``."""
    from sensor_msgs.msg import Image

    pixels = pixels.astype(pixels.dtype.newbyteorder(">" if big else "<"))
    height, width = pixels.shape[:2]
    rows = pixels.reshape(height, -1).view(np.uint8)
    padded = np.full((height, rows.shape[1] + pad), 0xAB, np.uint8)
    padded[:, : rows.shape[1]] = rows
    return Image(
        height=height,
        width=width,
        encoding=encoding,
        is_bigendian=int(big),
        step=padded.shape[1],
        data=array.array("B", padded.tobytes()),
    )


def colour_frame(rgba: np.ndarray, encoding: str) -> np.ndarray:
    """The pixels of an ``[H, W, 4]`` RGBA array as ``encoding`` lays them out (``mono8``:
    the red channel)."""
    if encoding == "mono8":
        return rgba[..., 0]
    return rgba[..., ["rgba".index(c) for c in encoding.removesuffix("8")]]


def cloud(heights: np.ndarray, *, organized: bool, big: bool = False, row_pad: int = 0):
    """A PointCloud2 whose points hold ``heights`` as z, with fields (intensity, z, y as
    float64, x) in that order (a 24-byte point), rows padded by ``row_pad`` bytes."""
    from sensor_msgs.msg import PointCloud2, PointField

    rows, columns = heights.shape if organized else (1, heights.size)
    order = ">" if big else "<"
    point = np.dtype(
        {
            "names": ["intensity", "z", "y", "x"],
            "formats": [order + "f4", order + "f4", order + "f8", order + "f4"],
            "offsets": [0, 4, 12, 20],
            "itemsize": 24,
        }
    )
    points = np.zeros((rows, columns), point)
    points["z"] = heights.reshape(rows, columns)
    points["x"], points["y"] = np.meshgrid(np.arange(columns) * 0.1, np.arange(rows) * 0.1)
    points["intensity"] = 7.0
    data = np.full((rows, columns * 24 + row_pad), 0xCD, np.uint8)
    data[:, : columns * 24] = points.view(np.uint8).reshape(rows, -1)
    fields = [
        PointField(name="intensity", offset=0, datatype=PointField.FLOAT32, count=1),
        PointField(name="z", offset=4, datatype=PointField.FLOAT32, count=1),
        PointField(name="y", offset=12, datatype=PointField.FLOAT64, count=1),
        PointField(name="x", offset=20, datatype=PointField.FLOAT32, count=1),
    ]
    return PointCloud2(
        height=rows,
        width=columns,
        fields=fields,
        is_bigendian=big,
        point_step=24,
        row_step=columns * 24 + row_pad,
        data=array.array("B", data.tobytes()),
        is_dense=bool(np.isfinite(heights).all()),
    )


def odometry(linear, angular, quaternion_wxyz, position=(0.0, 0.0, 0.0)):
    """An rclpy Odometry (``odom`` -> ``base_link``) with this body twist and pose."""
    from nav_msgs.msg import Odometry

    message = Odometry(child_frame_id="base_link")
    message.header.frame_id = "odom"
    twist, pose = message.twist.twist, message.pose.pose
    twist.linear.x, twist.linear.y, twist.linear.z = (float(v) for v in linear)
    twist.angular.x, twist.angular.y, twist.angular.z = (float(v) for v in angular)
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in position)
    o = pose.orientation
    o.w, o.x, o.y, o.z = (float(v) for v in quaternion_wxyz)
    return message
