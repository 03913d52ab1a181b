"""leapp: trace annotated PyTorch policy pipelines and export them node by node.

::

    import leapp
    from leapp import annotate

    leapp.start("torch_pipeline")
    obs = preprocess(state, velocity)  # annotated with annotate.input_tensors/output_tensors
    run_policy(policy, obs)
    leapp.stop()
    leapp.compile_graph()  # writes ./torch_pipeline/torch_pipeline.yaml and one artifact per node

    pipeline = leapp.Pipeline.load("torch_pipeline")
    outputs = pipeline.step({"preprocess/state": s, "preprocess/velocity": v})
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from leapp import annotate
from leapp.compilation import GraphConfigs
from leapp.errors import (
    ExportError,
    GraphError,
    LeappError,
    PipelineError,
    PortNameError,
    PortTypeError,
    SemanticsError,
    SessionError,
    SpecError,
    TraceError,
    ValidationError,
)
from leapp.graph.listing import format_graph
from leapp.semantics import InputKindEnum, OutputKindEnum, TemporalAxis, TensorSemantics
from leapp.session import start, stop
from leapp.trace.array import TracedArray
from leapp.trace.recorder import FrozenValueWarning
from leapp.trace.tensor import TracedTensor
from leapp.version import __version__ as __version__

if TYPE_CHECKING:
    from leapp.compilation import CompiledPipeline
    from leapp.run.inference import InferenceManager
    from leapp.run.pipeline import Pipeline

__all__ = [
    "ExportError",
    "FrozenValueWarning",
    "GraphConfigs",
    "GraphError",
    "InferenceManager",
    "InputKindEnum",
    "LeappError",
    "OutputKindEnum",
    "Pipeline",
    "PipelineError",
    "PortNameError",
    "PortTypeError",
    "SemanticsError",
    "SessionError",
    "SpecError",
    "TemporalAxis",
    "TensorSemantics",
    "TraceError",
    "TracedArray",
    "TracedTensor",
    "ValidationError",
    "annotate",
    "compile_graph",
    "format_graph",
    "start",
    "stop",
]

_logger = logging.getLogger(__name__)


def compile_graph(
    validate: bool = True,
    rtol: float = 1e-3,
    atol: float = 1e-5,
    strict: bool = True,
    graph_configs: GraphConfigs | Mapping[str, Any] | None = None,
    *,
    visualize: bool = False,
) -> CompiledPipeline:
    """Export the stopped session to ``<save_path>/<name>/`` and check the artifacts.

    Writes one artifact per node (as each node's ``export_with`` asked), ``<name>.yaml`` and
    ``<name>_examples.safetensors``. With ``validate`` every artifact is re-run on the values
    captured while tracing and compared within ``rtol``/``atol``; with ``strict`` a mismatch
    raises :class:`ValidationError` (else it is logged). ``graph_configs`` lands in
    ``pipeline.configs`` (e.g. ``GraphConfigs(frequency=50)``).

    ``visualize=True`` also writes ``<name>.png`` next to the YAML, drawn from the spec just
    written: one box per node (name, backend, input ports left, output ports right, each with
    dtype and shape), in columns by data-flow depth; data edges solid, feedback edges and
    states (a node's feedback to itself) dashed in their own colours; pipeline inputs and
    outputs as tags with their ``node/port`` keys. Without it, a picture left by an earlier
    export of the same pipeline is removed, so the folder never shows a stale one. To draw an
    existing export: ``leapp.spec.picture.write_picture(leapp.spec.load(folder))``.
    """
    from leapp.compilation import compile_session
    from leapp.session import take_stopped

    session = take_stopped()
    compiled = compile_session(
        session,
        validate=validate,
        rtol=rtol,
        atol=atol,
        strict=strict,
        graph_configs=graph_configs,
    )
    from leapp.spec.picture import write_picture

    picture = compiled.path.with_name(f"{compiled.spec.name}.png")
    if visualize:
        write_picture(compiled.spec, picture)
        _logger.info("pipeline %r: drew %s", compiled.spec.name, picture)
    elif picture.is_file():
        picture.unlink()
        _logger.info("pipeline %r: removed the earlier picture %s", compiled.spec.name, picture)
    return compiled


def __getattr__(name: str) -> Any:
    # The runtime pulls in onnxruntime; load it only when asked for.
    if name == "Pipeline":
        from leapp.run.pipeline import Pipeline

        return Pipeline
    if name == "InferenceManager":  # NVIDIA LEAPP's runtime class, over Pipeline
        from leapp.run.inference import InferenceManager

        return InferenceManager
    if name == "spec":
        import importlib

        return importlib.import_module("leapp.spec")
    raise AttributeError(f"module 'leapp' has no attribute {name!r}")
