"""The README's first command: export the seed pipeline, show what was recorded and written,
and compare the exported artifacts with eager PyTorch on fresh random inputs.

    python examples/demo.py [--save-path DIR]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import torch

import leapp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_pipeline as seed


def export(save_path: Path) -> tuple[torch.nn.Module, leapp.compilation.CompiledPipeline]:
    torch.manual_seed(0)
    policy = seed.Policy().eval()
    leapp.start(name="torch_pipeline", save_path=save_path)
    seed.run_policy(policy, seed.preprocess(torch.zeros(6), torch.zeros(3)))
    leapp.stop()
    return policy, leapp.compile_graph(graph_configs=leapp.GraphConfigs(frequency=50))


def compare(policy: torch.nn.Module, path: Path, samples: int) -> float:
    """Largest |exported - eager| over ``samples`` fresh random inputs, printing the first."""
    pipeline = leapp.Pipeline.load(path)
    worst = 0.0
    for index in range(samples):
        state, velocity = torch.randn(6) * 2, torch.randn(3)
        with torch.no_grad():
            eager = seed.run_policy(policy, seed.preprocess(state, velocity))
        exported = pipeline.step({"preprocess/state": state, "preprocess/velocity": velocity})
        action = exported["policy/action"]
        worst = max(worst, (action - eager).abs().max().item())
        if index == 0:
            print("  state    ", _row(state))
            print("  velocity ", _row(velocity))
            print("  eager    ", _row(eager))
            print("  exported ", _row(action))
    return worst


def _row(values: torch.Tensor) -> str:
    return " ".join(f"{v:+.5f}" for v in values.tolist())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save-path", type=Path, default=Path("out/demo"))
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    policy, compiled = export(args.save_path)
    folder = compiled.path.parent
    for node, graph in compiled.graphs.items():
        print(f"== recorded graph of node '{node}'")
        print(leapp.format_graph(graph), end="\n\n")
    print(f"== {compiled.path}")
    print(compiled.path.read_text())
    print(f"== files in {folder}: {', '.join(sorted(p.name for p in folder.iterdir()))}")
    print(f"== compile_graph() took {compiled.timings['total']:.3f} s; validation: ", end="")
    print("passed" if compiled.report.ok else "FAILED")
    print(f"\n== exported pipeline (leapp.Pipeline) vs eager PyTorch, {args.samples} fresh inputs")
    worst = compare(policy, compiled.path, args.samples)
    verdict = "match" if worst <= 1e-5 else "DIFFER"
    print(f"  largest difference over {args.samples} inputs: {worst:.2e} ({verdict})")
    return 0 if worst <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
