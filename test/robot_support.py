"""The robot example (examples/robot_policy.py) exported for tests, and its eager results."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import torch

import leapp

REPO = Path(__file__).resolve().parent.parent

__all__ = ["eager_targets", "export_robot"]


def export_robot(save_path: Path) -> SimpleNamespace:
    """Trace examples/robot_policy.py (weights seeded) into ``save_path``: the export folder as
    ``path``, and ``policy`` and ``module`` for the eager results."""
    from leapp import session as session_module

    sys.path.insert(0, str(REPO / "examples"))
    try:
        import robot_policy as module
    finally:
        sys.path.remove(str(REPO / "examples"))
    session_module._active = None
    torch.manual_seed(0)
    policy = module.Policy().eval()
    leapp.start(name="robot_policy", save_path=save_path)
    with torch.no_grad():
        module.run_policy(policy, module.preprocess(*module.example_inputs()))
    leapp.stop()
    compiled = leapp.compile_graph(graph_configs=leapp.GraphConfigs(frequency=50))
    return SimpleNamespace(path=compiled.path.parent, policy=policy, module=module)


def eager_targets(robot: SimpleNamespace, *inputs: torch.Tensor) -> torch.Tensor:
    """The joint targets of the example for ``inputs`` (joint_pos, joint_vel, base_ang_vel,
    base_quat, command), computed eagerly by PyTorch, in the example's joint order."""
    with torch.no_grad():
        return robot.module.run_policy(robot.policy, robot.module.preprocess(*inputs))
