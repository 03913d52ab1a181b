"""ONNX backend: export the node's graph to ``<node>.onnx`` (opset 20).

Exporter choice, measured on this project's 2-core CPU with torch 2.13: the TorchScript-based
exporter (``torch.onnx.export(..., dynamo=False)``) writes the seed's Linear+tanh policy in about
0.15 s for the first export of a process (mostly registering its op table and importing onnx)
and 2-3 ms for every later one. The ``torch.export``-based exporter needs the onnxscript package
(not a dependency of leapp) and takes seconds for the same graph. Our graphs are static and
already pure, which is exactly what the TorchScript-based exporter handles well, so it is used.
Its highest supported opset is 20 (the version NVIDIA's LEAPP writes as well); higher requests
fall back to 20 with a warning, so 20 is asked for explicitly.

The exporter's deprecation warning is silenced here and logged at debug level. ``onnx.checker``
is not run (it costs time and the exporter's output is valid); ``validate_export`` re-runs every
artifact in ONNX Runtime on the traced samples instead, which is the stronger check.

ONNX forbids a graph input and output with the same name. When a port is both an input and an
output of the node (state such as ``h`` fed back on the next tick), the ONNX names are
``<port>_in`` and ``<port>_out``, as NVIDIA's LEAPP writes them; the runtime matches such names
back to their ports.
"""

from __future__ import annotations

import logging
import time
import warnings
from pathlib import Path

import torch
import torch.fx

from leapp.errors import ExportError
from leapp.export import Artifact, summarize_error

logger = logging.getLogger(__name__)

OPSET_VERSION = 20
"""The opset every ONNX artifact is written with (the TorchScript-based exporter's maximum)."""


def export(
    graph_module: torch.fx.GraphModule,
    example_inputs: tuple[torch.Tensor, ...],
    *,
    node: str,
    input_names: tuple[str, ...],
    output_names: tuple[str, ...],
    directory: Path,
) -> Artifact:
    """Export ``graph_module`` run on ``example_inputs`` as ``<directory>/<node>.onnx``.

    Graph inputs and outputs are named after the ports (see the module docstring for the one
    exception). Shapes are static: those of ``example_inputs``.
    """
    file_name = f"{node}.onnx"
    onnx_inputs, onnx_outputs = onnx_port_names(input_names, output_names)
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            torch.onnx.export(
                graph_module,
                example_inputs,
                str(directory / file_name),
                input_names=list(onnx_inputs),
                output_names=list(onnx_outputs),
                opset_version=OPSET_VERSION,
                do_constant_folding=True,
                dynamo=False,
            )
        except OSError as e:
            raise ExportError(
                f"node {node!r}: cannot write {directory / file_name}: {e}; check the export "
                "folder"
            ) from e
        except Exception as e:
            raise ExportError(
                f"node {node!r} (inputs {list(input_names)}) cannot be exported to ONNX: "
                f"{summarize_error(e)}. Export this node with export_with='jit' or 'pt2' instead"
            ) from e
    for warning in caught:
        logger.debug("node %s: torch.onnx.export warned: %s", node, warning.message)
    logger.debug("node %s: torch.onnx.export %.3f s", node, time.perf_counter() - started)
    return Artifact(model_path=file_name, backend="onnx", opset_version=OPSET_VERSION)


def onnx_port_names(
    input_names: tuple[str, ...], output_names: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ONNX input and output names: the port names, with ``<port>_in`` / ``<port>_out``
    for a port that is both an input and an output of the node."""
    both = set(input_names) & set(output_names)
    taken = (set(input_names) | set(output_names)) - both

    def rename(name: str, suffix: str) -> str:
        if name not in both:
            return name
        renamed = f"{name}{suffix}"
        while renamed in taken:
            renamed += "_"
        taken.add(renamed)
        return renamed

    inputs = tuple(rename(name, "_in") for name in input_names)
    outputs = tuple(rename(name, "_out") for name in output_names)
    return inputs, outputs
