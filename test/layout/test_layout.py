"""The layouts of ``leapp/`` and ``leapp_ros/`` follow the data flow: packages import only the
packages below them, and ``leapp`` never imports ``leapp_ros``. Inside ``leapp/trace`` the same
holds for its sub-packages: torch tracing at the bottom, the pipeline's recording at the top.
No two modules import each other, directly or through others, and no module is over
``MAX_LINES`` lines.

Read from the source with ``ast`` (every import statement, also those inside functions and
under ``TYPE_CHECKING``), so a lazy import cannot hide an upward dependency or a circle.
"""

from __future__ import annotations

import ast
import importlib
import itertools
from collections.abc import Mapping, Sequence
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
    ("leapp.decorated_node",),  # ... annotate.method's decorated function ...
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
    ("leapp_ros.bag",),  # rosbag2 folders: read, written, recorded, as ticks of a pipeline
    ("leapp_ros.testing",),  # a live graph driven over its topics, from pytest or a script
    ("leapp_ros.sim",),  # a MuJoCo robot in the loop of a live graph
    ("leapp_ros.tools",),  # the leapp-ros command: generate, verify, inspect, run
    ("leapp_ros",),
)
# The same inside leapp.trace: a unit is one of its sub-packages or a module directly in it.
TRACE_LAYERS = (
    ("leapp.trace.location",),  # the user's file and line, for every message
    ("leapp.trace.ports",),  # port names: nested containers flattened, annotate.method's
    ("leapp.trace.payload",),  # what the annotations accept, as flat named ports
    ("leapp.trace.tensors",),  # torch tracing: TracedTensor, one node run's fx graph
    ("leapp.trace.arrays", "leapp.trace.scripts"),  # NumPy calls, TorchScript calls as torch's
    ("leapp.trace.segments",),  # Warp calls as Warp segments (wp.from_numpy of traced arrays)
    ("leapp.trace.pipeline",),  # one pipeline's recording: node runs, sources, states, buffers
)
API = {"leapp", "leapp.session", "leapp.annotate", "leapp.compilation", "leapp.decorated_node"}
MAX_LINES = 400


def _module_name(path: Path) -> str:
    parts = path.relative_to(path_root(path).parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def path_root(path: Path) -> Path:
    return ROS_ROOT if path.is_relative_to(ROS_ROOT) else ROOT


def _is_module(name: str) -> bool:
    top, *rest = name.split(".")
    base = {"leapp": ROOT, "leapp_ros": ROS_ROOT}[top].joinpath(*rest)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _unit(module: str, package: str = "leapp") -> str:
    """The unit of ``package`` that ``module`` is in, its sub-package or its module:
    ``leapp.trace.tensors.recorder`` -> ``leapp.trace``; ``leapp.errors`` -> itself; ``leapp``;
    for ``package="leapp.trace"``, ``leapp.trace.tensors.recorder`` -> ``leapp.trace.tensors``."""
    return ".".join(module.split(".")[: package.count(".") + 2])


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


def _edges(sources: list[Path], package: str = "leapp") -> dict[tuple[str, str], str]:
    """``(importing unit, imported unit) -> where`` for the imports between units of
    ``package``."""
    return {
        (
            _unit(_module_name(path), package),
            _unit(target, package),
        ): f"{path.relative_to(path_root(path).parent)}:{line}"
        for path in sources
        for line, target in _imports(path)
        if _unit(_module_name(path), package) != _unit(target, package)
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


def _module_edges(sources: list[Path]) -> dict[tuple[str, str], list[str]]:
    """``(importing module, imported module) -> [where, ...]`` between modules of ``sources``.

    A module imports another when it imports it or a name from it: ``from leapp.x import f``
    is an edge to ``leapp.x`` (``leapp/x/__init__.py`` for a package); ``from leapp.x import y``
    with ``y`` a module of its own, and ``import leapp.x.y``, are edges to ``leapp.x.y`` only,
    not to the package ``leapp.x`` above it.
    """
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sources:
        source = _module_name(path)
        for line, target in _imports(path):
            if target != source:
                where = f"{path.relative_to(path_root(path).parent)}:{line}"
                lines = edges.setdefault((source, target), [])
                if where not in lines:  # one line importing several names from the module
                    lines.append(where)
    return edges


def _circles(edges: Mapping[tuple[str, str], Sequence[str]]) -> list[frozenset[str]]:
    """The import circles among ``edges``: each set of modules that all reach each other (a
    strongly connected component of two modules or more), found by Tarjan's algorithm."""
    graph: dict[str, list[str]] = {}
    for source, target in sorted(edges):
        graph.setdefault(source, []).append(target)
        graph.setdefault(target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = {stack.pop()}
            while module not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.append(frozenset(component))

    for module in graph:
        if module not in index:
            visit(module)
    return found


def _describe_circle(
    circle: frozenset[str], edges: Mapping[tuple[str, str], Sequence[str]]
) -> str:
    """``circle`` as its modules and the import lines that join them."""
    imports = [
        f"  {source} -> {target} ({', '.join(where)})"
        for (source, target), where in sorted(edges.items())
        if source in circle and target in circle
    ]
    return "\n".join([f"import circle among {', '.join(sorted(circle))}:", *imports])


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
TRACE = ROOT / "trace"  # its own __init__ (a docstring) is no unit of it
TRACE_SOURCES = [p for p in SOURCES if p.is_relative_to(TRACE) and p != TRACE / "__init__.py"]
# Each layout: its sources and their layers; its name is the package whose units they are.
TREES = {
    "leapp": (SOURCES, LAYERS),
    "leapp_ros": (ROS_SOURCES, ROS_LAYERS),
    "leapp.trace": (TRACE_SOURCES, TRACE_LAYERS),
}
EDGES = {tree: _edges(sources, tree) for tree, (sources, _) in TREES.items()}
MODULE_EDGES = _module_edges(SOURCES + ROS_SOURCES)
SIZES = {
    str(p.relative_to(path_root(p).parent)): len(p.read_text(encoding="utf-8").splitlines())
    for p in SOURCES + ROS_SOURCES
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

    from leapp.numpy import functions, operands, reductions, shapes, ufuncs

    modules = (functions, operands, reductions, shapes, ufuncs)
    assert all(module.np is numpy for module in modules)


@pytest.mark.parametrize("tree", TREES)
def test_every_unit_has_a_layer(tree):
    sources, layers = TREES[tree]
    units = {_unit(_module_name(path), tree) for path in sources}
    assert units == {unit for layer in layers for unit in layer}


@pytest.mark.parametrize("tree", TREES)
def test_package_imports_form_no_cycle(tree):
    cycle = _cycle(EDGES[tree])
    assert cycle is None, f"import cycle between {tree} packages: {cycle}"


@pytest.mark.parametrize("tree", TREES)
def test_packages_import_only_packages_below_them(tree):
    assert _upward(EDGES[tree], TREES[tree][1]) == []


def test_leapp_never_imports_leapp_ros():
    reaching = [
        f"{where} imports {target}"
        for (_, target), where in sorted(EDGES["leapp"].items())
        if target.split(".")[0] == "leapp_ros"
    ]
    assert reaching == []


def test_the_rules_name_the_import_that_breaks_them():
    edges = {("a.x", "a.y"): "a/x.py:3", ("a.y", "a.x"): "a/y/z.py:9", ("a.y", "b"): "a/y.py:1"}
    assert _cycle(edges) == "a.x -> a.y (a/x.py:3); a.y -> a.x (a/y/z.py:9)"
    assert _upward(edges, (("a.x",), ("a.y",))) == ["a.x imports a.y at a/x.py:3"]


def test_modules_import_each_other_in_no_circle():
    circles = list(_circles(MODULE_EDGES))
    assert circles == [], "\n".join(_describe_circle(c, MODULE_EDGES) for c in circles)


def test_a_circle_is_named_by_its_modules_and_import_lines():
    edges = {
        ("a.x", "a.y"): ["a/x.py:3"],
        ("a.y", "a.z"): ["a/y.py:5", "a/y.py:40"],
        ("a.z", "a.x"): ["a/z.py:9"],
        ("a.z", "b"): ["a/z.py:1"],
        ("b", "c"): ["b/__init__.py:2"],
    }
    [circle] = _circles(edges)
    assert _describe_circle(circle, edges) == (
        "import circle among a.x, a.y, a.z:\n"
        "  a.x -> a.y (a/x.py:3)\n"
        "  a.y -> a.z (a/y.py:5, a/y.py:40)\n"
        "  a.z -> a.x (a/z.py:9)"
    )


def test_a_module_imports_the_module_it_names_not_the_package_above_it(tmp_path):
    # One import of each kind: a name from a module, a module from a package, a name from a
    # package (its __init__), a dotted module, and one under TYPE_CHECKING.
    source = tmp_path / "example.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from leapp.errors import TraceError\n"
        "from leapp.trace import location\n"
        "from leapp import start\n"
        "import leapp.trace.tensors.tensor\n"
        "if TYPE_CHECKING:\n"
        "    from leapp.trace.pipeline.recording import Recording\n",
        encoding="utf-8",
    )
    assert _imports(source) == [
        (2, "leapp.errors"),
        (3, "leapp.trace.location"),
        (4, "leapp"),
        (5, "leapp.trace.tensors.tensor"),
        (7, "leapp.trace.pipeline.recording"),
    ]


def test_every_leapp_ros_module_is_in_a_package():
    # leapp_ros/ is packages along the flow; at its top only the package itself and ament.
    loose = {p.name for p in ROS_ROOT.glob("*.py")} - {"__init__.py", "ament.py"}
    assert loose == set()


def test_packages_below_the_api_never_import_it():
    # The recorder, the graphs, export, spec and run know nothing of leapp.start/annotate.
    reaching_up = [
        f"{source} imports {target} at {where}"
        for (source, target), where in sorted(EDGES["leapp"].items())
        if source not in API and target in API
    ]
    assert reaching_up == []


def test_no_module_is_over_the_size_limit():
    over = {n: lines for n, lines in SIZES.items() if lines > MAX_LINES}
    assert over == {}


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
