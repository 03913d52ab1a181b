"""The layouts of ``leapp/`` and ``leapp_ros/`` follow the data flow: packages import only the
packages below them, and ``leapp`` never imports ``leapp_ros``.

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
import leapp_ros

ROOT = Path(leapp.__file__).resolve().parent
ROS_ROOT = Path(leapp_ros.__file__).resolve().parent

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
# The same for leapp_ros, which may import any of leapp (leapp never imports it).
ROS_LAYERS = (
    ("leapp_ros.ament",),  # making a pip install visible to ament_index_python
    ("leapp_ros.plan",),  # the ROS plan of a spec: nodes, topics, messages, QoS, parameters
    ("leapp_ros.messages",),  # tensors to ROS messages and back
    ("leapp_ros.node",),  # the ROS nodes: one pipeline node, the fused node, their data path
    ("leapp_ros.run",),  # processes of a graph: runner, supervisor, component container
    ("leapp_ros.testing",),  # a live graph driven over its topics, from pytest or a script
    ("leapp_ros.tools",),  # the leapp-ros command: generate, verify, inspect, run
    ("leapp_ros",),
)
API = {"leapp", "leapp.session", "leapp.annotate", "leapp.compilation"}
MAX_LINES = 450


def _module_name(path: Path) -> str:
    parts = path.relative_to(path_root(path).parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def path_root(path: Path) -> Path:
    return ROS_ROOT if path.is_relative_to(ROS_ROOT) else ROOT


def _is_module(name: str) -> bool:
    top, *rest = name.split(".")
    base = {"leapp": ROOT, "leapp_ros": ROS_ROOT}[top].joinpath(*rest)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _unit(module: str) -> str:
    """``leapp.trace.recorder`` -> ``leapp.trace``; ``leapp.errors`` -> itself; ``leapp``."""
    return ".".join(module.split(".")[:2])


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every leapp or leapp_ros module ``path`` imports."""
    ours = {"leapp", "leapp_ros"}
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] in ours]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] not in ours:
                continue
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.append((node.lineno, submodule if _is_module(submodule) else node.module))
    return found


def _edges(sources: list[Path]) -> dict[tuple[str, str], str]:
    """``(importing unit, imported unit) -> where`` for the imports between units."""
    return {
        (
            _unit(_module_name(path)),
            _unit(target),
        ): f"{path.relative_to(path_root(path).parent)}:{line}"
        for path in sources
        for line, target in _imports(path)
        if _unit(_module_name(path)) != _unit(target)
    }


def _cycle(edges: dict[tuple[str, str], str]) -> str | None:
    """The first import cycle among ``edges``, as ``a -> b (where); b -> a (where)``."""
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
    done: set[str] = set()

    def visit(unit: str, path: tuple[str, ...]) -> str | None:
        if unit in path:
            cycle = [*path[path.index(unit) :], unit]
            return "; ".join(f"{a} -> {b} ({edges[a, b]})" for a, b in itertools.pairwise(cycle))
        if unit in done:
            return None
        for target in sorted(graph.get(unit, ())):
            found = visit(target, (*path, unit))
            if found:
                return found
        done.add(unit)
        return None

    return next(filter(None, (visit(unit, ()) for unit in sorted(graph))), None)


def _upward(edges: dict[tuple[str, str], str], layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Imports of a unit from its own layer or a higher one (units outside ``layers`` are
    below them all: ``leapp`` for ``leapp_ros``)."""
    layer = {unit: index for index, units in enumerate(layers) for unit in units}
    return [
        f"{source} imports {target} at {where}"
        for (source, target), where in sorted(edges.items())
        if target in layer and layer[target] >= layer[source]
    ]


SOURCES = sorted(ROOT.rglob("*.py"))
ROS_SOURCES = sorted(ROS_ROOT.rglob("*.py"))
EDGES = _edges(SOURCES)
ROS_EDGES = _edges(ROS_SOURCES)


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
    ros_units = {_unit(_module_name(path)) for path in ROS_SOURCES}
    assert ros_units == {unit for layer in ROS_LAYERS for unit in layer}


@pytest.mark.parametrize("library", ["leapp", "leapp_ros"])
def test_package_imports_form_no_cycle(library):
    cycle = _cycle(EDGES if library == "leapp" else ROS_EDGES)
    assert cycle is None, f"import cycle between {library} packages: {cycle}"


@pytest.mark.parametrize("library", ["leapp", "leapp_ros"])
def test_packages_import_only_packages_below_them(library):
    edges, layers = (EDGES, LAYERS) if library == "leapp" else (ROS_EDGES, ROS_LAYERS)
    assert _upward(edges, layers) == []


def test_leapp_never_imports_leapp_ros():
    reaching = [
        f"{where} imports {target}"
        for (_, target), where in sorted(EDGES.items())
        if target.split(".")[0] == "leapp_ros"
    ]
    assert reaching == []


def test_the_rules_name_the_import_that_breaks_them():
    edges = {("a.x", "a.y"): "a/x.py:3", ("a.y", "a.x"): "a/y/z.py:9", ("a.y", "b"): "a/y.py:1"}
    assert _cycle(edges) == "a.x -> a.y (a/x.py:3); a.y -> a.x (a/y/z.py:9)"
    assert _upward(edges, (("a.x",), ("a.y",))) == ["a.x imports a.y at a/x.py:3"]


def test_every_leapp_ros_module_is_in_a_package():
    # leapp_ros/ is packages along the flow; at its top only the package itself and ament.
    loose = {p.name for p in ROS_ROOT.glob("*.py")} - {"__init__.py", "ament.py"}
    assert loose == set()


def test_packages_below_the_api_never_import_it():
    # The recorder, the graphs, export, spec and run know nothing of leapp.start/annotate.
    reaching_up = [
        f"{source} imports {target} at {where}"
        for (source, target), where in sorted(EDGES.items())
        if source not in API and target in API
    ]
    assert reaching_up == []


def test_no_module_is_over_the_size_limit():
    sizes = {
        str(p.relative_to(path_root(p).parent)): len(p.read_text().splitlines())
        for p in SOURCES + ROS_SOURCES
    }
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
