"""Port names an artifact gives a node's ports: LEAPP's ``<name>_in`` / ``<name>_out`` rule.

ONNX has one namespace for a graph's inputs and outputs, so a port name used for both an input
and an output of one node (a state ``h`` fed back to itself, or ``joint_pos`` in and out) cannot
name both. NVIDIA's LEAPP renames such a pair ``<name>_in`` / ``<name>_out`` for every ONNX
node, in the artifact *and* in the spec: the spec's ports, the pipeline's ``data_flow``,
``feedback_flow``, ``inputs`` and ``outputs`` keys, the initial values' keys
(``policy/h_state_in``) and the ROS topics that follow from them. TorchScript and pt2 artifacts
take arguments by position and keep the names.

::

    artifact_port_names("onnx", ("obs", "h"), ("action", "h"))
    # (("obs", "h_in"), ("action", "h_out"))
    artifact_port_names("jit", ("obs", "h"), ("action", "h"))
    # (("obs", "h"), ("action", "h"))

Readers accept both spellings: an export of ours from before this rule names the pair ``h``
in the spec and ``h_in`` / ``h_out`` in the ONNX model (:mod:`leapp.run.onnx_runner` matches
either).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ONNX_BACKENDS", "PortNaming", "artifact_port_names", "onnx_port_names"]

#: ``export_with`` values whose artifact is an ONNX model (ours and NVIDIA LEAPP's names).
ONNX_BACKENDS = frozenset({"onnx", "onnx-torchscript", "onnx-dynamo"})


def artifact_port_names(
    backend: Any, input_names: Sequence[str], output_names: Sequence[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names the spec and the artifact of a node exported with ``backend`` give its
    input and output ports: :func:`onnx_port_names` for an ONNX backend, else unchanged."""
    if isinstance(backend, str) and backend in ONNX_BACKENDS:
        return onnx_port_names(input_names, output_names)
    return tuple(input_names), tuple(output_names)


def onnx_port_names(
    input_names: Sequence[str], output_names: Sequence[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The port names, with ``<port>_in`` / ``<port>_out`` for a port that is both an input
    and an output (more underscores while that name is another port's)."""
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


@dataclass(frozen=True)
class PortNaming:
    """The spec's (and the artifact's) name of each recorded port of one node."""

    inputs: Mapping[str, str]  # recorded input port -> its name in the spec
    outputs: Mapping[str, str]  # recorded output port -> its name in the spec

    @classmethod
    def of(cls, backend: Any, inputs: Sequence[str], outputs: Sequence[str]) -> PortNaming:
        """The naming of a node exported with ``backend`` (:func:`artifact_port_names`)."""
        named_inputs, named_outputs = artifact_port_names(backend, inputs, outputs)
        return cls(
            dict(zip(inputs, named_inputs, strict=True)),
            dict(zip(outputs, named_outputs, strict=True)),
        )

    def input_port(self, name: str) -> str:
        """The recorded input port the spec calls ``name``."""
        return next(port for port, spec_name in self.inputs.items() if spec_name == name)
