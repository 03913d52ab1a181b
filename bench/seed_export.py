"""The seed pipeline (examples/torch_pipeline.py: ``preprocess`` TorchScript, ``policy`` ONNX)
exported for a bench, with its eager PyTorch reference.

The benches run as scripts (``python bench/<name>.py``: only ``bench/`` is on their path), so
the example is imported from its file; under pytest, where ``examples/`` is on the path, the
module already imported is used.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "torch_pipeline.py"
NAME = "torch_pipeline"


@dataclass(frozen=True)
class SeedExport:
    """``spec_path``: the export's spec file; ``eager(state, velocity)``: the action PyTorch
    computes with the exported weights."""

    spec_path: Path
    eager: Callable[[Any, Any], Any]


def seed_module() -> ModuleType:
    """examples/torch_pipeline.py as a module."""
    if NAME in sys.modules:
        return sys.modules[NAME]
    spec = importlib.util.spec_from_file_location(NAME, EXAMPLE)
    assert spec is not None and spec.loader is not None, EXAMPLE
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    spec.loader.exec_module(module)
    return module


def export_seed(folder: Path) -> SeedExport:
    """Export the seed (weights seeded) into ``folder``."""
    import torch

    import leapp

    seed = seed_module()
    torch.manual_seed(0)
    policy = seed.Policy().eval()
    leapp.start(name=NAME, save_path=folder)
    seed.run_policy(policy, seed.preprocess(torch.zeros(6), torch.zeros(3)))
    leapp.stop()

    def eager(state: Any, velocity: Any) -> Any:
        with torch.no_grad():
            return seed.run_policy(policy, seed.preprocess(state, velocity))

    return SeedExport(leapp.compile_graph().path, eager)
