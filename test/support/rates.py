"""Pipelines for per-node rates and targets at a controller's rate, traced inline, with their
eager references and the documented target formula (leapp_ros.plan.output_rates).

- ``chain``: ``encoder`` (external ``frame`` [4] -> ``feature`` [3]) -> ``policy`` (``feature``
  -> ``action`` [2]) -> ``post`` (``action`` -> ``command`` [2]), exported with
  ``pipeline.configs.node_frequency`` giving ``policy`` a rate of its own.
- ``chunker``: ``obs`` [3] -> ``chunk`` and ``rows``, both action chunks [4, 2] of kind
  ``target/joint/position_chunk`` (``TemporalAxis(CHUNK_PERIOD_MS)``, joints hip and knee).
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

import leapp
from leapp import TemporalAxis, TensorSemantics, annotate

__all__ = [
    "CHUNK_PERIOD_MS",
    "JOINTS",
    "POLICY_HZ",
    "eager_chain",
    "eager_chunk",
    "expected_targets",
    "export_chain",
    "export_chunker",
    "guarded",
]

POLICY_HZ = 50.0  # pipeline.configs.node_frequency of the chain's policy
CHUNK_PERIOD_MS = 1000.0  # long points: a new chunk comes well before the old one ends
JOINTS = ["hip", "knee"]

torch.manual_seed(11)
_ENCODER = torch.randn(4, 3)
_POLICY = torch.randn(3, 2)
_CHUNK = torch.randn(3, 8)


def _encoder(frame):
    frame = annotate.input_tensors("encoder", {"frame": frame})
    feature = torch.tanh(frame @ _ENCODER)
    annotate.output_tensors("encoder", {"feature": feature}, export_with="jit")
    return feature


def _policy(feature):
    feature = annotate.input_tensors("policy", {"feature": feature})
    action = torch.tanh(feature @ _POLICY)
    annotate.output_tensors("policy", {"action": action}, export_with="jit")
    return action


def _post(action):
    action = annotate.input_tensors("post", {"action": action})
    command = action * 0.5 + 0.25
    annotate.output_tensors("post", {"command": command}, export_with="jit")
    return command


def eager_chain(frame: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every output of the chain for ``frame``, computed eagerly by PyTorch."""
    with torch.no_grad():
        feature = _encoder(frame)
        action = _policy(feature)
        return {"encoder/feature": feature, "policy/action": action, "post/command": _post(action)}


def export_chain(save_path: Path, name: str = "chain") -> Path:
    """The chain exported to ``save_path`` as the pipeline ``name``; the spec's path."""
    leapp.start(name, save_path=save_path)
    eager_chain(torch.randn(4))
    leapp.stop()
    configs = leapp.GraphConfigs(frequency=10, node_frequency={"policy": POLICY_HZ})
    return Path(leapp.compile_graph(graph_configs=configs).path)


def _chunker(obs):
    obs = annotate.input_tensors("chunker", {"obs": obs})
    chunk = torch.tanh(obs @ _CHUNK).reshape(4, 2)
    names = [TemporalAxis(CHUNK_PERIOD_MS), JOINTS]
    kind = "target/joint/position_chunk"  # LEAPP has no enum member for it
    annotate.output_tensors(
        "chunker",
        [
            TensorSemantics(name="chunk", ref=chunk, kind=kind, element_names=names),
            TensorSemantics(name="rows", ref=chunk * 0.5, kind=kind, element_names=names),
        ],
        export_with="jit",
    )
    return chunk


def eager_chunk(obs: torch.Tensor) -> torch.Tensor:
    """The chunker's ``chunk`` for ``obs`` (``rows`` is half of it), eagerly."""
    with torch.no_grad():
        return _chunker(obs)


def export_chunker(save_path: Path) -> SimpleNamespace:
    """The chunker exported to ``save_path``: ``path`` (the spec)."""
    leapp.start("chunker", save_path=save_path)
    eager_chunk(torch.randn(3))
    leapp.stop()
    return SimpleNamespace(path=Path(leapp.compile_graph().path))


def expected_targets(
    points: np.ndarray, start: np.ndarray, steps: float, count: int, *, linear: bool
) -> list[np.ndarray]:
    """The first ``count`` targets after a result, by the documented formula: ``points``
    ``c_0 .. c_(T-1)`` (rows), ``start`` p, ``steps`` n; float64."""
    points = np.asarray(points, np.float64).reshape(-1, points.shape[-1])
    start = np.asarray(start, np.float64)
    targets = []
    for i in range(1, count + 1):
        u = i / steps
        k = math.floor(u + 1e-9)
        if not linear:
            targets.append(points[min(k, len(points) - 1)])
        elif k >= len(points):
            targets.append(points[-1])
        else:
            a = start if k == 0 else points[k - 1]
            targets.append(a + (points[k] - a) * max(u - k, 0.0))
    return targets


def guarded(
    targets: list[np.ndarray], last: np.ndarray | None, low: float, high: float, step: float
) -> list[np.ndarray]:
    """``targets`` (float32) as the port publishes them: each moved at most ``step`` from the
    one published before (``last`` before the first), then clamped into ``[low, high]``."""
    out = []
    for target in targets:
        value = np.asarray(target, np.float32).astype(np.float64)
        if last is not None:
            value = last + np.clip(value - last, -step, step)
        value = np.clip(value, low, high).astype(np.float32).astype(np.float64)
        out.append(value)
        last = value
    return out
