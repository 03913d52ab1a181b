"""Export: write one pipeline node's ``torch.fx`` graph as a deployable artifact.

:func:`export_node` is the only entry point. It takes the pure graph of one node (placeholders
are the node's inputs in port order, the output is one tensor or a tuple of tensors) and writes
``<node>.pt`` (TorchScript), ``<node>.onnx`` or ``<node>.pt2`` (``torch.export``) into the export
folder, or copies the user's own artifact there. The :class:`Artifact` it returns holds exactly
what the spec's ``models.<node>.parameters`` needs besides the checksums.

Example::

    import torch
    from leapp.export import export_node

    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(9, 6), torch.nn.Tanh()))
    artifact = export_node(
        gm, (torch.zeros(9),), node="policy", input_names=["obs"],
        output_names=["action"], backend="onnx", directory="out/pipeline",
    )
    # Artifact(model_path='policy.onnx', backend='onnx', opset_version=20, torch_version=None)

Every backend module is imported only when its backend is asked for, so exporting a pipeline
without pt2 nodes never pays for ``torch.export``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.fx

from leapp.errors import ExportError

__all__ = ["ALIASES", "BACKENDS", "Artifact", "PhaseTimes", "export_node"]

logger = logging.getLogger(__name__)

BACKENDS: Mapping[str, str] = types.MappingProxyType(
    {"jit": ".pt", "onnx": ".onnx", "pt2": ".pt2"}
)
"""The built-in backends and the suffix of the file each one writes."""

ALIASES: Mapping[str, tuple[str, str | None]] = types.MappingProxyType(
    {
        "jit-script": ("jit", "script"),
        "jit-trace": ("jit", "trace"),
        "onnx-torchscript": ("onnx", None),
        "onnx-dynamo": ("onnx", None),
        "exported-program": ("pt2", None),
        "torch": ("jit", None),
    }
)
"""NVIDIA LEAPP's backend names: ``name -> (backend, TorchScript mode)``. ``"jit-script"`` is
``torch.jit.script`` only, ``"jit-trace"`` is ``torch.jit.trace`` only (``"jit"`` and LEAPP's
older ``"torch"`` script and fall back to tracing); ``"onnx-torchscript"`` and ``"onnx-dynamo"``
are our ONNX exporter (TorchScript-based, the one that runs on this torch), ``"exported-program"``
is ``pt2``. The artifact and the spec record the backend (``jit`` / ``onnx`` / ``pt2``) every
reader knows."""


@dataclass(frozen=True)
class Artifact:
    """What one exported node contributes to ``models.<node>.parameters`` of the spec.

    ``model_path`` is the artifact's file name relative to the export folder (None when the node
    was not exported), ``backend`` one of :data:`BACKENDS` or None, ``opset_version`` is set for
    ONNX and ``torch_version`` for pt2 artifacts. A node with Warp segments has
    ``warp_segments`` > 0 and ``warp_archive``, the file holding them (:mod:`leapp.export.warp`).
    ``timings`` are the seconds each phase of the export took (``"torch.jit.script"``,
    ``"torch.onnx.export"``, ``"agreement"``, ...), for reports; they are not part of the spec.
    """

    model_path: str | None
    backend: str | None
    opset_version: int | None = None
    torch_version: str | None = None
    warp_segments: int = 0
    warp_archive: str | None = None
    timings: Mapping[str, float] = field(default_factory=dict, repr=False, compare=False)


class PhaseTimes:
    """Seconds per named phase, summed when a phase runs more than once::

    timings = PhaseTimes()
    with timings("torch.onnx.export"):
        ...
    timings.seconds  # {"torch.onnx.export": 0.012}
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - began
            self.seconds[phase] = self.seconds.get(phase, 0.0) + elapsed

    def __str__(self) -> str:
        return ", ".join(f"{phase} {seconds:.3f} s" for phase, seconds in self.seconds.items())


def export_node(
    graph_module: torch.fx.GraphModule,
    example_inputs: Sequence[torch.Tensor],
    *,
    node: str,
    input_names: Sequence[str],
    output_names: Sequence[str],
    backend: str | os.PathLike[str] | None,
    directory: str | os.PathLike[str],
) -> Artifact:
    """Write the artifact of one pipeline node into ``directory`` and describe it.

    Args:
        graph_module: the node's pure graph: its placeholders are the inputs in port order, its
            output is one tensor (one output port) or a tuple of tensors (several ports).
        example_inputs: one tensor per input port, used by the tracing backends (onnx, pt2).
        node: the node's name; the artifact is written as ``<node><suffix>``.
        input_names: the input port names, in order; they become the artifact's input names.
        output_names: the output port names, in order; they become the artifact's output names.
        backend: ``"jit"``, ``"onnx"``, ``"pt2"``, one of :data:`ALIASES`, None (no artifact),
            or the path of an artifact the user made (``.pt``, ``.onnx``, ``.pt2``) to copy
            into the folder.
        directory: the export folder (created if missing).

    Returns:
        The :class:`Artifact` to record in the spec.

    Raises:
        ExportError: unknown backend, inconsistent arguments, or the backend failed; the
            message names the node and what to do next.
    """
    _check_node_name(node)
    if backend is None:
        logger.debug("node %s: backend None, no artifact written", node)
        return Artifact(model_path=None, backend=None)
    folder = Path(directory)
    started = time.perf_counter()
    if isinstance(backend, str) and (backend in BACKENDS or backend in ALIASES):
        artifact = _export_builtin(
            graph_module, example_inputs, node, input_names, output_names, backend, folder
        )
    elif _looks_like_path(backend):
        from leapp.export import custom

        folder.mkdir(parents=True, exist_ok=True)
        artifact = custom.export(Path(backend), node=node, directory=folder)
    else:
        choices = ", ".join(repr(name) for name in BACKENDS)
        aliases = ", ".join(repr(name) for name in ALIASES)
        raise ExportError(
            f"node {node!r}: unknown backend {backend!r}; choose one of {choices}, None (no "
            f"artifact), NVIDIA LEAPP's {aliases}, or the path of your own .pt, .onnx or .pt2 "
            "file"
        )
    logger.debug(
        "node %s: exported as %s in %.3f s", node, artifact.backend, time.perf_counter() - started
    )
    return artifact


def _export_builtin(
    graph_module: torch.fx.GraphModule,
    example_inputs: Sequence[torch.Tensor],
    node: str,
    input_names: Sequence[str],
    output_names: Sequence[str],
    backend: str,
    folder: Path,
) -> Artifact:
    prepared = prepare_graph_module(graph_module, node, input_names, output_names)
    inputs = tuple(_plain_tensor(value) for value in example_inputs)
    if len(inputs) != len(input_names):
        raise ExportError(
            f"node {node!r}: {len(inputs)} example inputs for {len(input_names)} input ports "
            f"{list(input_names)}; pass one tensor per port"
        )
    folder.mkdir(parents=True, exist_ok=True)
    backend, mode = ALIASES.get(backend, (backend, None))
    options = {"mode": mode} if mode else {}
    if backend == "jit":
        from leapp.export import jit as module
    elif backend == "onnx":
        from leapp.export import onnx as module
    else:
        from leapp.export import pt2 as module
    from leapp.export.warp import export_segments

    warp = export_segments(prepared, node=node, backend=backend, directory=folder)
    artifact = module.export(
        prepared,
        inputs,
        node=node,
        input_names=tuple(input_names),
        output_names=tuple(output_names),
        directory=folder,
        **options,
    )
    if warp is None:
        return artifact
    return replace(artifact, warp_segments=warp.segments, warp_archive=warp.file_name)


def prepare_graph_module(
    graph_module: torch.fx.GraphModule,
    node: str,
    input_names: Sequence[str],
    output_names: Sequence[str],
) -> torch.fx.GraphModule:
    """A plain copy of ``graph_module`` that every backend can compile.

    The copy holds only plain ``torch.Tensor`` constants (no tensor subclasses, so no leapp
    class ends up in an artifact), its placeholders are valid Python argument names, and its
    output is one node or a tuple of nodes, matching ``output_names``. The caller's module is
    left untouched.
    """
    old_placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    if len(old_placeholders) != len(input_names):
        raise ExportError(
            f"node {node!r}: the graph has {len(old_placeholders)} inputs but "
            f"{len(input_names)} input ports {list(input_names)} were given; they must match "
            "one to one"
        )
    graph = torch.fx.Graph()
    value_map = {
        old: _copy_placeholder(graph, old, port)
        for old, port in zip(old_placeholders, input_names, strict=True)
    }
    output = graph.graph_copy(graph_module.graph, value_map)
    results = _output_nodes(output, node, output_names)
    graph.output(results[0] if len(results) == 1 else tuple(results))
    root: dict[str, Any] = {}
    for fx_node in graph.nodes:
        if fx_node.op in ("get_attr", "call_module"):
            root[fx_node.target] = _plain_attribute(_fetch(graph_module, fx_node.target))
    return torch.fx.GraphModule(root, graph)


def _output_nodes(output: Any, node: str, output_names: Sequence[str]) -> list[torch.fx.Node]:
    values = list(output) if isinstance(output, (tuple, list)) else [output]
    if len(values) != len(output_names):
        raise ExportError(
            f"node {node!r}: the graph returns {len(values)} values but {len(output_names)} "
            f"output ports {list(output_names)} were given; they must match one to one"
        )
    for name, value in zip(output_names, values, strict=True):
        if not isinstance(value, torch.fx.Node):
            raise ExportError(
                f"node {node!r}: output {name!r} is the Python value {value!r}, not a tensor; "
                "publish tensors only (wrap constants with torch.tensor(...))"
            )
    return values


def _copy_placeholder(graph: torch.fx.Graph, old: torch.fx.Node, port: str) -> torch.fx.Node:
    """Copy placeholder ``old`` into ``graph`` as the argument named after input ``port``.

    fx writes ``def forward(self, <target>, ...)``, so a port name that is not an identifier, is
    a keyword, shadows a global of the generated code (``torch``) or is ``self`` would break the
    module. The port name is kept whenever it is usable; otherwise fx's safe unique node name
    (``class_1``, ``joint_pos`` for ``joint-pos``) becomes the argument name.
    """
    candidate = "self_" if port == "self" else port
    new = graph.placeholder(candidate, type_expr=old.type)
    new.meta = dict(old.meta)
    if new.name != candidate:
        logger.debug("input %r is named %r inside the artifact", port, new.name)
        new.target = new.name
    return new


def _fetch(module: torch.nn.Module, qualified_name: str) -> Any:
    value: Any = module
    for part in str(qualified_name).split("."):
        value = getattr(value, part)
    return value


def _plain_attribute(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
        return _plain_tensor(value)
    return value


def _plain_tensor(value: torch.Tensor) -> torch.Tensor:
    """``value`` as a plain ``torch.Tensor`` sharing its storage (drops tensor subclasses)."""
    if type(value) is torch.Tensor:
        return value
    with torch._C.DisableTorchFunctionSubclass():
        return value.as_subclass(torch.Tensor).detach()


def summarize_error(error: BaseException, lines: int = 3) -> str:
    """The first few non-empty lines of ``error``'s message, for one-sentence error reports."""
    text = [line.strip() for line in str(error).splitlines() if line.strip()]
    return " ".join(text[:lines]) if text else type(error).__name__


def failing_operation(graph_module: torch.fx.GraphModule, error: BaseException) -> str:
    """``" at <operation> (<file>:<line>)"`` for the recorded operation an exporter's ``error``
    names (``Exporting the operator 'aten::sinh'``, ``While executing %sinh``), or ``""``."""
    from leapp.graph.aten_graph import describe_node, operation_name

    text = str(error)
    executing = re.search(r"While executing %(\w+)", text)
    operator = re.search(r"operator '(?:aten|prim)::(\w+)'", text)
    candidates = []
    for fx_node in graph_module.graph.nodes:
        if fx_node.op not in ("call_function", "call_method", "call_module"):
            continue
        if executing and fx_node.name == executing.group(1):
            return f" at {describe_node(fx_node)}"
        if operator:
            name = operation_name(fx_node).rsplit(".", 1)[-1].removesuffix("_")
            wanted = operator.group(1).removeprefix("linalg_").removeprefix("special_")
            if name == operator.group(1) or name == wanted:
                candidates.append(fx_node)
    if not candidates:
        return ""
    return " at " + "; ".join(describe_node(fx_node) for fx_node in candidates[:3])


def _looks_like_path(backend: object) -> bool:
    if isinstance(backend, os.PathLike):
        return True
    if not isinstance(backend, str):
        return False
    return "/" in backend or os.sep in backend or bool(Path(backend).suffix)


def _check_node_name(node: str) -> None:
    if (
        not isinstance(node, str)
        or not node
        or node in (".", "..")
        or "/" in node
        or (os.sep in node)
    ):
        raise ExportError(
            f"node name {node!r} cannot name an artifact file; use a non-empty name without "
            "'/' (for example 'policy')"
        )
