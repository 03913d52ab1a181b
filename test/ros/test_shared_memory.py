"""The Fast DDS shared-memory segments of a process killed with SIGKILL are removed after the
test module (conftest, test/support/shm.py); those of live processes never are.

Real rclpy participants on Fast DDS's shared-memory transport, in a domain of their own.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from support.runner import wait_until
from support.shm import SHM, remove_stale_segments, segment_locks

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


@pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm (not Linux)")
def test_a_killed_participants_segment_is_removed_and_a_live_ones_stays():
    from std_msgs.msg import String

    since = time.time()
    with reserve_domain_id() as domain_id:
        before = set(segment_locks())
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
            assert wait_until(lambda: set(segment_locks()) - before, 10), "no segment was made"
            killed = set(segment_locks()) - before
            victim.kill()  # SIGKILL: Fast DDS cannot remove its segment
            victim.wait(timeout=10)
            with Probe(domain_id) as probe:  # a live participant made after ``since``
                probe.publisher("/shm_topic", String)
                assert wait_until(lambda: set(segment_locks()) - before - killed, 10)
                live = set(segment_locks()) - before - killed
                assert killed <= set(segment_locks()), (
                    "the killed process's segment went by itself"
                )
                removed = remove_stale_segments(since)
                assert {f"fastdds_{name}_el" for name in removed} >= killed
                assert not killed & set(segment_locks())
                assert not any((SHM / lock[: -len("_el")]).exists() for lock in killed)
                assert live and live <= set(segment_locks()), "a live participant's segment went"
        finally:
            if victim.poll() is None:
                victim.kill()
                victim.wait()
