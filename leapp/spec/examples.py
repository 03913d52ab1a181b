"""The examples file: what every node received and produced while it was traced.

``<name>_examples.safetensors`` lies next to the spec. Validation re-runs each exported
artifact on these inputs and compares against these outputs, so the file is the evidence that
an export reproduces the training code.

Tensor keys are ``"<node>/<port>"``; ``"<node>/<port>/<i>"`` when the node ran more than once
(``i`` counts its runs from 0); ``"<node>/<port>_in"`` and ``"<node>/<port>_out"`` when a port
name is both an input and an output of the node (``"<node>/<port>_in/<i>"`` when both apply).
The file's ``__metadata__`` records which key holds which port of which run, so readers never
parse keys.

Example::

    from leapp.spec.examples import NodeSample, load_examples, save_examples

    save_examples(path, {"policy": [NodeSample({"obs": obs}, {"action": action})]})
    samples = load_examples(path)
    samples["policy"][0].outputs["action"]
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from leapp.errors import SpecError

__all__ = ["NodeSample", "load_examples", "save_examples"]

logger = logging.getLogger(__name__)

_FORMAT = "leapp-examples/1"


@dataclass(frozen=True)
class NodeSample:
    """One run of a node: its inputs and outputs by port name, in port order."""

    inputs: dict[str, torch.Tensor]
    outputs: dict[str, torch.Tensor]


def save_examples(
    path: str | os.PathLike[str], samples: Mapping[str, Sequence[NodeSample]]
) -> Path:
    """Write the samples of every node to a safetensors file (parent folders are created).

    Args:
        path: the file to write, normally ``<export folder>/<name>_examples.safetensors``.
        samples: per node name, its runs in the order they happened. Values are tensors (or
            anything ``torch.as_tensor`` accepts); they are copied to contiguous CPU tensors, so
            views and tensors shared between ports are fine.

    Returns:
        The path written.
    """
    from safetensors.torch import save_file

    path = Path(path)
    tensors: dict[str, torch.Tensor] = {}
    layout: dict[str, list[dict[str, dict[str, str]]]] = {}
    for node, runs in samples.items():
        runs = list(runs)
        layout[node] = []
        for index, sample in enumerate(runs):
            run_suffix = f"/{index}" if len(runs) > 1 else ""
            shared = set(sample.inputs) & set(sample.outputs)
            keys: dict[str, dict[str, str]] = {}
            for role, ports, tag in (
                ("inputs", sample.inputs, "_in"),
                ("outputs", sample.outputs, "_out"),
            ):
                keys[role] = {}
                for port, value in ports.items():
                    stem = f"{node}/{port}{tag if port in shared else ''}{run_suffix}"
                    key = _unused_key(stem, tensors)
                    tensors[key] = _storable(value, f"{node}/{port}")
                    keys[role][port] = key
            layout[node].append(keys)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    try:
        save_file(
            tensors, str(partial), metadata={"format": _FORMAT, "layout": json.dumps(layout)}
        )
    except KeyError as e:  # safetensors has no code for this dtype (complex128)
        ports = sorted(key for key, value in tensors.items() if value.dtype == e.args[0])
        raise SpecError(
            f"ports {ports} hold {e.args[0]} values, which the examples file (safetensors) "
            "cannot store; return another dtype from the node (torch.view_as_real for complex "
            "values)"
        ) from e
    partial.replace(path)
    logger.debug("wrote %d example tensors to %s", len(tensors), path)
    return path


def load_examples(path: str | os.PathLike[str]) -> dict[str, list[NodeSample]]:
    """Read a file written by :func:`save_examples`.

    Returns:
        Per node name (in the order saved), its runs in order; each run's ports in the order
        saved. Tensors are on the CPU.

    Raises:
        SpecError: the file is missing, corrupt, or not a leapp examples file.
    """
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if not path.is_file():
        raise SpecError(
            f"examples file {path} does not exist; re-export the pipeline to capture examples",
            (f"{path}: expected a leapp examples file but there is no such file",),
        )
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
            layout = _layout(metadata, set(handle.keys()), path)
            return {
                node: [
                    NodeSample(
                        {port: handle.get_tensor(key) for port, key in run["inputs"].items()},
                        {port: handle.get_tensor(key) for port, key in run["outputs"].items()},
                    )
                    for run in runs
                ]
                for node, runs in layout.items()
            }
    except (SafetensorError, OSError) as e:
        raise SpecError(
            f"examples file {path} is not a readable safetensors file ({e}); re-export the "
            "pipeline to write it again",
            (f"{path}: unreadable: {e}",),
        ) from e


def _layout(metadata: Mapping[str, str], keys: set[str], path: Path) -> dict[str, Any]:
    """The recorded node -> runs -> role -> port -> key mapping, checked against ``keys``."""
    problem = None
    layout: Any = None
    if metadata.get("format") != _FORMAT:
        problem = f"expected metadata format {_FORMAT!r} but found {metadata.get('format')!r}"
    else:
        try:
            layout = json.loads(metadata.get("layout", ""))
        except json.JSONDecodeError as e:
            problem = f"expected a JSON layout in the metadata but it does not parse: {e}"
    if problem is None and not _is_layout(layout):
        problem = "expected a layout {node: [{inputs: {port: key}, outputs: {...}}]}"
    if problem is None:
        missing = sorted(
            key
            for runs in layout.values()
            for run in runs
            for ports in run.values()
            for key in ports.values()
            if key not in keys
        )
        if missing:
            problem = f"expected tensors {', '.join(missing)} but they are not in the file"
    if problem is not None:
        raise SpecError(
            f"{path} is not a leapp examples file: {problem}; re-export the pipeline",
            (f"{path}: {problem}",),
        )
    return layout


def _is_layout(layout: Any) -> bool:
    def is_ports(ports: Any) -> bool:
        return isinstance(ports, dict) and all(isinstance(k, str) for k in ports.values())

    return isinstance(layout, dict) and all(
        isinstance(runs, list)
        and all(
            isinstance(run, dict)
            and set(run) == {"inputs", "outputs"}
            and all(map(is_ports, run.values()))
            for run in runs
        )
        for runs in layout.values()
    )


def _unused_key(stem: str, used: Mapping[str, Any]) -> str:
    """``stem``, or ``stem#2``, ``stem#3``... when port names make two keys collide."""
    key, count = stem, 1
    while key in used:
        count += 1
        key = f"{stem}#{count}"
    return key


def _storable(value: Any, where: str) -> torch.Tensor:
    """A plain, contiguous CPU copy owning its storage (safetensors refuses shared storage)."""
    try:
        tensor = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(
            f"example value of {where} is a {type(value).__name__}, not a tensor; pass "
            "torch tensors (or NumPy arrays)"
        ) from e
    with torch._C.DisableTorchFunctionSubclass():  # never record these copies into a trace
        plain = tensor.detach().as_subclass(torch.Tensor)
        return plain.to("cpu").contiguous().clone()
