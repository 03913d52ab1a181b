"""bench/fuzz.py runs the property tests of the fuzz test files for longer: each of its targets
is one of those tests, every property test there is a target, and a short run of one target
tries as many examples as asked, through pytest."""

from __future__ import annotations

import ast

import fuzz
from support.ros import REPO


def _property_tests(path: str) -> set[str]:
    """The test functions of ``path`` that hypothesis drives (decorated with ``given``)."""
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    return {
        f"{path}::{node.name}"
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(
            isinstance(d, ast.Call) and getattr(d.func, "id", None) == "given"
            for d in node.decorator_list
        )
    }


def test_the_targets_are_the_property_tests_of_the_fuzz_files():
    assert set(fuzz.TARGETS.values()) == _property_tests(fuzz.SPEC) | _property_tests(fuzz.CODECS)


def test_a_short_run_tries_the_examples_it_is_given(capsys):
    assert fuzz.main(["--only", "codecs/joint-state", "--examples", "20", "--batch", "10"]) == 0
    printed = capsys.readouterr().out
    assert "codecs/joint-state              20 examples in" in printed, printed
    assert "20 examples, 0 target(s) failed" in printed, printed
