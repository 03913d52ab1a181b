"""Policies to switch between on a running graph.

For the arm of :mod:`support.sim`: the same two nodes and ports (``preprocess`` unchanged),
the ``policy`` node's weights drawn from another seed (:func:`export_arm_variant`), or a
policy whose every result is NaN (``failing=True``). And a recurrent policy with explicit
state ``h`` (:func:`export_gru_variant`: weights and the first ``h`` of one's choosing), run
eagerly by :func:`gru_step` outside a session."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

import leapp
from support.sim import TICK_S, Policy, Reading, preprocess, run_policy

__all__ = ["NanPolicy", "export_arm_variant", "export_gru_variant", "gru_step"]

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


def gru_step(modules, obs, h, backend="jit"):
    """One tick of a GRU policy with explicit state ``h`` (``modules``: the cell and the
    head): ``(action, next h)``."""
    from leapp import annotate

    cell, head = modules
    obs = annotate.input_tensors("policy", {"obs": obs})
    h = annotate.state_tensors("policy", {"h": h})
    h_next = cell(obs.unsqueeze(0), h.unsqueeze(0)).squeeze(0)
    action = torch.tanh(head(h_next))
    h_next = annotate.update_state("policy", {"h": h_next})
    annotate.output_tensors("policy", {"action": action}, export_with=backend)
    return action, h_next


def export_gru_variant(save_path: Path, seed: int, first_h: float) -> SimpleNamespace:
    """A GRU policy (4 -> 6 -> 2) with weights drawn from ``seed`` and every element of its
    first ``h`` (the export's initial value) ``first_h``, exported into ``save_path``:
    ``path``, ``modules`` (for :func:`gru_step`) and ``first_h`` (a tensor)."""
    torch.manual_seed(seed)
    modules = (torch.nn.GRUCell(4, 6).eval(), torch.nn.Linear(6, 2).eval())
    h = torch.full((6,), first_h)
    leapp.start("gru", save_path=save_path)
    with torch.no_grad():
        state = h
        for _ in range(3):
            _, state = gru_step(modules, torch.randn(4), state)
    leapp.stop()
    compiled = leapp.compile_graph()
    return SimpleNamespace(path=compiled.path.parent, modules=modules, first_h=h)
