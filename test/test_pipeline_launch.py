"""launch_testing test of launch/pipeline.launch.py with the seed export, in the three
deployment shapes (one process per node, composed, and fused).

It needs the ROS 2 launch stack (launch, launch_ros, launch_testing, pytest < 9): a full ROS 2
install, or scripts/setup.sh with ../shared/ros2-launch present (as on CI). Run it with
``launch_test test/test_pipeline_launch.py`` or ``python -m pytest test/test_pipeline_launch.py``.
Without the launch stack it is skipped (test/test_runner.py covers the same graph through
``leapp-ros run``). Set LEAPP_ROS_TEST_EXPORT to an export folder to use it instead of tracing
examples/torch_pipeline.py into a temporary folder.
"""

import pytest

pytest.importorskip(
    "launch_testing.actions",
    reason="launch_testing is not installed (ROS 2 from pip wheels has no launch stack): use a "
    "ROS 2 install, or run scripts/setup.sh with ../shared/ros2-launch present",
)

import atexit
import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

import launch_testing
import launch_testing.actions
import launch_testing.asserts
import torch
from launch.actions import IncludeLaunchDescription, SetEnvironmentVariable
from launch.launch_description import LaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource

import leapp

sys.path.insert(0, str(Path(__file__).resolve().parent))  # runner_support, under launch_test
from ros_support import Probe
from runner_support import SeedIO, claim_domain_id, export_seed

LAUNCH_FILE = Path(__file__).resolve().parent.parent / "launch" / "pipeline.launch.py"
NODES = ("preprocess", "policy")
_exports: list[Path] = []


def seed_export() -> Path:
    """The export under test: LEAPP_ROS_TEST_EXPORT, or the seed traced once per run."""
    if os.environ.get("LEAPP_ROS_TEST_EXPORT"):
        return Path(os.environ["LEAPP_ROS_TEST_EXPORT"])
    if not _exports:
        folder = tempfile.mkdtemp(prefix="leapp_ros_launch_test_")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _exports.append(export_seed(Path(folder)))
    return _exports[0]


_LOCKS: list = []  # the domain ids' lock files (a lock held by a local would end with it)

MODES = {  # launch arguments of the three deployment shapes
    "processes": {},
    "composed": {"composed": "true"},
    "fused": {"fused": "true"},
}


@pytest.mark.launch_test
@launch_testing.parametrize("mode", list(MODES))
def generate_test_description(mode):
    export = seed_export()
    domain_id, lock = claim_domain_id()
    _LOCKS.append(lock)  # held until this test process ends: the launched processes use it
    pipeline = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
        launch_arguments={"pipeline": str(export), **MODES[mode]}.items(),
    )
    description = LaunchDescription(
        [
            # Every process of this run stays on this machine and in a domain of its own.
            SetEnvironmentVariable("ROS_DOMAIN_ID", str(domain_id)),
            SetEnvironmentVariable("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST"),
            pipeline,
            # The processes are starting; the active test waits for their ready status.
            launch_testing.actions.ReadyToTest(),
        ]
    )
    return description, {"domain_id": domain_id, "export": export}


class TestSeedPipeline(unittest.TestCase):
    def test_action_answers_state_and_velocity_like_the_export(self, domain_id, export):
        pipeline = leapp.Pipeline.load(export)
        namespace = f"/{pipeline.spec.name}"  # the launch file's default namespace
        probe = Probe(domain_id)
        try:
            probe.wait_ready(namespace, NODES, timeout_s=60)
            seed = SeedIO(probe, namespace)
            for _ in range(3):
                state, velocity = torch.randn(6) * 2, torch.randn(3)
                inputs = {"preprocess/state": state, "preprocess/velocity": velocity}
                expected = pipeline.step(inputs)["policy/action"]
                action = seed.step(state, velocity, expected, timeout_s=20)
                torch.testing.assert_close(action, expected)
        finally:
            probe.close()


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_every_process_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)
