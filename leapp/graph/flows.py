"""The spec's ``pipeline`` section of a recording: its flows, external ports, initial values.

:func:`pipeline_section` turns how every input was fed (:func:`leapp.graph.edges.classify_inputs`)
into ``data_flow``, ``feedback_flow``, ``inputs`` and ``outputs``, with each port under the name
the spec gives it (:class:`~leapp.graph.port_names.PortNaming`: ``<port>_in`` / ``<port>_out``
for a port both an input and an output of an ONNX node, as LEAPP names them);
:func:`save_initial_values` writes the first-tick values of the feedback inputs under the same
keys (``policy/h_state_in``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from leapp.errors import GraphError
from leapp.graph.edges import classify_inputs
from leapp.graph.port_names import PortNaming

__all__ = ["pipeline_section", "save_initial_values"]


def pipeline_section(
    spec_module: Any,
    recording: Any,
    firsts: Mapping[str, Any],
    graphs: Mapping[str, Any],
    names: Mapping[str, PortNaming],
    configs: Mapping[str, Any],
) -> Any:
    """The :class:`~leapp.spec.PipelineSpec` of ``recording`` (its first runs ``firsts``, their
    export graphs ``graphs`` and port names ``names``)."""
    data_flow: dict[str, list[str]] = {}
    feedback_flow: dict[str, list[str]] = {}
    inputs: dict[str, list[str]] = {}
    consumed: set[str] = set()
    feeds = classify_inputs(recording)
    for node, trace in firsts.items():
        for port in graphs[node].inputs:
            feed = feeds[node][port]
            named = names[node].inputs[port]
            if feed.kind == "external":
                inputs.setdefault(node, []).append(named)
                continue
            producer, output = feed.source.split("/")
            _check_edge(firsts[producer], output, trace, port)
            source = f"{producer}/{names[producer].outputs[output]}"
            edges = data_flow if feed.kind == "data_flow" else feedback_flow
            edges.setdefault(source, []).append(f"{node}/{named}")
            consumed.add(source)
    outputs = {
        node: [
            names[node].outputs[p]
            for p in graphs[node].outputs
            if f"{node}/{names[node].outputs[p]}" not in consumed
        ]
        for node in firsts
    }
    return spec_module.PipelineSpec(
        data_flow={k: tuple(v) for k, v in data_flow.items()},
        feedback_flow={k: tuple(v) for k, v in feedback_flow.items()},
        inputs={k: tuple(v) for k, v in inputs.items()},
        outputs={k: tuple(v) for k, v in outputs.items() if v},
        initial_values=f"{recording.name}_initial_values.safetensors" if feedback_flow else None,
        examples=f"{recording.name}_examples.safetensors",
        configs=dict(configs),
    )


def save_initial_values(
    directory: Path, pipeline: Any, firsts: Mapping[str, Any], names: Mapping[str, PortNaming]
) -> None:
    """First-tick values of every feedback input, keyed ``"<node>/<port as the spec names
    it>"``."""
    from safetensors.torch import save_file

    values = {}
    for targets in pipeline.feedback_flow.values():
        for target in targets:
            node, named = target.split("/")
            port = names[node].input_port(named)
            values[target] = firsts[node].input_examples[port].contiguous()
    save_file(values, str(directory / pipeline.initial_values))


def _check_edge(producer: Any, out_port: str, consumer: Any, in_port: str) -> None:
    out = producer.output_examples[out_port]
    into = consumer.input_examples[in_port]
    if tuple(out.shape) != tuple(into.shape) or out.dtype != into.dtype:
        raise GraphError(
            f"edge {producer.node}/{out_port} -> {consumer.node}/{in_port}: the output is "
            f"{out.dtype} {list(out.shape)} but the input is {into.dtype} {list(into.shape)}; "
            "make both ends agree."
        )
