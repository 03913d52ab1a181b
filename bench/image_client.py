"""The client that drives a camera graph in bench/image_latency.py.

:class:`ImageClient` publishes one camera frame (``sensor_msgs/Image``) at up to
:data:`IMAGE_HZ` and one ``sensor_msgs/JointState`` at :data:`JOINT_HZ`, both serialized once
and published as CDR bytes (the same bytes every time, so every command must be eager
PyTorch's targets for them), and times the command (``policy/targets``) that each frame
produces: from just before the frame's publish to the command's arrival. One frame is in
flight at a time: the next one goes out at its 30 Hz slot once the command of the last came
(or after :data:`GIVE_UP_S`, counted lost), so each command belongs to one frame. The CPU time
of the graph's processes (all threads; :func:`graph_client.cpu_seconds`) over a window, divided
by the frames answered in it, is the CPU per image; the client's own process is not counted.
Windows without frames (``drive(frames=False)``) measure what the joint states alone cost.

Fast DDS's shared-memory transport holds a sample in one segment of 512 KB by default: a
640x480 depth frame (1.2 MB) then goes as fragments that a best-effort reader mostly loses
(measured here: 1 depth frame of 13 answered). :func:`frame_transport` gives every
participant of this process and its children a 16 MB segment (and UDP on the loopback only),
as a camera deployment configures its middleware (``FASTDDS_DEFAULT_PROFILES_FILE``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graph_client import cpu_seconds
from model_clock import FOLDER, model_cpu

FRAME_PROFILE = """<?xml version="1.0" encoding="UTF-8"?>
<dds xmlns="http://www.eprosima.com">
  <profiles>
    <transport_descriptors>
      <transport_descriptor>
        <transport_id>frames_shm</transport_id>
        <type>SHM</type>
        <segment_size>16777216</segment_size>
      </transport_descriptor>
      <transport_descriptor>
        <transport_id>frames_udp</transport_id>
        <type>UDPv4</type>
        <interfaceWhiteList><address>127.0.0.1</address></interfaceWhiteList>
      </transport_descriptor>
    </transport_descriptors>
    <participant profile_name="frames" is_default_profile="true">
      <rtps>
        <userTransports>
          <transport_id>frames_shm</transport_id>
          <transport_id>frames_udp</transport_id>
        </userTransports>
        <useBuiltinTransports>false</useBuiltinTransports>
      </rtps>
    </participant>
  </profiles>
</dds>
"""
PROFILES = "FASTDDS_DEFAULT_PROFILES_FILE"
IMAGE_HZ = 30.0
JOINT_HZ = 500.0
GIVE_UP_S = 1.0


@dataclass
class Window:
    """What one driving window measured: latencies (us) of the answered frames, frames lost,
    the graph's CPU time (s) and the joint states sent."""

    latencies: list[float] = field(default_factory=list)
    lost: int = 0
    cpu_s: float = 0.0
    model_s: float = 0.0
    model_calls: int = 0
    joints: int = 0
    seconds: float = 0.0


@contextlib.contextmanager
def frame_transport(folder: Path) -> Iterator[Path]:
    """Write :data:`FRAME_PROFILE` into ``folder`` and make it the default Fast DDS profile of
    the participants this process and its children create meanwhile (Fast DDS reads it when
    a process creates its first participant); yields the file."""
    path = folder / "frame_transport.xml"
    path.write_text(FRAME_PROFILE)
    before = os.environ.get(PROFILES)
    os.environ[PROFILES] = str(path)
    try:
        yield path
    finally:
        if before is None:
            del os.environ[PROFILES]
        else:
            os.environ[PROFILES] = before


class ImageClient:
    """Publishes ``frame_bytes`` and ``joint_bytes`` (serialized CDR) into ``namespace``'s
    graph and times its commands; ``pids`` are the graph's processes."""

    def __init__(self, namespace: str, image_topic: str, frame_bytes: bytes, joint_bytes: bytes):
        import rclpy
        from sensor_msgs.msg import Image, JointState
        from std_msgs.msg import Float64MultiArray

        from leapp_ros.node.executor import make_executor
        from leapp_ros.plan.pipeline import PUBLISHER_QOS, SUBSCRIPTION_QOS
        from leapp_ros.plan.settings import qos_profile

        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=int(os.environ["ROS_DOMAIN_ID"]))
        self.node = rclpy.create_node("image_client", namespace=namespace, context=self.context)
        qos = qos_profile(PUBLISHER_QOS)
        self._image = self.node.create_publisher(Image, image_topic, qos)
        self._joints = self.node.create_publisher(JointState, "policy/joint_states", qos)
        self.frame_bytes, self.joint_bytes = frame_bytes, joint_bytes
        self.node.create_subscription(
            Float64MultiArray, "policy/targets", self._on_command, qos_profile(SUBSCRIPTION_QOS)
        )
        self.executor = make_executor(self.context)
        self.executor.add_node(self.node)
        self.arrived_ns: int | None = None
        self.last_command: Any = None
        self.pids: list[int] = []

    def _on_command(self, message: Any) -> None:
        self.arrived_ns = time.perf_counter_ns()
        self.last_command = message

    def drive(self, seconds: float, frames: bool = True) -> Window:
        """Joint states at JOINT_HZ and (``frames``) frames at up to IMAGE_HZ for ``seconds``,
        one frame in flight (see the module documentation)."""
        window = Window()
        cpu_before = cpu_seconds(self.pids)
        model_before = self.model_cpu()
        began = time.perf_counter()
        next_joint = next_image = began
        sent_ns: int | None = None
        while (now := time.perf_counter()) - began < seconds or sent_ns is not None:
            if now >= next_joint:
                self._joints.publish(self.joint_bytes)
                window.joints += 1
                next_joint = max(next_joint + 1 / JOINT_HZ, now - 1 / JOINT_HZ)
            if sent_ns is not None and self.arrived_ns is not None:
                window.latencies.append((self.arrived_ns - sent_ns) / 1000.0)
                sent_ns = None
            elif sent_ns is not None and time.perf_counter_ns() - sent_ns > GIVE_UP_S * 1e9:
                window.lost += 1
                sent_ns = None
            if frames and sent_ns is None and now >= next_image and now - began < seconds:
                self.arrived_ns = None
                sent_ns = time.perf_counter_ns()
                self._image.publish(self.frame_bytes)
                next_image = max(next_image + 1 / IMAGE_HZ, now)
            wake = next_joint if sent_ns is not None or not frames else min(next_joint, next_image)
            self.executor.spin_once(timeout_sec=max(0.0, wake - time.perf_counter()))
        window.cpu_s = cpu_seconds(self.pids) - cpu_before
        model_s, calls = self.model_cpu()
        window.model_s, window.model_calls = model_s - model_before[0], calls - model_before[1]
        window.seconds = time.perf_counter() - began
        return window

    def model_cpu(self) -> tuple[float, int]:
        """The graph's model calls so far: CPU seconds and calls (bench/model_clock.py)."""
        folder = os.environ.get(FOLDER)
        return model_cpu(self.pids, Path(folder)) if folder else (0.0, 0)

    def prime(self, timeout_s: float = 60.0) -> Any:
        """Drive until a command came (best-effort subscriptions may drop the first frames,
        a model's first call may be slow); the command."""
        deadline = time.monotonic() + timeout_s
        while self.last_command is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"{self.node.get_namespace()}: the graph never answered")
            self.drive(0.5)
        self.drive(0.5)  # let slow first answers pass
        return self.last_command

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()
