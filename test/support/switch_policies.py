"""Policies to switch between on a running graph.

For the arm of :mod:`support.sim`: the same two nodes and ports (``preprocess`` unchanged),
the ``policy`` node's weights drawn from another seed (:func:`export_arm_variant`), or a
policy whose every result is NaN (``failing=True``). And a recurrent policy with explicit
state ``h`` (:func:`export_gru_variant`: weights and the first ``h`` of one's choosing), run
eagerly by :func:`gru_step` outside a session."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

import leapp
from support.sim import Policy, export_arm_policy

__all__ = ["NanPolicy", "export_arm_variant", "export_gru_variant", "gru_step"]


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
    policy_class = NanPolicy if failing else Policy
    return export_arm_policy(save_path, name, seed=seed, policy_class=policy_class)


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
