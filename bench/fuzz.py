"""Long fuzzing runs of the spec loader and the message codecs (the CI tests run a few dozen
examples each; this runs as many as you give it).

    python bench/fuzz.py [--examples N] [--seconds S] [--batch B] [--only TARGET ...]
                         [--seed SEED]

Each target is one property test of ``test/spec/test_fuzz_spec.py`` or
``test/ros/test_fuzz_codecs.py`` (:data:`TARGETS`): a spec file loads as a Spec or raises a
SpecError (within a bounded number of Python calls and 100 MB; a loaded spec dumps and loads
back the same), a message decodes to the port's dtype and shape or raises a MessageError. The
test runs under pytest with the hypothesis profile ``fuzz`` (test/conftest.py: ``--batch``
examples, no deadline, no example database), in batches, each with a fresh random seed, until
the target has tried ``--examples`` inputs or spent ``--seconds``. A failure is shrunk by
hypothesis and printed with the seed that reproduces it, and the target goes on. The run prints
how many examples each target tried and exits 1 when any failed. Keep a failing input as an
``@example`` or a plain test next to the property it broke.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = "test/spec/test_fuzz_spec.py"
CODECS = "test/ros/test_fuzz_codecs.py"
TARGETS = {  # name: the pytest id of its property test
    "spec/any-file": f"{SPEC}::test_any_file_loads_as_a_spec_or_raises_a_spec_error",
    "spec/random-spec": f"{SPEC}::test_a_random_spec_loads_or_raises_a_spec_error",
    "codecs/multiarray": f"{CODECS}::test_a_multiarray_decodes_to_the_port_or_is_a_message_error",
    "codecs/imu-twist-pose": (
        f"{CODECS}::test_an_imu_twist_or_pose_decodes_to_the_ports_or_is_a_message_error"
    ),
    "codecs/joint-state": (
        f"{CODECS}::test_a_joint_state_decodes_to_the_ports_or_is_a_message_error"
    ),
}
PASSING = re.compile(r"(\d+) passing, (\d+) failing")


@dataclass
class Target:
    name: str
    test: str
    examples: int = 0
    failures: list[str] = field(default_factory=list)


def run_batch(target: Target, examples: int, seed: int) -> None:
    """One pytest run of ``target``'s test: ``examples`` inputs drawn from ``seed``."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        target.test,
        "-q",
        "-p",
        "no:cacheprovider",
        "--hypothesis-show-statistics",
        f"--hypothesis-seed={seed}",
    ]
    env = {**os.environ, "HYPOTHESIS_PROFILE": "fuzz", "LEAPP_FUZZ_EXAMPLES": str(examples)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    counts = PASSING.search(done.stdout)
    target.examples += sum(map(int, counts.groups())) if counts else 0
    if done.returncode:
        text = (done.stdout + done.stderr).strip()
        target.failures.append(f"--hypothesis-seed={seed}:\n{text[-4000:]}")
        print(f"  {target.name}: FAILED\n    " + target.failures[-1].replace("\n", "\n    "))


def run(target: Target, examples: int, seconds: float, batch: int, rng: random.Random) -> None:
    """Run ``target`` in batches until ``examples`` inputs or ``seconds`` are spent."""
    deadline = time.monotonic() + seconds
    while target.examples < examples and time.monotonic() < deadline:
        before = target.examples
        run_batch(target, min(batch, examples - target.examples), rng.getrandbits(32))
        if target.examples == before and not target.failures:
            target.failures.append("pytest ran no example: is the test still there?")
            return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=5000, help="per target (5000)")
    parser.add_argument("--seconds", type=float, default=600.0, help="per target (600)")
    parser.add_argument("--batch", type=int, default=500, help="examples per pytest run (500)")
    parser.add_argument("--only", nargs="*", default=(), help="targets whose name starts so")
    parser.add_argument("--seed", type=int, default=None, help="seed of the batch seeds")
    options = parser.parse_args(argv)
    rng = random.Random(options.seed)
    chosen = [
        Target(name, test)
        for name, test in TARGETS.items()
        if not options.only or any(name.startswith(o) for o in options.only)
    ]
    if not chosen:
        parser.error(f"no target starts with {options.only}; targets: {', '.join(TARGETS)}")
    for target in chosen:
        started = time.monotonic()
        run(target, options.examples, options.seconds, options.batch, rng)
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
