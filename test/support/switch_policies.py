"""Other policies for the arm of :mod:`support.sim`, to switch to on a running graph: the same
two nodes and ports (``preprocess`` unchanged), the ``policy`` node's weights drawn from
another seed (:func:`export_arm_variant`), or a policy whose every result is NaN
(``failing=True``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

import leapp
from support.sim import TICK_S, Policy, Reading, preprocess, run_policy

__all__ = ["NanPolicy", "export_arm_variant"]

_WEIGHT_SCALE = 0.6


class NanPolicy(Policy):
    """The arm's policy, but every correction it gives is NaN."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(obs)) * torch.tensor(float("nan"))


def export_arm_variant(
    save_path: Path, seed: int, *, failing: bool = False, name: str = "arm_policy"
) -> SimpleNamespace:
    """The arm's pipeline with the policy's weights drawn from ``seed`` (``failing``: a
    :class:`NanPolicy`), exported into ``save_path``: ``path``, ``name`` and ``policy`` (for
    :func:`support.sim.eager_targets`)."""
    policy = (NanPolicy() if failing else Policy()).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in policy.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * _WEIGHT_SCALE)
    at_rest = Reading(
        position=np.asarray((0.25, -0.5, 0.35)),
        velocity=np.zeros(3),
        gyro=np.zeros(3),
        accel=np.array([0.0, 0.0, 9.81]),
        quat=np.array([1.0, 0.0, 0.0, 0.0]),
    )
    leapp.start(name=name, save_path=save_path)
    with torch.no_grad():
        run_policy(policy, preprocess(*at_rest.tensors()))
    leapp.stop()
    compiled = leapp.compile_graph(graph_configs=leapp.GraphConfigs(frequency=1 / TICK_S))
    return SimpleNamespace(path=compiled.path.parent, name=name, policy=policy)
