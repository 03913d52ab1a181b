"""Deployments that run other weights than their reference: what the wrong-weights tests use
to prove that a check sees a wrong weight.

:func:`export_perturbed_seed` exports the seed pipeline with the policy's weight matrix
perturbed and its bias kept, traced on the seed's all-zero inputs: its recorded example is the
seed's own (``tanh(bias)``), so only inputs that reach the weight matrix tell the two apart.
:func:`swap_artifact` puts another export's model file into an export and fixes the spec's
checksums, as a stale or hand-copied model file would be deployed.
"""

from __future__ import annotations

import copy
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import torch

import leapp
from leapp import session as session_module
from leapp import spec as spec_file

__all__ = ["export_perturbed_seed", "fix_checksums", "perturbed_policy", "swap_artifact"]

PERTURBATION = 0.3  # the weight matrix's change: uniform in -0.3..0.3 per weight


def perturbed_policy(policy: torch.nn.Module) -> torch.nn.Module:
    """A copy of the seed's ``policy`` whose weight matrix is perturbed (seeded), bias kept."""
    other = copy.deepcopy(policy).eval()
    generator = torch.Generator().manual_seed(11)
    noise = torch.rand(other.net.weight.shape, generator=generator) * 2 - 1
    with torch.no_grad():
        other.net.weight.add_(PERTURBATION * noise)
    return other


def export_perturbed_seed(save_path: Path, seed: SimpleNamespace) -> SimpleNamespace:
    """The seed pipeline (same name, ports and traced inputs, all zero) with
    :func:`perturbed_policy`: ``path`` (the export folder) and ``policy``."""
    policy = perturbed_policy(seed.policy)
    session_module._active = None
    leapp.start(name="torch_pipeline", save_path=save_path)
    with torch.no_grad():
        seed.module.run_policy(policy, seed.module.preprocess(torch.zeros(6), torch.zeros(3)))
    leapp.stop()
    compiled = leapp.compile_graph(graph_configs=leapp.GraphConfigs(frequency=50))
    return SimpleNamespace(path=compiled.path.parent, policy=policy)


def fix_checksums(export: Path) -> None:
    """Rewrite the spec of ``export`` with the checksums of the model files it holds now."""
    spec = spec_file.load(export, verify_checksums=False)
    models = []
    for model in spec.models:
        md5, sha256 = spec_file.file_checksums(export / model.parameters.model_path)
        parameters = replace(model.parameters, md5sum=md5, sha256sum=sha256)
        models.append(replace(model, parameters=parameters))
    spec_file.dump(replace(spec, models=tuple(models)), spec.path)


def swap_artifact(export: Path, other: Path, artifact: str) -> None:
    """Copy ``other/artifact`` over ``export/artifact`` and fix the checksums of ``export``."""
    shutil.copy(other / artifact, export / artifact)
    fix_checksums(export)
