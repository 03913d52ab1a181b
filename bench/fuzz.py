"""Long fuzzing runs of the spec loader and the message codecs (the CI tests run a few hundred
examples; this runs as many as you give it).

    python bench/fuzz.py [--examples N] [--seconds S] [--only TARGET ...] [--seed SEED]

Each target is a hypothesis strategy and a check from ``test/spec/test_fuzz_spec.py`` or
``test/ros/test_fuzz_codecs.py``: a spec file loads as a Spec or raises a SpecError (in under a
second of CPU time and 100 MB; a loaded spec dumps and loads back the same), a message decodes
to the port's dtype and shape or raises a MessageError. Every target runs until it has tried
``--examples`` inputs or spent ``--seconds``, in batches with fresh random seeds; a failure is
shrunk to a small input and printed, and the target goes on. The run prints how many examples
each target tried, and exits 1 when any failed. Keep a failing input as an ``@example`` or a
plain test next to the property it broke.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "test" / "ros"), str(ROOT / "test" / "spec")]

import test_fuzz_codecs as codecs  # noqa: E402
import test_fuzz_spec as specs  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

BATCH = 50  # examples per hypothesis run (each draws a fresh seed); --seconds is checked
# between runs


@dataclass
class Target:
    name: str
    strategy: st.SearchStrategy
    check: Callable[[Any], None]
    examples: int = 0
    failures: list[str] = field(default_factory=list)


def spec_check(folder: Path, verify: bool = False) -> Callable[[bytes], None]:
    """check_load, and the process's peak memory may not grow by 100 MB over the run (the
    peak of one example beyond all earlier ones would show there)."""
    baseline = _peak_bytes()

    def check(text: bytes) -> None:
        specs.check_load(folder, text, verify_checksums=verify)
        grown = _peak_bytes() - baseline
        assert grown < specs.MEGABYTES * 2**20, f"peak memory grew {grown / 2**20:.0f} MB"

    return check


def _peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def targets(folder: Path) -> list[Target]:
    return [
        Target("spec/any-file", specs.documents, spec_check(folder)),
        Target("spec/any-file-checksums", specs.documents, spec_check(folder, verify=True)),
        Target("spec/random-spec", specs.specs().map(specs.as_yaml), spec_check(folder)),
        Target("spec/mutated-spec", specs.mutated_specs().map(specs.as_yaml), spec_check(folder)),
        Target("codecs/multiarray", codecs.multiarray_cases(), _unpacked(codecs.check_multiarray)),
        Target("codecs/imu-twist-pose", codecs.fixed_cases(), _unpacked(codecs.check_decoder)),
        Target("codecs/joint-state", codecs.joint_cases(), _unpacked(codecs.check_decoder)),
    ]


def _unpacked(check: Callable[..., None]) -> Callable[[tuple], None]:
    return lambda case: check(*case)


def run(target: Target, examples: int, seconds: float, rng: random.Random) -> None:
    """Run ``target`` in batches until ``examples`` inputs or ``seconds`` are spent."""
    deadline = time.monotonic() + seconds

    def counted(case: Any) -> None:
        target.examples += 1
        target.check(case)

    while target.examples < examples and time.monotonic() < deadline:
        batch = min(BATCH, examples - target.examples)
        test = settings(
            max_examples=batch,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )(given(target.strategy)(counted))
        try:
            seed(rng.getrandbits(64))(test)()
        except Exception as e:  # a failure, shrunk by hypothesis; note it and go on
            text = "".join(traceback.format_exception_only(type(e), e)).strip()
            note = "\n".join(getattr(e, "__notes__", ()))
            target.failures.append(f"{text}\n{note}".strip())
            print(f"  {target.name}: FAILED\n    " + target.failures[-1].replace("\n", "\n    "))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=5000, help="per target (5000)")
    parser.add_argument("--seconds", type=float, default=120.0, help="per target (120)")
    parser.add_argument("--only", nargs="*", default=(), help="targets whose name starts so")
    parser.add_argument("--seed", type=int, default=None, help="seed of the batch seeds")
    options = parser.parse_args()
    rng = random.Random(options.seed)
    # float16 of 1e38 is inf, as the codecs document: not a failure
    warnings.filterwarnings("ignore", "overflow encountered in cast", RuntimeWarning)
    with tempfile.TemporaryDirectory(prefix="leapp_fuzz_") as root:
        chosen = [
            t
            for t in targets(Path(root))
            if not options.only or any(t.name.startswith(o) for o in options.only)
        ]
        if not chosen:
            parser.error(f"no target starts with {options.only}")
        for target in chosen:
            started = time.monotonic()
            run(target, options.examples, options.seconds, rng)
            took = time.monotonic() - started
            print(
                f"{target.name:26s} {target.examples:7d} examples in {took:6.1f} s, "
                f"{len(target.failures)} failure(s)",
                flush=True,
            )
    failed = [t for t in chosen if t.failures]
    print(f"\n{sum(t.examples for t in chosen)} examples, {len(failed)} target(s) failed")
    for target in failed:
        for failure in target.failures:
            print(f"\n{target.name}:\n  " + failure.replace("\n", "\n  "))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
