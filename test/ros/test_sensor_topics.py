"""Images, odometry and height samples over real DDS into a live graph, in every mode.

The ``sensing`` pipeline (test/support/sensors.py) runs as processes, composed and fused, at
its deployed QoS. Frames are built here as drivers build them: the camera node gets every
colour encoding into three layouts (and float colour, 32FC3) and a mono frame, rows padded and
not, depth in metres (32FC1) and millimetres (16UC1, either byte order); the body node an
Odometry, clouds of heights (points with padding, fields in any order, an organized grid,
big-endian), an elevation Image and a 16UC1 frame as sent. Each output equals eager PyTorch
run on the tensors rearranged here with NumPy from the same arrays. A frame of another size is
a counted drop whose log line names both sizes; NaN heights are dropped under
``on_nonfinite: drop`` (processes, fused) and reach the model under ``publish`` (composed).
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import yaml
from support.sensors import (
    ELEVATION,
    GRID,
    PARAMS,
    POINTS,
    H,
    W,
    body,
    camera,
    cloud,
    colour_frame,
    export_sensing,
    image,
    odometry,
)

from leapp_ros.testing import Deployment, GraphOptions, GraphUnderTest

pytestmark = pytest.mark.ros

NS = "/sensing"
CAMERA_OUTPUTS = [f"camera/{name}_out" for name in ("rgb", "bgr", "rgba", "mono", "depth")]
COLOURS = ["rgb8", "bgr8", "rgba8", "bgra8"]


@pytest.fixture(scope="module")
def sensing(tmp_path_factory):
    return export_sensing(tmp_path_factory.mktemp("sensing"))


@pytest.fixture(scope="module", params=list(Deployment))
def live(request, sensing, tmp_path_factory):
    publish = request.param is Deployment.COMPOSED  # on_nonfinite: publish there, drop elsewhere
    params = tmp_path_factory.mktemp("params") / "params.yaml"
    document = {
        "/**": {"ros__parameters": {**PARAMS, "on_nonfinite": "publish" if publish else "drop"}}
    }
    params.write_text(yaml.safe_dump(document), encoding="utf-8")
    options = GraphOptions(request.param, params_file=params)
    with GraphUnderTest(sensing.path, options) as graph:
        yield SimpleNamespace(graph=graph, publish_nonfinite=publish, rng=np.random.default_rng(7))


def camera_set(rng, step: int):
    """The camera node's frames of one step (encodings, padding, byte order by ``step``) and
    the tensors they must decode to, rearranged here."""
    rgba = rng.integers(0, 256, (H, W, 4), np.uint8)
    gray = rng.integers(0, 256, (H, W), np.uint8)
    pad, big = 3 * (step % 2), step in (1, 2)  # each depth encoding in both byte orders
    colour, other, four = COLOURS[step % 4], COLOURS[(step + 1) % 4], COLOURS[2 + step % 2]
    if step % 2:
        millimetres = rng.integers(0, 65536, (H, W)).astype(np.uint16)
        depth = image(millimetres, "16UC1", pad=pad, big=big)
        metres = millimetres.astype(np.float32) * np.float32(0.001)
    else:
        metres = (rng.random((H, W)) * 5).astype(np.float32)
        depth = image(metres, "32FC1", pad=pad, big=big)
    bgr_chw = rgba[..., [2, 1, 0]].astype(np.float32)  # scale 1 (PARAMS)
    bgr_frame = image(colour_frame(rgba, other), other, pad=pad)
    if step == 3:  # floats, as a simulator renders them: 32FC3 in the port's channel order
        bgr_chw = rng.standard_normal((H, W, 3)).astype(np.float32)
        bgr_frame = image(bgr_chw, "32FC3", pad=pad)
    messages = {
        f"{NS}/camera/rgb": image(colour_frame(rgba, colour), colour, pad=pad),
        f"{NS}/camera/bgr_chw": bgr_frame,
        f"{NS}/camera/rgba": image(colour_frame(rgba, four), four, pad=pad),
        f"{NS}/camera/mono": image(gray, "mono8", pad=pad),
        f"{NS}/camera/depth": depth,
    }
    tensors = (rgba[..., :3], bgr_chw.transpose(2, 0, 1), rgba[None], gray, metres[None])
    return messages, tuple(torch.from_numpy(np.ascontiguousarray(t)) for t in tensors)


def body_set(rng, step: int, *, nan: bool = False):
    """The body node's messages of one step and the tensors they must decode to."""
    linear, angular = rng.standard_normal(3), rng.standard_normal(3)
    quaternion = rng.standard_normal(4)
    quaternion /= np.linalg.norm(quaternion)
    heights = rng.standard_normal(POINTS).astype(np.float32)
    if nan:
        heights[[3, 8]] = np.nan  # samples without a return
    grid = rng.standard_normal(GRID).astype(np.float32)
    elevation = rng.standard_normal(ELEVATION[1:]).astype(np.float32)
    millimetres = rng.integers(0, 65536, (H, W)).astype(np.uint16)
    messages = {
        f"{NS}/body/odom": odometry(linear, angular, quaternion),
        f"{NS}/body/heights": cloud(
            heights.reshape(GRID), organized=step % 2 == 1, big=step % 2 == 0, row_pad=5
        ),
        f"{NS}/body/grid": cloud(grid, organized=True, big=step % 2 == 1, row_pad=3),
        f"{NS}/body/elevation": image(elevation, "32FC1", pad=2, big=step % 2 == 1),
        f"{NS}/body/depth_mm": image(millimetres, "16UC1", pad=2 * (step % 2), big=True),
    }
    tensors = (
        torch.tensor(linear, dtype=torch.float32),
        torch.tensor(angular, dtype=torch.float32),
        torch.tensor(quaternion, dtype=torch.float32),
        torch.from_numpy(heights),
        torch.from_numpy(grid),
        torch.from_numpy(elevation[None]),
        torch.from_numpy(millimetres),
    )
    return messages, tensors


def both_sets(rng, step: int, *, nan: bool = False):
    """Messages of both nodes (a fused node ticks on every external input) and the eager
    outputs of the tensors they must decode to: ``{"node/output": tensor}``."""
    camera_messages, camera_tensors = camera_set(rng, step)
    body_messages, body_tensors = body_set(rng, step, nan=nan)
    with torch.no_grad():
        expected = {f"camera/{k}": v for k, v in camera(*camera_tensors).items()}
        expected["body/obs"] = body(*body_tensors)
    return {**camera_messages, **body_messages}, expected, (camera_tensors, body_tensors)


def assert_eager(out, expected, keys):
    for key in keys:
        torch.testing.assert_close(out[key], expected[key], rtol=1e-6, atol=1e-6, equal_nan=True)


def test_every_encoding_layout_padding_and_byte_order_matches_eager(live):
    for step in range(4):
        messages, expected, _ = both_sets(live.rng, step)
        out = live.graph.send(messages, outputs=[*CAMERA_OUTPUTS, "body/obs"])
        assert_eager(out, expected, CAMERA_OUTPUTS)


def test_odometry_clouds_and_elevation_match_eager(live):
    for step in range(2):
        messages, expected, _ = both_sets(live.rng, step)
        out = live.graph.send(messages, outputs=[*CAMERA_OUTPUTS, "body/obs"])
        assert_eager(out, expected, ["body/obs"])


def test_the_harness_steps_images_and_clouds_given_as_tensors(live):
    _, expected, (camera_tensors, body_tensors) = both_sets(live.rng, 0)
    keys = [f"camera/{port}" for port in ("rgb", "bgr_chw", "rgba", "mono", "depth")]
    keys += [f"body/{port}" for port in ("lin_vel", "ang_vel", "quat", "heights", "grid")]
    keys += ["body/elevation", "body/depth_mm"]
    out = live.graph.step(dict(zip(keys, (*camera_tensors, *body_tensors), strict=True)))
    assert_eager(out, expected, [*CAMERA_OUTPUTS, "body/obs"])


def published_one_by_one(graph, messages):
    """Publish ``messages`` one at a time, each taken by the node before the next; the
    statuses then."""
    status = graph.wait_received()
    for topic, message in messages.items():
        graph.publish({topic: message})
        status = graph.wait_received()
    return status


def wait_for_line(graph, text: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in graph.output:
        assert time.monotonic() < deadline, f"no log line with {text!r}:\n{graph.output[-3000:]}"
        graph.spin(0.05)


def test_a_frame_of_another_size_is_a_counted_drop_whose_log_names_both_sizes(live):
    graph = live.graph
    messages, _, _ = both_sets(live.rng, 1)
    messages[f"{NS}/camera/depth"] = image(np.zeros((H + 2, W + 3), np.float32), "32FC1")
    before = graph.wait_received()["camera"]
    status = published_one_by_one(graph, messages)["camera"]
    assert status["dropped"] == before["dropped"] + 1
    assert status["runs"] == before["runs"], "a set with a wrong-size frame ran"
    wait_for_line(
        graph,
        f"Image of {W + 3}x{H + 2} (width x height) for a state/camera/depth port of {W}x{H}",
    )
    test_every_encoding_layout_padding_and_byte_order_matches_eager(live)  # and it goes on


def test_nan_heights_follow_on_nonfinite(live):
    graph = live.graph
    messages, expected, _ = both_sets(live.rng, 0, nan=True)
    if live.publish_nonfinite:
        out = graph.send(messages, outputs=[*CAMERA_OUTPUTS, "body/obs"])
        assert out["body/obs"].isnan().sum() == 2
        assert_eager(out, expected, [*CAMERA_OUTPUTS, "body/obs"])
        return
    before = graph.wait_received()["body"]
    status = published_one_by_one(graph, messages)["body"]
    assert status["nonfinite_inputs"] == before["nonfinite_inputs"] + 1
    assert status["runs"] == before["runs"], "a set with NaN heights ran"
    test_odometry_clouds_and_elevation_match_eager(live)
