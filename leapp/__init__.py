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

from typing import TYPE_CHECKING, Any

from leapp import annotate
from leapp.compilation import GraphConfigs, compile_graph
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
