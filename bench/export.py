"""Benchmark the seed pipeline: import cost, compile_graph(), Pipeline.step against its references.

    python bench/export.py [--repeat N] [--steps N] [--nvidia-python PATH]

Every figure is compared with a reference measured in the same run, on this machine:

- ``import leapp`` (and the names the seed script uses: ``annotate``, ``start``, ``stop``,
  ``compile_graph``) after ``import torch`` in the same fresh subprocess, and
  ``compile_graph()`` of the seed (examples/torch_pipeline.py) in another, as a user meets them,
  with the cost of each of its phases (``CompiledPipeline.timings``: the module imports, the
  node graphs, each node's export phase by phase, examples, spec, validation, ...);
- ``leapp.Pipeline.step`` median and p99 against the bare artifact calls
  (bench/bare_calls.py: hand-written and cheapest), timed in alternating rounds; limit:
  Pipeline.step <= 1.3x the bare calls (judged against each form);
- with ``--nvidia-python`` (a Python whose ``leapp`` is NVIDIA's 0.7.2): the same import, the
  same seed script's ``compile_graph()`` (the seed's annotate calls are NVIDIA-compatible; each
  side runs ``compile_graph()`` with its own defaults), and NVIDIA's
  ``InferenceManager(yaml).run_policy(inputs)`` on our export and on its own, in a worker
  process whose rounds alternate with ours. Targets, judged in this run: compile_graph()
  <= 0.4 s, NVIDIA's compile_graph() >= 3x ours, NVIDIA's step >= 2.5x Pipeline.step on the
  same export.

Subprocess runs of the two sides alternate too, so that the noise of a shared machine hits both
alike.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bare_calls import (
    CHEAPEST,
    HAND_WRITTEN,
    Timing,
    load_bare_calls,
    percentiles,
    time_interleaved,
)
from seed_export import EXAMPLE

ROOT = Path(__file__).resolve().parents[1]
STEP_LIMIT = 1.3  # Pipeline.step / bare calls, at most
NVIDIA_LIMIT = 2.5  # NVIDIA's step / Pipeline.step, at least
COMPILE_RATIO_TARGET = 3.0  # NVIDIA's compile_graph() / ours, at least
COMPILE_TARGET_S = 0.4  # compile_graph() of the seed, at most (set on a 2-core CPU)
STEP = "leapp Pipeline.step"

COMPILE_SCRIPT = """
import importlib.util, json, sys, time
import torch
import leapp
found = importlib.util.spec_from_file_location("torch_pipeline", {example!r})
seed = sys.modules["torch_pipeline"] = importlib.util.module_from_spec(found)
found.loader.exec_module(seed)
torch.manual_seed(0)
policy = seed.Policy().eval()
began = time.perf_counter()
leapp.start(name="torch_pipeline", save_path={out!r})
seed.run_policy(policy, seed.preprocess(torch.zeros(6), torch.zeros(3)))
leapp.stop()
started = time.perf_counter()
compiled = leapp.compile_graph()
done = time.perf_counter()
phases = dict(getattr(compiled, "timings", None) or {{}})  # ours only: NVIDIA's has none
print("BENCH " + json.dumps({{"compile_s": done - started, "trace_s": started - began,
                             "phases": phases}}))
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


def compile_run(python: str, out: Path) -> dict:
    """One fresh process: trace the seed, then ``compile_graph()``; its seconds (``compile_s``,
    ``trace_s``) and, for ours, ``CompiledPipeline.timings`` (``phases``)."""
    script = COMPILE_SCRIPT.format(example=str(EXAMPLE), out=str(out))
    command = [*python_command(python), "-c", script]
    done = subprocess.run(command, capture_output=True, text=True, cwd=out)
    if done.returncode:
        raise RuntimeError(f"{python}: compile failed:\n{done.stderr[-2000:]}")
    return json.loads(bench_line(done.stdout))


def median(values: list[float]) -> float:
    return statistics.median(values)


def measure_startup(
    repeat: int, out: Path, nvidia: str | None
) -> tuple[dict[str, float], dict[str, float], dict[str, list[float]]]:
    """Medians of import torch, import leapp after it, tracing and compile_graph(), for each
    side; the median of each of our compile phases; every compile time. Runs of the two
    sides alternate."""
    pythons = {"ours": sys.executable, **({"nvidia": nvidia} if nvidia else {})}
    times: dict[str, list[float]] = {}
    phases: dict[str, list[float]] = {}
    for _ in range(repeat):
        for side, python in pythons.items():
            torch_s, leapp_s = import_seconds(python, out)
            times.setdefault(f"{side} torch", []).append(torch_s)
            times.setdefault(f"{side} leapp", []).append(leapp_s)
            folder = out / side
            folder.mkdir(exist_ok=True)
            run = compile_run(python, folder)
            times.setdefault(f"{side} compile", []).append(run["compile_s"])
            times.setdefault(f"{side} trace", []).append(run["trace_s"])
            if side == "ours":
                phases.setdefault("compile_graph()", []).append(run["compile_s"])
                for phase, seconds in run["phases"].items():
                    phases.setdefault(phase, []).append(seconds)
    medians = {label: median(values) for label, values in times.items()}
    compiles = {label: values for label, values in times.items() if label.endswith("compile")}
    return medians, {phase: median(values) for phase, values in phases.items()}, compiles


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
    """``Pipeline.step`` of the export at ``path`` on fixed random inputs, as a callable: the
    step bound to its inputs (``functools.partial``, no Python frame of its own), as NVIDIA's
    worker calls ``run_policy(inputs)`` with the bound method at hand."""
    import torch

    import leapp

    pipeline = leapp.Pipeline.load(path)
    inputs = {"preprocess/state": torch.randn(6), "preprocess/velocity": torch.randn(3)}
    return functools.partial(pipeline.step, inputs)


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


# The order the phases run in, for printing; a node's own phases follow its line.
PIPELINE_PHASES = ("imports", "previous export", "graphs")
LATE_PHASES = ("checksums", "examples", "spec", "validation", "recorded graphs")


def report_phases(phases: dict[str, float], repeat: int) -> None:
    """Our compile_graph() phase by phase (medians), as CompiledPipeline.timings has them."""
    total = phases.get("compile_graph()", 0.0)
    print(
        f"  compile_graph() phases (ours, medians of {repeat} fresh processes; a phase also "
        "pays for the modules it imports first):"
    )
    nodes = [key for key in phases if "/" not in key and key not in _NOT_NODES]
    order = [*PIPELINE_PHASES]
    for node in nodes:
        order += [node, *(key for key in phases if key.startswith(f"{node}/"))]
    order += [*LATE_PHASES]
    for key in order:
        if key not in phases:
            continue
        label = f"    {key}" if "/" in key else key
        print(f"    {label:<34}: {phases[key]:6.3f} s")
    inside = phases.get("total", 0.0)
    print(f"    {'(outside compile_session)':<34}: {total - inside:6.3f} s")
    print(f"    {'total':<34}: {total:6.3f} s")


_NOT_NODES = {"compile_graph()", "export", "total", *PIPELINE_PHASES, *LATE_PHASES}


def spread(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f} s over {len(values)}"


def report(
    startup: dict[str, float],
    phases: dict[str, float],
    compiles: dict[str, list[float]],
    steps: dict[str, Timing],
    nvidia: bool,
) -> None:
    added = startup["ours leapp"]
    print("seed pipeline (preprocess: jit, policy: onnx); every reference measured in this run")
    torch_s = startup["ours torch"]
    print(f"  import leapp over torch : {added:6.3f} s   (torch alone {torch_s:.3f} s)")
    print(
        f"  compile_graph()         : {startup['ours compile']:6.3f} s median "
        f"({spread(compiles['ours compile'])}); tracing the seed {startup['ours trace']:.3f} s"
    )
    report_phases(phases, len(compiles["ours compile"]))
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
    ours_compile, nv_compile = startup["ours compile"], startup["nvidia compile"]
    compile_ratio = nv_compile / ours_compile
    print(
        f"  compile_graph() median: leapp {ours_compile:.3f} s, NVIDIA {nv_compile:.3f} s "
        f"({spread(compiles['nvidia compile'])}): NVIDIA / ours {compile_ratio:5.2f}x"
    )
    nv_steps = {}
    for label in ("NVIDIA InferenceManager on our export", "NVIDIA InferenceManager on its own"):
        nv_steps[label] = ratio = steps[label].median / step
        print(
            f"  {label} / Pipeline.step: {ratio:5.2f}x  "
            f"(limit >= {NVIDIA_LIMIT}) {verdict(ratio >= NVIDIA_LIMIT)}"
        )
    same_export = nv_steps["NVIDIA InferenceManager on our export"]
    print("  targets in this run:")
    print(
        f"    compile_graph() <= {COMPILE_TARGET_S} s          : {ours_compile:.3f} s "
        f"{verdict(ours_compile <= COMPILE_TARGET_S)}"
    )
    print(
        f"    NVIDIA compile / ours >= {COMPILE_RATIO_TARGET}x       : {compile_ratio:.2f}x "
        f"{verdict(compile_ratio >= COMPILE_RATIO_TARGET)}"
    )
    print(
        f"    NVIDIA step / Pipeline.step >= {NVIDIA_LIMIT}x: {same_export:.2f}x on the same "
        f"export {verdict(same_export >= NVIDIA_LIMIT)}"
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
    if args.nvidia_python and not os.access(args.nvidia_python, os.X_OK):
        parser.error(
            f"--nvidia-python {args.nvidia_python}: no such program; make one with "
            "bash scripts/nvidia_leapp.sh (it prints its path), or leave the option out"
        )

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        startup, phases, compiles = measure_startup(args.repeat, out, args.nvidia_python)
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
    report(startup, phases, compiles, steps, nvidia is not None)


if __name__ == "__main__":
    main()
