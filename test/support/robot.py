"""The robot example (examples/robot_policy.py) exported for tests, and its eager results."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

from support.ros import export_example

__all__ = ["eager_targets", "export_robot"]


def export_robot(save_path: Path) -> SimpleNamespace:
    """examples/robot_policy.py exported, traced without autograd (see
    :func:`ros_support.export_example`)."""
    return export_example(
        save_path, "robot_policy", lambda module: module.example_inputs(), no_grad=True
    )


def eager_targets(robot: SimpleNamespace, *inputs: torch.Tensor) -> torch.Tensor:
    """The joint targets of the example for ``inputs`` (joint_pos, joint_vel, base_ang_vel,
    base_quat, command), computed eagerly by PyTorch, in the example's joint order."""
    with torch.no_grad():
        return robot.module.run_policy(robot.policy, robot.module.preprocess(*inputs))
