"""The Warp example (examples/warp_gravity.py: gravity in the body frame and scaled joint
states by Warp kernels, a torch policy, joint targets by a Warp kernel) exported and run as a
live ROS 2 graph, one process per node and all nodes in one process: every published tensor
equals the eager pipeline on 50 fresh robot states."""

from __future__ import annotations

import pytest
import torch
from support.warp import example, example_export_fixture, example_policy  # noqa: F401

from leapp_ros.testing import Deployment, GraphUnderTest

pytestmark = pytest.mark.ros

STEPS = 50
INPUTS = ("observe/base_quat", "observe/base_ang_vel", "observe/joint_pos", "observe/joint_vel")


@pytest.fixture(scope="module", params=[Deployment.PROCESSES, Deployment.COMPOSED], ids=str)
def graph(request, example_export):
    with GraphUnderTest(example_export, request.param) as graph:
        yield graph


def test_the_warp_example_through_ros_equals_the_eager_pipeline_at_every_step(graph):
    policy = example_policy()
    generator = torch.Generator().manual_seed(11)
    for step in range(STEPS):
        state = example.random_state(generator)
        with torch.no_grad():
            obs = example.observe(*state)
            action = example.act(policy, obs)
            target = example.targets(action)
        out = graph.step(dict(zip(INPUTS, state, strict=True)))
        assert set(out) == {"observe/obs", "policy/action", "targets/joint_target"}
        for key, expected in (
            ("observe/obs", obs),
            ("policy/action", action),
            ("targets/joint_target", target),
        ):
            where = f"step {step} {key}"
            torch.testing.assert_close(
                out[key],
                expected,
                rtol=1e-5,
                atol=1e-5,
                msg=lambda m, where=where: f"{where}: {m}",
            )
