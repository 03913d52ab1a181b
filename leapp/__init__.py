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

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from leapp import annotate
from leapp.compilation import GraphConfigs
from leapp.errors import (
    ExportError,
    GraphError,
    LeappError,
    PipelineError,
    SessionError,
    SpecError,
    TraceError,
    ValidationError,
)
from leapp.graph.listing import format_graph
from leapp.session import start, stop
from leapp.trace.array import TracedArray
from leapp.trace.recorder import FrozenValueWarning
from leapp.trace.tensor import TracedTensor
from leapp.version import __version__ as __version__

if TYPE_CHECKING:
    from leapp.compilation import CompiledPipeline
    from leapp.run.pipeline import Pipeline

__all__ = [
    "ExportError",
    "FrozenValueWarning",
    "GraphConfigs",
    "GraphError",
    "LeappError",
    "Pipeline",
    "PipelineError",
    "SessionError",
    "SpecError",
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
    ``pipeline.configs`` (e.g. ``GraphConfigs(frequency=50)``). ``visualize=True`` (NVIDIA
    LEAPP's pipeline picture) is refused: leapp draws no picture yet; print a node's graph
    with :func:`format_graph` or read the spec's ``pipeline`` section instead.
    """
    if visualize:
        raise LeappError(
            "leapp.compile_graph(visualize=True): leapp does not draw the pipeline picture yet; "
            "pass visualize=False (the default) and read the spec's pipeline section, or print "
            "a node's graph with leapp.format_graph(compiled.graphs[node])."
        )
    from leapp.compilation import compile_session
    from leapp.session import take_stopped

    session = take_stopped()
    return compile_session(
        session,
        validate=validate,
        rtol=rtol,
        atol=atol,
        strict=strict,
        graph_configs=graph_configs,
    )


def __getattr__(name: str) -> Any:
    # The runtime pulls in onnxruntime; load it only when asked for.
    if name == "Pipeline":
        from leapp.run.pipeline import Pipeline

        return Pipeline
    if name == "spec":
        import importlib

        return importlib.import_module("leapp.spec")
    raise AttributeError(f"module 'leapp' has no attribute {name!r}")
