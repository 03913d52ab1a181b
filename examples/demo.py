"""The README's first command: export the seed pipeline, run it as a live ROS 2 graph, and show
that what comes back over ROS is what eager PyTorch computes.

    python examples/demo.py [--save-path DIR] [--deployment processes|composed|fused]

1. traces ``examples/torch_pipeline.py`` and exports it (prints the recorded graphs and the spec);
2. compares the export (``leapp.Pipeline``) with eager PyTorch on fresh random inputs;
3. starts the export as a graph of ROS 2 nodes (one process per pipeline node; one process for
   all with ``--deployment composed``, or ``--composed``; one fused node with ``--deployment
   fused``), publishes example ``state`` and ``velocity`` messages on
   ``/torch_pipeline/preprocess/{state,velocity}`` and prints the ``action`` received on
   ``/torch_pipeline/policy/action`` next to the eager result.

ROS discovery stays on this machine (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``) in a ROS
domain of its own.
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


def run_live(policy: torch.nn.Module, path: Path, samples: int, deployment: str) -> float:
    """Largest |ROS - eager| over ``samples`` inputs sent through the live graph."""
    from leapp_ros.testing import Deployment, GraphUnderTest

    chosen = Deployment.parse(deployment)
    print(f"\n== live ROS 2 graph, {chosen.description}: starting leapp nodes...")
    worst = 0.0
    with GraphUnderTest(path, chosen, timeout_s=90) as graph:
        for topic, kind in sorted(graph.expect_topics().items()):
            print(f"  {topic:<38} {kind}")
        for index in range(samples):
            state, velocity = torch.randn(6) * 2, torch.randn(3)
            with torch.no_grad():
                eager = seed.run_policy(policy, seed.preprocess(state, velocity))
            received = graph.step({"preprocess/state": state, "preprocess/velocity": velocity})
            action = received["policy/action"]
            worst = max(worst, (action - eager).abs().max().item())
            if index < 3:
                print(f"  tick {index}: state    ", _row(state))
                print("          velocity ", _row(velocity))
                print("          eager    ", _row(eager))
                print("          over ROS ", _row(action))
        graph.spin(1.2)  # nodes publish their counters once a second
        status = graph.status()
    runs = ", ".join(
        f"{node}: {s['runs']} runs, {s['dropped']} dropped" for node, s in status.items()
    )
    print(f"  node status: {runs}")
    return worst


def _row(values: torch.Tensor) -> str:
    return " ".join(f"{v:+.5f}" for v in values.tolist())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save-path", type=Path, default=Path("out/demo"))
    parser.add_argument("--samples", type=int, default=100, help="fresh inputs compared")
    parser.add_argument("--ros-samples", type=int, default=20, help="inputs sent over ROS")
    parser.add_argument(
        "--deployment",
        choices=("processes", "composed", "fused"),
        default="processes",
        help="one process per node (default), all nodes in one process, or one fused node",
    )
    parser.add_argument(
        "--composed",
        dest="deployment",
        action="store_const",
        const="composed",
        help="the same as --deployment composed",
    )
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
    live = run_live(policy, compiled.path, args.ros_samples, args.deployment)
    live_verdict = "match" if live <= 1e-5 else "DIFFER"
    print(f"  largest difference over ROS, {args.ros_samples} inputs: {live:.2e} ({live_verdict})")
    return 0 if max(worst, live) <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
