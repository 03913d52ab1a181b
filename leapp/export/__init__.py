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

This module only re-exports: :func:`export_node` is in :mod:`leapp.export.node_export`, the
backends in ``jit``, ``onnx``, ``pt2`` and ``custom``, and the pieces they share in
``artifact`` (what an export writes), ``plain_graph`` (the graph every backend compiles),
``phase_times`` and ``failure`` (an exporter's error in the user's terms).
"""

from leapp.export.artifact import ALIASES, BACKENDS, Artifact
from leapp.export.node_export import export_node
from leapp.export.phase_times import PhaseTimes

__all__ = ["ALIASES", "BACKENDS", "Artifact", "PhaseTimes", "export_node"]
