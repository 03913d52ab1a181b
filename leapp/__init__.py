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

import importlib
from typing import TYPE_CHECKING, Any

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
from leapp.version import __version__ as __version__

if TYPE_CHECKING:
    from leapp import annotate
    from leapp.compilation import GraphConfigs, compile_graph
    from leapp.graph.listing import format_graph
    from leapp.run.inference import InferenceManager
    from leapp.run.pipeline import Pipeline
    from leapp.semantics import InputKindEnum, OutputKindEnum, TemporalAxis, TensorSemantics
    from leapp.session import start, stop
    from leapp.trace.arrays.array import TracedArray
    from leapp.trace.tensors.recorder import FrozenValueWarning
    from leapp.trace.tensors.tensor import TracedTensor

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

# Public names loaded on first use (PEP 562), so that ``import leapp.spec`` and the ONNX
# runtime of a deployed node never import torch: name -> (module, attribute or None for the
# module itself).
_LAZY = {
    "annotate": ("leapp.annotate", None),
    "GraphConfigs": ("leapp.compilation", "GraphConfigs"),
    "compile_graph": ("leapp.compilation", "compile_graph"),
    "format_graph": ("leapp.graph.listing", "format_graph"),
    "InputKindEnum": ("leapp.semantics", "InputKindEnum"),
    "OutputKindEnum": ("leapp.semantics", "OutputKindEnum"),
    "TemporalAxis": ("leapp.semantics", "TemporalAxis"),
    "TensorSemantics": ("leapp.semantics", "TensorSemantics"),
    "start": ("leapp.session", "start"),
    "stop": ("leapp.session", "stop"),
    "TracedArray": ("leapp.trace.arrays.array", "TracedArray"),
    "FrozenValueWarning": ("leapp.trace.tensors.recorder", "FrozenValueWarning"),
    "TracedTensor": ("leapp.trace.tensors.tensor", "TracedTensor"),
    "Pipeline": ("leapp.run.pipeline", "Pipeline"),  # pulls in onnxruntime
    "InferenceManager": ("leapp.run.inference", "InferenceManager"),  # LEAPP's runtime class
    "spec": ("leapp.spec", None),
}


def __getattr__(name: str) -> Any:
    entry = _LAZY.get(name)
    if entry is None:
        raise AttributeError(f"module 'leapp' has no attribute {name!r}")
    module_name, attribute = entry
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
