"""Benchmark the seed pipeline: import cost, compile_graph() wall time, Pipeline.step latency.

    python bench/export.py [--repeat N]

Prints each figure next to its target on this project's 2-core reference machine and next to
what NVIDIA's leapp 0.7.2 was measured to take there (1.8 s import, 1.3-1.8 s compile, 39 us
per step). Import and compile are measured in fresh subprocesses, as a user meets them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEAPP_0_7_2 = {"import_s": 1.8, "compile_s": (1.3, 1.8), "step_us": 39.0}
TARGETS = {"import_s": 0.3, "compile_s": 0.5, "step_us": 25.0}

COMPILE_SCRIPT = """
import json, sys, time
sys.path.insert(0, {examples!r})
import torch
import leapp
import torch_pipeline as seed
torch.manual_seed(0)
policy = seed.Policy().eval()
leapp.start(name="torch_pipeline", save_path={out!r})
seed.run_policy(policy, seed.preprocess(torch.zeros(6), torch.zeros(3)))
leapp.stop()
started = time.perf_counter()
compiled = leapp.compile_graph()
print(json.dumps({{"compile_s": time.perf_counter() - started, "path": str(compiled.path)}}))
"""


def import_seconds(modules: str) -> float:
    code = (
        f"import time; t = time.perf_counter(); import {modules}; print(time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def measure_import(repeat: int) -> tuple[float, float]:
    torch_only, both = [], []
    for _ in range(repeat):  # interleaved, so machine noise hits both alike
        torch_only.append(import_seconds("torch"))
        both.append(import_seconds("torch, leapp"))
    return statistics.median(torch_only), statistics.median(both)


def measure_compile(repeat: int, out: Path) -> tuple[float, str]:
    times, path = [], ""
    script = COMPILE_SCRIPT.format(examples=str(ROOT / "examples"), out=str(out))
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        )
        result = json.loads(done.stdout.strip().splitlines()[-1])
        times.append(result["compile_s"])
        path = result["path"]
    return statistics.median(times), path


def measure_step(path: str, steps: int) -> tuple[float, float]:
    import torch

    import leapp

    pipeline = leapp.Pipeline.load(path)
    inputs = {"preprocess/state": torch.randn(6), "preprocess/velocity": torch.randn(3)}
    for _ in range(200):
        pipeline.step(inputs)
    samples = []
    for _ in range(steps):
        began = time.perf_counter_ns()
        pipeline.step(inputs)
        samples.append((time.perf_counter_ns() - began) / 1000.0)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="subprocess runs per figure")
    parser.add_argument("--steps", type=int, default=20000, help="timed Pipeline.step calls")
    args = parser.parse_args()

    torch_s, both_s = measure_import(args.repeat)
    with tempfile.TemporaryDirectory() as out:
        compile_s, path = measure_compile(args.repeat, Path(out))
        step_median, step_p99 = measure_step(path, args.steps)

    added = both_s - torch_s
    low, high = LEAPP_0_7_2["compile_s"]
    print("seed pipeline (preprocess: jit, policy: onnx)")
    print(
        f"  import leapp over torch : {added:6.3f} s   (torch alone {torch_s:.3f} s; "
        f"target <= {TARGETS['import_s']} s; leapp 0.7.2: {LEAPP_0_7_2['import_s']} s, "
        f"{LEAPP_0_7_2['import_s'] / max(added, 1e-3):.1f}x ours)"
    )
    print(
        f"  compile_graph()         : {compile_s:6.3f} s   (target <= {TARGETS['compile_s']} s; "
        f"leapp 0.7.2: {low}-{high} s, {low / compile_s:.1f}-{high / compile_s:.1f}x ours)"
    )
    print(
        f"  Pipeline.step           : {step_median:6.1f} us  median, {step_p99:.1f} us p99 "
        f"(target <= {TARGETS['step_us']} us; leapp 0.7.2: {LEAPP_0_7_2['step_us']} us, "
        f"{LEAPP_0_7_2['step_us'] / step_median:.1f}x ours)"
    )


if __name__ == "__main__":
    main()
