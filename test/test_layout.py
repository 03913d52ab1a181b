"""The layout of ``leapp/`` follows the data flow: packages import only the packages below them.

Read from the source with ``ast`` (every import statement, also those inside functions and
under ``TYPE_CHECKING``), so a lazy import cannot hide an upward dependency.
"""

from __future__ import annotations

import ast
import importlib
import itertools
from pathlib import Path

import pytest

import leapp

ROOT = Path(leapp.__file__).resolve().parent

# Bottom to top, in the order the data flows. A unit is a package under leapp/ or a top-level
# module; each unit may import units of lower layers only.
LAYERS = (
    ("leapp.errors", "leapp.version"),
    ("leapp.semantics",),  # TensorSemantics: what a port means, for the tracer and the API
    ("leapp.numpy",),  # the table of NumPy calls and their torch equivalents
    ("leapp.trace",),  # the recorder
    ("leapp.graph",),  # per-node graphs, edges between nodes
    ("leapp.export",),  # one artifact per node
    ("leapp.spec",),  # the spec file (and the examples file next to it)
    ("leapp.run",),  # running an export: model, pipeline, validation
    ("leapp.session",),  # the API layer: the active recording ...
    ("leapp.compilation",),  # ... compile_graph on the stopped one ...
    ("leapp.annotate",),
    ("leapp",),
)
API = {"leapp", "leapp.session", "leapp.annotate", "leapp.compilation"}
MAX_LINES = 450


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    relative = Path(*name.split(".")).relative_to("leapp") if "." in name else Path()
    base = ROOT / relative
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _unit(module: str) -> str:
    """``leapp.trace.recorder`` -> ``leapp.trace``; ``leapp.errors`` -> itself; ``leapp``."""
    return ".".join(module.split(".")[:2])


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every leapp module ``path`` imports."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "leapp"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "leapp":
                continue
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.append((node.lineno, submodule if _is_module(submodule) else node.module))
    return found


SOURCES = sorted(ROOT.rglob("*.py"))
EDGES = {  # (importing unit, imported unit) -> where
    (_unit(_module_name(path)), _unit(target)): f"{path.relative_to(ROOT.parent)}:{line}"
    for path in SOURCES
    for line, target in _imports(path)
    if _unit(_module_name(path)) != _unit(target)
}


def test_no_module_uses_relative_imports():
    # leapp.numpy must never shadow NumPy: every module imports absolutely.
    relative = [
        f"{path.relative_to(ROOT.parent)}:{node.lineno}"
        for path in SOURCES
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.level > 0
    ]
    assert relative == []


def test_numpy_inside_leapp_numpy_is_numpy():
    import numpy

    from leapp.numpy import functions, operands, ufuncs

    assert functions.np is operands.np is ufuncs.np is numpy


def test_every_unit_has_a_layer():
    units = {_unit(_module_name(path)) for path in SOURCES}
    assert units == {unit for layer in LAYERS for unit in layer}


def test_package_imports_form_no_cycle():
    graph: dict[str, set[str]] = {}
    for source, target in EDGES:
        graph.setdefault(source, set()).add(target)
    done: set[str] = set()

    def visit(unit: str, path: tuple[str, ...]) -> None:
        if unit in path:
            cycle = [*path[path.index(unit) :], unit]
            steps = [f"{a} -> {b} ({EDGES[a, b]})" for a, b in itertools.pairwise(cycle)]
            pytest.fail("import cycle between leapp packages: " + "; ".join(steps))
        if unit in done:
            return
        for target in sorted(graph.get(unit, ())):
            visit(target, (*path, unit))
        done.add(unit)

    for unit in sorted(graph):
        visit(unit, ())


def test_packages_import_only_packages_below_them():
    layer = {unit: index for index, units in enumerate(LAYERS) for unit in units}
    upward = [
        f"{source} imports {target} at {where}"
        for (source, target), where in sorted(EDGES.items())
        if layer[target] >= layer[source]
    ]
    assert upward == []


def test_packages_below_the_api_never_import_it():
    # The recorder, the graphs, export, spec and run know nothing of leapp.start/annotate.
    reaching_up = [
        f"{source} imports {target} at {where}"
        for (source, target), where in sorted(EDGES.items())
        if source not in API and target in API
    ]
    assert reaching_up == []


def test_no_module_is_over_the_size_limit():
    sizes = {str(p.relative_to(ROOT.parent)): len(p.read_text().splitlines()) for p in SOURCES}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


@pytest.mark.parametrize("module", ["leapp", "leapp.annotate", "leapp.spec", "leapp.export"])
def test_every_public_name_resolves(module):
    imported = importlib.import_module(module)
    missing = [name for name in imported.__all__ if not hasattr(imported, name)]
    assert missing == []


def test_the_documented_entry_points_are_where_the_readme_says():
    import leapp.export
    import leapp.spec

    assert callable(leapp.spec.load) and callable(leapp.spec.dump)
    assert leapp.spec.Spec.__name__ == "Spec"
    assert callable(leapp.export.export_node)
    assert leapp.Pipeline.__name__ == "Pipeline"
    assert isinstance(leapp.__version__, str)
