"""Frame-sized buffers kept by the C allocator of a process whose node takes camera frames.

Each frame a node receives passes through several buffers of its size that live for one
message: the middleware's copy out of shared memory, the serialized message rcl takes, the
Python ``bytes`` the subscription hands over, and the model's intermediates. glibc's malloc
serves a request of a megabyte or more with a fresh ``mmap`` at first, and, once it raised its
threshold, from the heap, whose top it hands back to the kernel (``brk``, ``madvise``) as soon
as more than twice that much is free at its end. Either way every frame's buffers are new pages
that the kernel maps in and zeroes on their first write: a page fault per 4 KiB, measured here
as a fifth of a camera encoder's process CPU on a 1280x720 ``rgb8`` stream, more than its
decode.

:func:`keep_frame_buffers` (called once per process by every node that takes an input of
:data:`FRAME_BYTES` or more) sets glibc's thresholds so that requests of up to
:data:`MMAP_LIMIT` come from the heap and freed memory stays mapped (up to the largest the
process used at once, which the next frame reuses), through ``mallopt``. Elsewhere than glibc
it does nothing.
"""

from __future__ import annotations

import ctypes
import logging
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["FRAME_BYTES", "MMAP_LIMIT", "frame_bytes", "keep_frame_buffers"]

logger = logging.getLogger(__name__)

FRAME_BYTES = 1 << 16  # an input this large is a frame (leapp.run.onnx_runner.DIRECT_BYTES)
MMAP_LIMIT = 32 << 20  # glibc's largest mmap threshold on 64-bit systems
TRIM_LIMIT = 1 << 30  # freed heap memory kept mapped: in effect, all of it
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_kept = [False]


def frame_bytes(ports: Iterable[Any]) -> int:
    """The size in bytes of the largest of ``ports`` (``dtype`` and ``shape`` each)."""
    largest = 0
    for port in ports:
        try:
            item = np.dtype(port.dtype).itemsize
        except TypeError:  # bfloat16
            item = 2
        largest = max(largest, math.prod(port.shape) * item)
    return largest


def keep_frame_buffers() -> bool:
    """Make glibc keep frame-sized buffers for reuse (see the module documentation), once per
    process; whether the thresholds are set (False where the C library is not glibc)."""
    if _kept[0]:
        return True
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        logger.debug("no mallopt in this C library: frame buffers are left to it")
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # a threshold set by hand also stops glibc from moving either of them
    if not (mallopt(_M_MMAP_THRESHOLD, MMAP_LIMIT) and mallopt(_M_TRIM_THRESHOLD, TRIM_LIMIT)):
        logger.debug("mallopt refused the thresholds: frame buffers are left to malloc")
        return False
    _kept[0] = True
    return True
