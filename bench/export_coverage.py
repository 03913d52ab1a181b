"""Which PyTorch ops leapp exports correctly, per backend, over torch's whole OpInfo database.

    python bench/export_coverage.py [--workers N] [--only KEY ...] [--nvidia-python PATH]
                                    [--failures] [--json FILE] [--write-expected]

Every float32 CPU OpInfo whose first sample input is a tensor is traced as one node (every
tensor argument an input port), exported with jit, onnx and pt2, loaded with leapp's runner and
compared with eager PyTorch on the traced and on perturbed inputs (bench/op_sweep.py says
how). Each cell is ok / refused (a LeappError) / crash (any other exception, or a dead
process) / wrong (the artifact disagrees with eager). The totals end with how many of the ops
jit exports correctly ONNX exports correctly too.

``--nvidia-python PATH`` names a second Python with NVIDIA's ``leapp`` 0.7.2 (and
``expecttest``) installed; its exports are made there, checked here with the same runner, and
shown side by side. ``--write-expected`` rewrites ``test/export/op_coverage_expected.json``,
the table ``test/export/test_op_coverage.py`` holds CI to, from this run.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path

import op_sweep

ROOT = Path(__file__).resolve().parents[1]

EXPECTED = ROOT / "test" / "export" / "op_coverage_expected.json"


def sweep_ours(keys, workers, progress, backends=op_sweep.BACKENDS):
    results = op_sweep.sweep(keys, tuple(backends), workers=workers, progress=progress)
    missing = op_sweep.Result("-", "not swept")
    return {
        key: {b: row.get(b, missing) for b in op_sweep.BACKENDS} for key, row in results.items()
    }


def sweep_nvidia(keys, workers, python, progress):
    """Export with NVIDIA's leapp in ``python``, then check the exports here."""
    with tempfile.TemporaryDirectory(prefix="nvidia_leapp_") as root:
        exported = op_sweep.sweep(
            keys, workers=workers, python=python, mode="export", root=Path(root)
        )
        compiled = [k for k in keys if any(r.outcome == "ok" for r in exported[k].values())]
        checked = op_sweep.sweep(
            compiled, workers=workers, mode="check", root=Path(root), progress=progress
        )
    for key, row in exported.items():
        for backend, result in row.items():
            if result.outcome == "ok":
                row[backend] = checked[key][backend]
    return exported


def totals(results):
    counts = {b: collections.Counter() for b in op_sweep.BACKENDS}
    for row in results.values():
        for backend, result in row.items():
            counts[backend][result.outcome] += 1
    jit_ok = [k for k, row in results.items() if row["jit"].outcome == "ok"]
    both = [k for k in jit_ok if results[k]["onnx"].outcome == "ok"]
    return counts, len(both), len(jit_ok)


def print_table(keys, columns, failures_only):
    names = list(columns)
    width = max(map(len, keys)) + 2
    header = "".join(f"{name + ' ' + b:>13}" for name in names for b in op_sweep.BACKENDS)
    print(f"{'op':<{width}}{header}")
    for key in keys:
        cells = [columns[name][key][b].outcome for name in names for b in op_sweep.BACKENDS]
        if failures_only and all(cell == "ok" for cell in cells):
            continue
        print(f"{key:<{width}}" + "".join(f"{cell:>13}" for cell in cells))
    print()
    for name in names:
        counts, both, jit_ok = totals(columns[name])
        print(f"{name}:")
        for backend in op_sweep.BACKENDS:
            line = ", ".join(f"{o} {counts[backend][o]}" for o in op_sweep.OUTCOMES)
            print(f"  {backend:5} {line}")
        share = 100.0 * both / max(jit_ok, 1)
        print(f"  onnx exports {both} of the {jit_ok} ops jit exports correctly ({share:.1f} %)")


def print_details(keys, columns):
    print("\nnot ok:")
    for name, results in columns.items():
        for key in keys:
            for backend in op_sweep.BACKENDS:
                result = results[key][backend]
                if result.outcome != "ok":
                    print(f"  {name} {key} {backend}: {result.outcome}: {result.detail}")


SLOW_S = 3.0  # ops a backend needs longer for are left to this bench, out of CI's sample


def write_expected(results, skipped) -> None:
    slow = sorted(k for k, row in results.items() if max(r.seconds for r in row.values()) > SLOW_S)
    lines = [
        "{",
        '  "comment": "Outcome per OpInfo and backend; rewrite with python '
        'bench/export_coverage.py --write-expected",',
        '  "skipped": ' + json.dumps(dict(sorted(skipped.items())), indent=None) + ",",
        f'  "slow (over {SLOW_S:g} s on this machine)": ' + json.dumps(slow) + ",",
        '  "ops": {',
    ]
    rows = [
        f"    {json.dumps(key)}: "
        + json.dumps({b: results[key][b].outcome for b in op_sweep.BACKENDS})
        for key in sorted(results)
    ]
    lines.append(",\n".join(rows))
    lines += ["  }", "}"]
    EXPECTED.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {EXPECTED.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--only", nargs="+", metavar="KEY", help="sweep only these ops")
    parser.add_argument(
        "--backends", nargs="+", choices=op_sweep.BACKENDS, default=list(op_sweep.BACKENDS)
    )
    parser.add_argument("--nvidia-python", help="a Python with NVIDIA's leapp 0.7.2 installed")
    parser.add_argument("--failures", action="store_true", help="print only rows not all ok")
    parser.add_argument("--details", action="store_true", help="print why each cell is not ok")
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument("--write-expected", action="store_true", help=f"rewrite {EXPECTED.name}")
    args = parser.parse_args()

    started = time.perf_counter()
    keys, skipped = [], {}
    for case in op_sweep.all_cases(set(args.only) if args.only else None):
        if isinstance(case, tuple):
            skipped[case[0]] = case[1]
        else:
            keys.append(case.key)
    print(f"{len(keys)} ops to sweep, {len(skipped)} skipped", file=sys.stderr)
    done = collections.Counter()

    def progress(key, backend, result):
        done["cells"] += 1
        if done["cells"] % 100 == 0:
            print(
                f"  {done['cells']} cells, {time.perf_counter() - started:.0f} s", file=sys.stderr
            )

    columns = {"ours": sweep_ours(keys, args.workers, progress, args.backends)}
    ours_s = time.perf_counter() - started
    if args.nvidia_python:
        columns["nvidia"] = sweep_nvidia(keys, args.workers, args.nvidia_python, progress)
    print_table(keys, columns, args.failures)
    if args.details:
        print_details(keys, columns)
    slowest = sorted(
        ((r.seconds, f"{k} {b}") for k, row in columns["ours"].items() for b, r in row.items()),
        reverse=True,
    )[:10]
    print("\nslowest cells (ours): " + ", ".join(f"{name} {s:.1f} s" for s, name in slowest))
    total_s = time.perf_counter() - started
    print(f"\nours: {ours_s:.0f} s with {args.workers} workers; total {total_s:.0f} s")
    if args.json:
        data = {
            name: {
                k: {b: [r.outcome, r.detail, round(r.seconds, 2)] for b, r in row.items()}
                for k, row in res.items()
            }
            for name, res in columns.items()
        }
        Path(args.json).write_text(json.dumps(data, indent=1), encoding="utf-8")
    if args.write_expected:
        write_expected(columns["ours"], skipped)


if __name__ == "__main__":
    main()
