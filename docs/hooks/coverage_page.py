"""The backend coverage reference page, written from the table CI holds the exporters to
(``test/export/op_coverage_expected.json``, rewritten by ``bench/export_coverage.py
--write-expected``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

BACKENDS = ("jit", "onnx", "pt2")


def coverage_page(expected: Path) -> str:
    """The Markdown of the page for the expected-outcome file ``expected``."""
    table = json.loads(expected.read_text(encoding="utf-8"))
    ops: dict[str, dict[str, str]] = table["ops"]
    counts = {backend: Counter(outcome[backend] for outcome in ops.values())
              for backend in BACKENDS}  # fmt: skip
    outcomes = sorted({name for count in counts.values() for name in count})
    lines = [
        "# Which PyTorch operations each backend exports\n",
        f"`bench/export_coverage.py` sweeps PyTorch's OpInfo database: {len(ops)} operations "
        "(every float32 CPU operation whose first sample input is a tensor), each traced as "
        "one node, exported with each backend, loaded by leapp's runner and compared with "
        "eager PyTorch on the traced and on perturbed inputs. An operation a backend cannot "
        "export is *refused* with a `LeappError` at `compile_graph()` that names the node "
        "and the backends to use instead; none exports a wrong result. CI holds every run to "
        "this table (`test/export/test_op_coverage.py`, generated here from "
        "`test/export/op_coverage_expected.json`).\n",
        "| backend | " + " | ".join(outcomes) + " |",
        "| --- |" + " --- |" * len(outcomes),
    ]
    for backend in BACKENDS:
        row = " | ".join(str(counts[backend].get(name, 0)) for name in outcomes)
        lines.append(f"| `{backend}` | {row} |")
    lines += [
        "",
        "## Operations some backend refuses\n",
        "| operation | " + " | ".join(f"`{b}`" for b in BACKENDS) + " |",
        "| --- |" + " --- |" * len(BACKENDS),
    ]
    for name, outcome in sorted(ops.items()):
        if any(outcome[b] != "ok" for b in BACKENDS):
            cells = " | ".join(outcome[b] for b in BACKENDS)
            lines.append(f"| `{name}` | {cells} |")
    lines += [
        "",
        "## Not in the sweep\n",
        "Operations without a float32 CPU sample whose first input is a tensor, and random "
        "ones, are left out:\n",
        "| operation | why |",
        "| --- | --- |",
    ]
    lines += [f"| `{name}` | {why} |" for name, why in sorted(table["skipped"].items())]
    return "\n".join(lines) + "\n"
