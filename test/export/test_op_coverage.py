"""PyTorch's own OpInfo database through leapp: every backend keeps the outcome recorded for
every op, and none crashes or exports a wrong result.

``op_coverage_expected.json`` records, for every float32 CPU OpInfo whose first sample input is
a tensor, whether each backend exports it correctly (``ok``: the artifact, loaded by leapp's
runner, matches eager PyTorch on the traced and on perturbed inputs) or refuses it with a
``LeappError`` (``refused``). The whole sweep takes about three minutes on a 2-core machine,
so CI checks a fixed sample of it (plus the ops issues were filed about) in two worker
processes (ops whose export takes seconds, listed in the table, are left to the bench);
``python bench/export_coverage.py`` sweeps every op and prints the table, and
``--write-expected`` records a new one after an intended change.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import op_sweep
import pytest

pytestmark = pytest.mark.slow

TABLE = json.loads((Path(__file__).parent / "op_coverage_expected.json").read_text())
EXPECTED = TABLE["ops"]
# Ops whose export takes seconds (unrolled eigen/singular-value iterations, incomplete gamma):
# the bench sweeps them, CI's sample leaves them out.
SLOW = set(next((v for k, v in TABLE.items() if k.startswith("slow")), []))
SAMPLE_SIZE = 120
# Named in issues: ONNX refused them, or validation refused them on zeros.
ALWAYS = {
    "sinh", "acosh", "expm1", "exp2", "frac", "logaddexp", "heaviside", "isposinf", "ravel",
    "inner", "addr", "index_select", "index_add", "narrow_copy", "diagonal_copy", "block_diag",
    "trapz", "meshgrid.variadic_tensors", "scatter_reduce.sum", "nn.functional.grid_sample",
    "nn.functional.bilinear", "nn.functional.binary_cross_entropy", "new_zeros", "new_ones",
    "zeros_like", "cholesky", "linalg.tensorinv", "nn.functional.unfold", "masked_select",
}  # fmt: skip
ONNX_SHARE_FLOOR = 0.95  # of the ops jit exports correctly, the share ONNX exports correctly


def _sample() -> list[str]:
    keys = sorted(set(EXPECTED) - SLOW)
    chosen = set(random.Random(2026).sample(keys, min(SAMPLE_SIZE, len(keys))))
    return sorted(chosen | (ALWAYS & set(keys)))


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, op_sweep.Result]]:
    return op_sweep.sweep(_sample(), workers=2)


def test_table_names_every_op_it_always_checks():
    assert set(EXPECTED) >= ALWAYS, sorted(ALWAYS - set(EXPECTED))


def test_table_holds_only_exports_and_clear_refusals():
    outcomes = {outcome for row in EXPECTED.values() for outcome in row.values()}
    assert outcomes <= {"ok", "refused"}, outcomes


def test_onnx_exports_most_ops_jit_exports():
    jit_ok = [key for key, row in EXPECTED.items() if row["jit"] == "ok"]
    both = [key for key in jit_ok if EXPECTED[key]["onnx"] == "ok"]
    assert len(both) / len(jit_ok) >= ONNX_SHARE_FLOOR, (len(both), len(jit_ok))


def test_no_op_crashes_or_exports_a_wrong_result(results):
    bad = [
        f"{key} {backend}: {result.outcome}: {result.detail}"
        for key, row in results.items()
        for backend, result in row.items()
        if result.outcome in ("crash", "wrong")
    ]
    assert not bad, "\n".join(bad)


def test_every_op_keeps_its_recorded_outcome(results):
    changed = [
        f"{key} {backend}: {EXPECTED[key][backend]} -> {result.outcome} ({result.detail})"
        for key, row in results.items()
        for backend, result in row.items()
        if result.outcome != EXPECTED[key][backend]
    ]
    assert not changed, (
        "outcomes differ from test/export/op_coverage_expected.json; fix the regression, or "
        "record an intended change with python bench/export_coverage.py --write-expected:\n"
        + "\n".join(changed)
    )
