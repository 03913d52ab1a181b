"""A node taking camera frames keeps frame-sized buffers mapped (leapp_ros.node.frame_memory):
a buffer of a frame's size freed and taken again maps no new pages, where glibc's defaults map
(and zero) every page of it anew; a node without frame inputs leaves malloc as it is."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from leapp_ros.node.frame_memory import FRAME_BYTES, frame_bytes

FAULTS = """
import resource, sys
from leapp_ros.node.frame_memory import keep_frame_buffers
if sys.argv[1] == "kept":
    assert keep_frame_buffers()
size = 1280 * 720 * 3  # one rgb8 frame
for _ in range(3):  # let glibc settle its thresholds
    a, b = bytearray(size), bytearray(size)
    del a, b
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    a, b = bytearray(size), bytearray(size)  # bytearray(n) writes zeros: touches every page
    del a, b
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def page_faults(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc only")
def test_frame_sized_buffers_are_reused_without_new_pages():
    pages = 2 * 1280 * 720 * 3 // 4096  # the pages of one round's two frames
    assert page_faults("default") >= 20 * pages // 2  # glibc's default: new pages each round
    assert page_faults("kept") < pages  # kept: at most a stray page a round


def test_a_node_keeps_frame_buffers_only_for_inputs_of_a_frames_size():
    def port(shape: tuple[int, ...], dtype: str) -> SimpleNamespace:
        return SimpleNamespace(shape=shape, dtype=dtype)

    assert frame_bytes([port((480, 640), "float32"), port((12,), "float32")]) >= FRAME_BYTES
    assert frame_bytes([port((12,), "float32"), port((64, 64), "float64")]) < FRAME_BYTES
