"""Benchmark the seed pipeline: import cost, compile_graph(), Pipeline.step against its references.

    python bench/export.py [--repeat N] [--steps N] [--nvidia-python PATH]

Every figure is compared with a reference measured in the same run, on this machine:

- ``import leapp`` (and the names the seed script uses: ``annotate``, ``start``, ``stop``,
  ``compile_graph``) after ``import torch`` in the same fresh subprocess, and
  ``compile_graph()`` of the seed (examples/torch_pipeline.py) in another, as a user meets them;
- ``leapp.Pipeline.step`` median and p99 against the bare artifact calls
  (bench/bare_calls.py: hand-written and cheapest), timed in alternating rounds; limit:
  Pipeline.step <= 1.3x the bare calls (judged against each form);
- with ``--nvidia-python`` (a Python whose ``leapp`` is NVIDIA's 0.7.2): the same import, the
  same seed script's ``compile_graph()`` (the seed's annotate calls are NVIDIA-compatible; each
  side runs ``compile_graph()`` with its own defaults), and NVIDIA's
  ``InferenceManager(yaml).run_policy(inputs)`` on our export and on its own, in a worker
  process whose rounds alternate with ours. Limit: NVIDIA's step >= 2x Pipeline.step.

Subprocess runs of the two sides alternate too, so that the noise of a shared machine hits both
alike.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bare_calls import (  # noqa: E402
    CHEAPEST,
    HAND_WRITTEN,
    Timing,
    load_bare_calls,
    percentiles,
    time_interleaved,
)

STEP_LIMIT = 1.3  # Pipeline.step / bare calls, at most
NVIDIA_LIMIT = 2.0  # NVIDIA's step / Pipeline.step, at least
STEP = "leapp Pipeline.step"

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
leapp.compile_graph()
print("BENCH " + json.dumps({{"compile_s": time.perf_counter() - started}}))
"""

NVIDIA_STEP_SCRIPT = """
import json, sys, time
import torch
from leapp import InferenceManager
torch.manual_seed(0)
managers = {label: InferenceManager(path) for label, path in json.loads(sys.argv[1]).items()}
inputs = {"preprocess/state": torch.randn(6), "preprocess/velocity": torch.randn(3)}
for manager in managers.values():
    for _ in range(200):
        manager.run_policy(inputs)
print("BENCH ready", InferenceManager.__module__, flush=True)
clock = time.perf_counter_ns
for line in sys.stdin:
    times = {}
    for label, manager in managers.items():
        run, record = manager.run_policy, times.setdefault(label, []).append
        for _ in range(int(line)):
            began = clock()
            run(inputs)
            record((clock() - began) / 1000.0)
    print("BENCH " + json.dumps(times), flush=True)
"""


def bench_line(text: str) -> str:
    """The payload of the last ``BENCH`` line (NVIDIA's leapp prints to stdout too)."""
    lines = [line[6:] for line in text.splitlines() if line.startswith("BENCH ")]
    if not lines:
        raise RuntimeError(f"no BENCH line in:\n{text[-2000:]}")
    return lines[-1]


IMPORT_SCRIPT = """
import time
began = time.perf_counter()
import torch
middle = time.perf_counter()
import leapp
from leapp import annotate, compile_graph, start, stop  # what the seed script uses
print("BENCH", middle - began, time.perf_counter() - middle, leapp.__file__)
"""


def python_command(python: str) -> list[str]:
    """``python`` isolated (``-I``: no current directory, no PYTHON* variables on its path)
    unless it is this one: run from this repository, another Python would import our
    ``leapp`` (which has an InferenceManager of its own) instead of its own."""
    return [python] if python == sys.executable else [python, "-I"]


def import_seconds(python: str, folder: Path) -> tuple[float, float]:
    """Seconds to import torch, then leapp and the names a script uses, in one subprocess."""
    command = [*python_command(python), "-c", IMPORT_SCRIPT]
    done = subprocess.run(command, capture_output=True, text=True, cwd=folder)
    if done.returncode:
        raise RuntimeError(f"{python}: import failed:\n{done.stderr[-2000:]}")
    torch_s, leapp_s, where = bench_line(done.stdout).split(maxsplit=2)
    if (python != sys.executable) == Path(where).is_relative_to(ROOT / "leapp"):
        raise RuntimeError(f"{python} imported the wrong leapp: {where}")
    return float(torch_s), float(leapp_s)


def compile_seconds(python: str, out: Path) -> float:
    script = COMPILE_SCRIPT.format(examples=str(ROOT / "examples"), out=str(out))
    command = [*python_command(python), "-c", script]
    done = subprocess.run(command, capture_output=True, text=True, cwd=out)
    if done.returncode:
        raise RuntimeError(f"{python}: compile failed:\n{done.stderr[-2000:]}")
    return json.loads(bench_line(done.stdout))["compile_s"]


def measure_startup(repeat: int, out: Path, nvidia: str | None) -> dict[str, float]:
    """Medians of import torch, import leapp after it, compile_graph(), for each side; runs
    of the two sides alternate."""
    pythons = {"ours": sys.executable, **({"nvidia": nvidia} if nvidia else {})}
    times: dict[str, list[float]] = {}
    for _ in range(repeat):
        for side, python in pythons.items():
            torch_s, leapp_s = import_seconds(python, out)
            times.setdefault(f"{side} torch", []).append(torch_s)
            times.setdefault(f"{side} leapp", []).append(leapp_s)
            folder = out / side
            folder.mkdir(exist_ok=True)
            times.setdefault(f"{side} compile", []).append(compile_seconds(python, folder))
    return {label: sorted(values)[len(values) // 2] for label, values in times.items()}


class NvidiaSteps:
    """NVIDIA's InferenceManager in a worker process, timed in rounds on request."""

    def __init__(self, python: str, specs: dict[str, str]):
        self.process = subprocess.Popen(
            [*python_command(python), "-c", NVIDIA_STEP_SCRIPT, json.dumps(specs)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.times: dict[str, list[float]] = {label: [] for label in specs}
        if not self._read().startswith("ready leapp.inference_manager"):
            raise RuntimeError(f"{python}: not NVIDIA's leapp.inference_manager.InferenceManager")

    def _read(self) -> str:
        for line in self.process.stdout:  # type: ignore[union-attr]
            if line.startswith("BENCH "):
                return line[6:]
        raise RuntimeError("NVIDIA's InferenceManager worker ended; run it by hand to see why")

    def round(self, samples: int) -> None:
        self.process.stdin.write(f"{samples}\n")  # type: ignore[union-attr]
        self.process.stdin.flush()  # type: ignore[union-attr]
        for label, values in json.loads(self._read()).items():
            self.times[label].extend(values)

    def close(self) -> dict[str, Timing]:
        self.process.stdin.close()  # type: ignore[union-attr]
        self.process.wait(timeout=30)
        return {label: percentiles(values) for label, values in self.times.items()}


def load_step(path: str):
    """``Pipeline.step`` of the export at ``path`` on fixed random inputs, as a callable."""
    import torch

    import leapp

    pipeline = leapp.Pipeline.load(path)
    inputs = {"preprocess/state": torch.randn(6), "preprocess/velocity": torch.randn(3)}
    return lambda: pipeline.step(inputs)


def measure_step(path: str, steps: int) -> tuple[float, float]:
    """Median and p99 of ``Pipeline.step`` on the seed export at ``path``, in microseconds."""
    timing = time_interleaved({STEP: load_step(path)}, steps)[STEP]
    return timing.median, timing.p99


def measure_steps(path: str, steps: int, nvidia: NvidiaSteps | None) -> dict[str, Timing]:
    """Pipeline.step and the bare calls, and NVIDIA's steps, in alternating rounds."""
    rounds = 10
    calls = {STEP: load_step(path), **load_bare_calls(path)}
    between = None if nvidia is None else (lambda: nvidia.round(steps // rounds))
    timings = time_interleaved(calls, steps, rounds=rounds, each_round=between)
    return timings | (nvidia.close() if nvidia else {})


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def report(startup: dict[str, float], steps: dict[str, Timing], nvidia: bool) -> None:
    added = startup["ours leapp"]
    print("seed pipeline (preprocess: jit, policy: onnx); every reference measured in this run")
    torch_s = startup["ours torch"]
    print(f"  import leapp over torch : {added:6.3f} s   (torch alone {torch_s:.3f} s)")
    print(f"  compile_graph()         : {startup['ours compile']:6.3f} s")
    for label, timing in steps.items():
        print(f"  {label:<62}: {timing.median:6.1f} us median, {timing.p99:6.1f} us p99")
    step, hand, cheap = steps[STEP].median, steps[HAND_WRITTEN].median, steps[CHEAPEST].median
    for label, bare in (("hand-written", hand), ("cheapest", cheap)):
        print(
            f"  Pipeline.step / {label + ' bare calls':<23}: {step / bare:5.2f}x  "
            f"(limit <= {STEP_LIMIT}) {verdict(step <= STEP_LIMIT * bare)}"
        )
    if not nvidia:
        print("  NVIDIA leapp 0.7.2: not measured (pass --nvidia-python PATH)")
        return
    nv_added = startup["nvidia leapp"]
    print(
        f"  NVIDIA import leapp over torch / ours : {nv_added / max(added, 1e-3):5.1f}x  "
        f"({nv_added:.3f} s; torch alone {startup['nvidia torch']:.3f} s)"
    )
    print(
        f"  NVIDIA compile_graph() / ours         : "
        f"{startup['nvidia compile'] / startup['ours compile']:5.1f}x  "
        f"({startup['nvidia compile']:.3f} s)"
    )
    for label in ("NVIDIA InferenceManager on our export", "NVIDIA InferenceManager on its own"):
        ratio = steps[label].median / step
        print(
            f"  {label} / Pipeline.step: {ratio:5.2f}x  "
            f"(limit >= {NVIDIA_LIMIT}) {verdict(ratio >= NVIDIA_LIMIT)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="subprocess runs per figure")
    parser.add_argument("--steps", type=int, default=20000, help="timed calls of each kind")
    parser.add_argument(
        "--nvidia-python",
        # absolute, not resolved: the runs happen in other folders, and a venv's python is a
        # link whose target would leave the venv
        type=os.path.abspath,
        help="a Python whose leapp is NVIDIA's 0.7.2",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        startup = measure_startup(args.repeat, out, args.nvidia_python)
        ours = str(out / "ours" / "torch_pipeline" / "torch_pipeline.yaml")
        nvidia = None
        if args.nvidia_python:
            own = str(out / "nvidia" / "torch_pipeline" / "torch_pipeline.yaml")
            nvidia = NvidiaSteps(
                args.nvidia_python,
                {
                    "NVIDIA InferenceManager on our export": ours,
                    "NVIDIA InferenceManager on its own": own,
                },
            )
        steps = measure_steps(ours, args.steps, nvidia)
    report(startup, steps, nvidia is not None)


if __name__ == "__main__":
    main()
