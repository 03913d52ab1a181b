"""Camera frames of a MuJoCo model as ``sensor_msgs/Image`` messages, rendered offscreen.

A :class:`CameraStream` is one image topic of the graph fed by one MJCF camera: its depth
(``32FC1``, metres along the camera's optical axis, what REP 118 asks of a depth image) or its
colour (``rgb8``), at the size of the graph input it feeds, one frame every ``every`` control
ticks. :class:`CameraFrames` renders them with MuJoCo's ``Renderer`` (one per frame size; both
images of one camera and size come from one scene update, so they show one physics state): a
depth frame is the Renderer's depth, which undoes OpenGL's projection with the model's clip
planes (``znear`` and ``zfar`` of ``<visual><map>`` times the model's extent) into metres, for
the depth buffer convention of the MuJoCo version installed (recent versions, 4.0 among them,
render with a reversed depth buffer, where the older linearization
``near / (1 - d (1 - near / far))`` of the raw buffer ``d`` would be wrong); a pixel that
sees nothing reads the far clip distance. Rows run from the top of the picture, as in an
Image; ``header.frame_id`` is the camera's MJCF name (MuJoCo's camera frame: x right, y up,
looking along -z). The model's offscreen buffer (``<visual><global offwidth offheight>``) is
enlarged where a frame needs it.

MuJoCo renders through OpenGL: ``MUJOCO_GL`` picks the backend when ``mujoco`` is first
imported (``egl``: headless, Mesa's or a GPU driver's libEGL; ``osmesa``; ``glfw``: a
display). :func:`~leapp_ros.sim.mujoco_robot.require_mujoco` asks for ``egl`` on a Linux
machine without a display when ``MUJOCO_GL`` is unset; a backend that does not work is a
:class:`~leapp.errors.DependencyError` saying what to install and set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from leapp.errors import DependencyError
from leapp_ros.plan.bindings import IMAGE
from leapp_ros.plan.pipeline import PipelinePlan
from leapp_ros.plan.sensor_layout import CAMERA_DEPTH, CAMERA_IMAGE, accepted_encodings
from leapp_ros.sim.sim_map import SimMap, SimMapError

__all__ = ["CameraFrames", "CameraStream", "camera_streams", "fill_image"]

_GL_HELP = (
    "MuJoCo renders camera frames through OpenGL, and the backend MUJOCO_GL={backend!r} "
    "did not start ({error}). On a machine without a display install Mesa's EGL (Debian, "
    "Ubuntu: apt install libegl1 libgl1-mesa-dri; or a GPU driver's libEGL) and set "
    "MUJOCO_GL=egl before Python starts; MUJOCO_GL=osmesa needs libosmesa6; with a display, "
    "MUJOCO_GL=glfw. Or map no cameras."
)


@dataclass(frozen=True)
class CameraStream:
    """The frames of MJCF camera ``camera`` (id ``camera_id``) on the absolute ``topic``:
    depth (``depth`` True) or colour, ``height`` x ``width`` pixels, every ``every`` ticks."""

    camera: str
    camera_id: int
    topic: str
    depth: bool
    height: int
    width: int
    every: int = 1

    @property
    def encoding(self) -> str:
        return "32FC1" if self.depth else "rgb8"

    def due(self, tick: int) -> bool:
        """Whether control tick ``tick`` (from 0) has a frame."""
        return tick % self.every == 0


class CameraFrames:
    """Renders the frames of ``streams`` of the model (``mujoco`` the module).

    Raises:
        DependencyError: no OpenGL backend works (the message says what to install and set).
    """

    def __init__(self, mujoco: Any, model: Any, streams: tuple[CameraStream, ...]):
        self.streams = streams
        self._renderers: dict[tuple[int, int], Any] = {}
        sizes = sorted({(s.height, s.width) for s in streams})
        if not sizes:
            return
        visual = model.vis.global_
        visual.offheight = max(int(visual.offheight), *(h for h, _ in sizes))
        visual.offwidth = max(int(visual.offwidth), *(w for _, w in sizes))
        for size in sizes:
            try:
                self._renderers[size] = mujoco.Renderer(model, *size)
            except Exception as e:  # MuJoCo's FatalError, ImportError, RuntimeError, ...
                self.close()
                backend = os.environ.get("MUJOCO_GL", "")
                raise DependencyError(_GL_HELP.format(backend=backend, error=e)) from e

    def render(self, data: Any, tick: int) -> dict[str, np.ndarray]:
        """The frame of every stream due at control tick ``tick``, by topic, of the state
        ``data`` holds (after ``mj_forward``): float32 ``[H, W]`` metres, or uint8
        ``[H, W, 3]``. One scene update per camera and size serves its depth and colour."""
        frames: dict[str, np.ndarray] = {}
        due = [stream for stream in self.streams if stream.due(tick)]
        for camera, size in dict.fromkeys((s.camera_id, (s.height, s.width)) for s in due):
            renderer = self._renderers[size]
            renderer.update_scene(data, camera=camera)
            for stream in due:
                if (stream.camera_id, (stream.height, stream.width)) != (camera, size):
                    continue
                if stream.depth:
                    renderer.enable_depth_rendering()
                else:
                    renderer.disable_depth_rendering()
                frames[stream.topic] = renderer.render()
        return frames

    def close(self) -> None:
        """Free the renderers' GL contexts."""
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()


def fill_image(message: Any, pixels: np.ndarray, stream: CameraStream) -> None:
    """Set ``message`` (an Image, :mod:`~leapp_ros.messages.cdr` defaults) to ``pixels``."""
    wire = np.ascontiguousarray(pixels, "<f4" if stream.depth else np.uint8)
    message.header.frame_id = stream.camera
    message.height, message.width = stream.height, stream.width
    message.encoding = stream.encoding
    message.is_bigendian = 0
    message.step = stream.width * (4 if stream.depth else 3)
    message.data = wire.view(np.uint8).reshape(-1)


def camera_streams(model: Any, sim_map: SimMap, plan: PipelinePlan) -> tuple[CameraStream, ...]:
    """The streams of ``sim_map``'s cameras, checked against the model and the graph's Image
    inputs (each topic a camera names must be one, of a depth port for ``depth``, of an rgb
    port for ``colour``; its size is the port's).

    Raises:
        SimMapError: an unknown camera, a topic that is no fitting Image input of the graph.
    """
    images = {
        plan.resolve(port.topic): port
        for node in plan.nodes
        for port in node.inputs
        if port.kind == "external" and port.message_type == IMAGE and port.topic
    }
    streams = []
    for camera in sim_map.cameras:
        try:
            camera_id = int(model.camera(camera.name).id)
        except KeyError:
            names = [model.camera(i).name for i in range(model.ncam)]
            raise SimMapError(f"{sim_map.path}: cameras: {camera.name!r} is no camera of the "
                              f"MJCF model; it has {names or 'none'}") from None  # fmt: skip
        for topic, depth in ((camera.depth, True), (camera.colour, False)):
            if topic:
                port = _image_port(images, plan, topic, depth, f"cameras.{camera.name}", sim_map)
                layout, shape = port.binding.layout, port.shape
                height, width = shape[layout.index("H")], shape[layout.index("W")]
                streams.append(CameraStream(camera.name, camera_id, plan.resolve(topic), depth,
                                            height, width, camera.every))  # fmt: skip
    topics = [stream.topic for stream in streams]
    twice = sorted({topic for topic in topics if topics.count(topic) > 1})
    if twice:
        raise SimMapError(f"{sim_map.path}: cameras: topic(s) {twice} named twice; each Image "
                          "input takes one camera's depth or colour")  # fmt: skip
    return tuple(streams)


def _image_port(images: dict, plan: PipelinePlan, topic: str, depth: bool, key: str,
                sim_map: SimMap) -> Any:  # fmt: skip
    what = "depth" if depth else "colour"
    port = images.get(plan.resolve(topic))
    listed = ", ".join(f"{t} ({p.binding.kind})" for t, p in images.items()) or "none"
    if port is None:
        raise SimMapError(
            f"{sim_map.path}: {key}.{what}: {plan.resolve(topic)} is no Image input of graph "
            f"{plan.namespace}; its Image inputs: {listed}"
        )
    binding = port.binding
    encoding = "32FC1" if depth else "rgb8"
    kind = CAMERA_DEPTH if depth else CAMERA_IMAGE
    if binding.kind != kind or encoding not in accepted_encodings(kind, binding.elements,
                                                                  port.dtype):  # fmt: skip
        raise SimMapError(
            f"{sim_map.path}: {key}.{what}: {plan.resolve(topic)} takes {binding.describe()} "
            f"({port.dtype}); the simulator sends {what} as {encoding}, for a port of kind "
            f"{kind}{' (float)' if depth else ' with channels r, g, b'}"
        )
    return port
