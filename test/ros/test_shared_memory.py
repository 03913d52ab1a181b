"""The Fast DDS shared-memory segments of a process killed with SIGKILL are removed after the
test module (conftest, test/support/shm.py); those of live processes never are.

Real rclpy participants on Fast DDS's shared-memory transport, in a domain of their own. Each
participant's segments are the ones its process maps, so other processes making and removing
segments meanwhile (other tests on this machine) change nothing here; that the segments it maps
are the ones ``segment_locks`` classifies is checked too, whichever Fast DDS made them (3:
``fastdds_<id>``, 2: ``fastrtps_<id>``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.shm import SHM, mapped_segments, remove_stale_segments, segment_locks

from leapp_ros.testing import Probe, reserve_domain_id, ros_env

pytestmark = pytest.mark.ros

PARTICIPANT = (
    "import time, rclpy\n"
    "from std_msgs.msg import String\n"
    "rclpy.init()\n"
    "node = rclpy.create_node('shm_victim')\n"
    "node.create_publisher(String, 'shm_topic', 10)\n"
    "print('up', flush=True)\n"
    "time.sleep(120)\n"
)


def _shm_files_mapped_by(pid: int) -> list[str]:
    """Every /dev/shm file ``pid`` maps, for a failure message."""
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return sorted({line.split()[-1] for line in lines if f" {SHM}/" in line})


@pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm (not Linux)")
def test_a_killed_participants_segment_is_removed_and_a_live_ones_stays():
    from std_msgs.msg import String

    since = time.time()
    with reserve_domain_id() as domain_id:
        victim = subprocess.Popen(
            [sys.executable, "-c", PARTICIPANT],
            env=ros_env(domain_id),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert victim.stdout.readline().strip() == "up", victim.stdout.read()
            killed = mapped_segments(victim.pid)
            assert killed, (
                "the participant maps no segment that support/shm.py classifies; its /dev/shm "
                f"files: {_shm_files_mapped_by(victim.pid)}"
            )
            assert killed <= set(segment_locks().values()), "a segment without its lock file"
            victim.kill()  # SIGKILL: Fast DDS cannot remove its segment
            victim.wait(timeout=10)
            with Probe(domain_id) as probe:  # a live participant made after ``since``
                probe.publisher("/shm_topic", String)
                live = mapped_segments(os.getpid())
                assert live, f"this process maps no segment: {_shm_files_mapped_by(os.getpid())}"
                assert killed <= set(segment_locks().values()), (
                    "the killed process's segment went by itself"
                )
                removed = remove_stale_segments(since)
                assert set(removed) >= killed
                assert not killed & set(segment_locks().values())
                assert not any((SHM / name).exists() for name in killed)
                assert live <= set(segment_locks().values()), "a live participant's segment went"
                assert all((SHM / name).exists() for name in live)
        finally:
            if victim.poll() is None:
                victim.kill()
                victim.wait()
