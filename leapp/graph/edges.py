"""Where every node input comes from: outside, a producer in the same tick, or the last tick.

The tracer records, for each run of each node, which published output fed each input. This
module turns those observations into the pipeline's edges:

- an input fed on the first run by a node that completed earlier is a ``data_flow`` edge;
- an input declared with ``annotate.state_tensors`` is a ``feedback_flow`` edge from the node to
  itself;
- an input that comes from outside on the first run and, on every later run, from an output of
  the same node or of a node that completes later in the loop, is a ``feedback_flow`` edge; its
  first-run value is the initial value;
- an input never fed by a node is an external input (``pipeline.inputs``).

Anything else (a port fed by different producers on different runs) cannot be one exported
graph and is reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from leapp.errors import GraphError
from leapp.trace.pipeline.recording import Recording

__all__ = ["Feed", "classify_inputs"]


@dataclass(frozen=True)
class Feed:
    """How one input port is fed: ``kind`` is external, data_flow or feedback."""

    kind: str
    source: str | None = None  # "<node>/<output>" of the producer


def classify_inputs(recording: Recording) -> dict[str, dict[str, Feed]]:
    """``{node: {input port: Feed}}`` for every input of every node."""
    position = {node: index for index, node in enumerate(recording.order)}
    feeds: dict[str, dict[str, Feed]] = {}
    for node in recording.order:
        runs = recording.runs[node]
        feeds[node] = {}
        for port in runs[0].inputs:
            if port in runs[0].state_ports:
                feeds[node][port] = Feed("feedback", f"{node}/{port}")
                continue
            sources = [run.input_sources[port] for run in runs]
            feeds[node][port] = _classify(node, port, sources, position)
    return feeds


def _classify(node: str, port: str, sources: list, position: dict[str, int]) -> Feed:
    first, later = sources[0], sources[1:]
    keys = {s.key for s in later if s is not None}
    if first is not None:
        if any(s is None or s.key != first.key for s in later):
            raise _inconsistent(node, port, sources)
        return Feed("data_flow", first.key)
    if not keys:
        return Feed("external")
    if len(keys) > 1 or any(s is None for s in later):
        raise _inconsistent(node, port, sources)
    producer = later[0]
    if position[producer.node] < position[node]:
        raise GraphError(
            f"input {node}/{port} comes from outside the pipeline on the first run but from "
            f"{producer.key} (which runs before {node!r}) on later runs. Pass "
            f"{producer.key} on the first run as well, so it is one data_flow edge."
        )
    return Feed("feedback", producer.key)


def _inconsistent(node: str, port: str, sources: list) -> GraphError:
    seen = ", ".join(
        f"run {index}: {source.key if source is not None else 'outside'}"
        for index, source in enumerate(sources)
    )
    return GraphError(
        f"input {node}/{port} is fed from different places on different runs ({seen}); one "
        "exported graph needs one source per input. Feed it the same way on every run."
    )
