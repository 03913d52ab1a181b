"""Warp for the tests: configured once per test session, before any kernel compiles.

Importing this module skips the importing test module where warp-lang is not installed. It
points Warp's kernel cache at a directory of this test session (removed at exit; node
processes the tests start inherit it through ``WARP_CACHE_PATH``) and compiles CPU kernels for
a generic x86-64 CPU, the flags leapp exports with, so each Warp module compiles once per
session (about 2-10 s on a 2-core machine) for the eager runs and the exports alike.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

wp = pytest.importorskip("warp", reason="warp-lang is not installed (pip install warp-lang)")

CACHE = tempfile.mkdtemp(prefix="leapp-warp-kernels-")
atexit.register(shutil.rmtree, CACHE, ignore_errors=True)
if wp._src.context.runtime is None:  # not initialized by an earlier import
    os.environ["WARP_CACHE_PATH"] = CACHE
    wp.config.kernel_cache_dir = CACHE
    wp.config.cpu_compiler_flags = ""
    wp.config.log_level = wp.LOG_WARNING
    wp.init()

import warp_gravity as example  # noqa: E402  (examples/ is on pytest's path)

from support import warp_kernels as kernels  # noqa: E402

__all__ = ["CACHE", "example", "example_export_fixture", "example_policy", "kernels", "wp"]


_exports: dict[str, Path] = {}


@pytest.fixture(scope="session", name="example_export")
def example_export_fixture(tmp_path_factory) -> Path:
    """examples/warp_gravity.py traced over 5 ticks and exported once per test session: the
    export folder."""
    if "example" not in _exports:
        from leapp import session as session_module

        session_module._active = None
        compiled = example.main(save_path=tmp_path_factory.mktemp("warp_gravity"))
        _exports["example"] = compiled.path.parent
    return _exports["example"]


def example_policy():
    """The example's policy, with the weights its export traced (seeded)."""
    import torch

    torch.manual_seed(0)
    return example.Policy().eval()
