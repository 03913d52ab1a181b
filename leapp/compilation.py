"""``leapp.compile_graph``: turn a stopped session into an export folder.

For every node, in the order the nodes completed: build its export graph, write its artifact;
then wire the edges, write ``<name>_examples.safetensors`` and ``<name>.yaml``, and re-run every
artifact on the captured examples.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx

from leapp.errors import GraphError, SpecError
from leapp.graph.flows import pipeline_section, save_initial_values
from leapp.graph.node_graph import ExportGraph, export_graph, recorded_graph
from leapp.graph.port_names import PortNaming
from leapp.trace.pipeline.recording import Recording
from leapp.trace.tensors.node_trace import NodeTrace

logger = logging.getLogger(__name__)

__all__ = ["CompiledPipeline", "GraphConfigs", "compile_graph", "compile_session"]


@dataclass(frozen=True)
class GraphConfigs:
    """Pipeline-level settings written to ``pipeline.configs``: ``frequency`` in Hz, and
    ``node_frequency``, the nodes that run at rates of their own (``{node: Hz}``; ours,
    written as an extra key of ``configs``, which LEAPP's readers ignore; with NVIDIA's
    ``GraphConfigs`` the same key is ``extra={"node_frequency": {...}}``)."""

    frequency: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    node_frequency: Mapping[str, float] | None = None

    def as_dict(self) -> dict[str, Any]:
        values: dict[str, Any] = dict(self.extra)
        if self.frequency is not None:
            values["frequency"] = self.frequency
        if self.node_frequency is not None:
            values["node_frequency"] = dict(self.node_frequency)
        return values


@dataclass(frozen=True, eq=False)
class CompiledPipeline(Mapping[str, bool]):
    """What ``compile_graph`` produced: the spec (with its path), graphs, validation report.

    It also reads as NVIDIA LEAPP's result, ``{node: passed}`` over the validated nodes
    (``all(leapp.compile_graph().values())``), and is truthy unless an artifact failed
    validation (only possible with ``strict=False``).

    ``timings`` are seconds: ``"total"``, ``"export"`` (everything before validation), one
    entry per node (its export) and ``"<node>/<phase>"`` for the phases its backend reported
    (``"torch.jit"``, ``"torch.onnx.export"``, ``"agreement"``, ...), and the phases of the
    pipeline: ``"imports"``, ``"previous export"``, ``"graphs"``, ``"checksums"``,
    ``"examples"``, ``"spec"``, ``"validation"``, ``"recorded graphs"``. The first compile of
    a process also pays for the modules each phase imports first (torch.onnx, ONNX Runtime,
    PyYAML, ...).
    """

    spec: Any  # leapp.spec.Spec
    graphs: Mapping[str, fx.GraphModule]  # as recorded (pruned), for reading
    report: Any = None  # leapp.run.validation.ValidationReport, when validated
    timings: Mapping[str, float] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.spec.path

    @property
    def _passed(self) -> dict[str, bool]:
        if self.report is None:
            return {}
        failed = {failure.node for failure in self.report.failures}
        return {node: node not in failed for node in self.report.checked}

    def __getitem__(self, node: str) -> bool:
        passed = self._passed
        if node not in passed:
            raise KeyError(
                f"node {node!r} was not validated (validated: {sorted(passed)}); nodes without "
                "artifact or samples, and every node with validate=False, are not in the result"
            )
        return passed[node]

    def __iter__(self) -> Iterator[str]:
        return iter(self._passed)

    def __len__(self) -> int:
        return len(self._passed)

    def __bool__(self) -> bool:
        return self.report is None or self.report.ok


def compile_graph(
    validate: bool = True,
    rtol: float = 1e-3,
    atol: float = 1e-5,
    strict: bool = True,
    graph_configs: GraphConfigs | Mapping[str, Any] | None = None,
    *,
    visualize: bool = False,
    dry_run: bool = False,
) -> CompiledPipeline:
    """Export the stopped session to ``<save_path>/<name>/`` and check the artifacts.

    Writes one artifact per node (as each node's ``export_with`` asked), ``<name>.yaml`` and
    ``<name>_examples.safetensors``. With ``validate`` every artifact is re-run on the values
    captured while tracing and compared within ``rtol``/``atol``; with ``strict`` a mismatch
    raises :class:`ValidationError` (else it is logged). ``graph_configs`` lands in
    ``pipeline.configs`` (e.g. ``GraphConfigs(frequency=50)``).

    ``visualize=True`` also writes ``<name>.png`` and ``<name>.svg`` next to the YAML, drawn
    from the spec just written: one card per node (name, backend, input ports left, output
    ports right, each with dtype and shape), in columns by data-flow depth; data edges solid,
    feedback edges and states (a node's feedback to itself) dashed in their own colours;
    pipeline inputs and outputs as tags with their ``node/port`` keys; a legend. It needs Pillow
    (``pip install 'leapp_ros[picture]'``), checked before anything is exported. Without it, a
    picture left by an earlier export of the same pipeline is removed, so the folder never shows
    a stale one. To draw an existing export:
    ``leapp.spec.picture.write_picture(leapp.spec.load(folder))``.

    ``dry_run=True`` (LEAPP's keyword) writes everything but the artifacts: the spec lists
    every node with ``model_path`` and ``backend`` null, and nothing is validated. A session
    started with ``leapp.start(..., dry_run=True)`` is always compiled so.
    """
    from leapp.session import take_stopped

    if visualize:
        from leapp.spec.picture import require_pillow

        require_pillow()  # before the session is taken: after installing Pillow, call again
    session = take_stopped()
    compiled = compile_session(
        session,
        validate=validate,
        rtol=rtol,
        atol=atol,
        strict=strict,
        graph_configs=graph_configs,
        dry_run=dry_run,
    )
    png = compiled.path.with_name(f"{compiled.spec.name}.png")
    if visualize:
        from leapp.spec.picture import write_picture

        files = write_picture(compiled.spec, png)
        logger.info("pipeline %r: drew %s and %s", compiled.spec.name, files.png, files.svg)
    else:
        for earlier in (png, png.with_suffix(".svg")):
            if earlier.is_file():
                earlier.unlink()
                logger.info("pipeline %r: removed the earlier %s", compiled.spec.name, earlier)
    return compiled


@contextlib.contextmanager
def _collector_spares_older_objects() -> Iterator[None]:
    """While a pipeline compiles, the garbage collector looks only at objects made meanwhile.

    A compile imports torch.onnx and ONNX Runtime and builds graphs, protos and sessions:
    enough new long-lived objects to start one full collection, which then walks every object
    of the process, torch's included: a large share of a small pipeline's ``compile_graph()``
    (figures: docs, explanation, performance). ``gc.freeze()`` sets the objects that
    existed before aside for the duration and ``gc.unfreeze()`` puts them back into the oldest
    generation, so the compile's own garbage, cycles included, is still collected as it goes,
    and nothing older is lost: it is looked at again by the next full collection after the
    compile (or the one at interpreter exit). Left as it is where the collector is off or the
    process froze objects itself (unfreezing would undo its freeze).
    """
    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@_collector_spares_older_objects()
def compile_session(
    recording: Recording,
    *,
    validate: bool,
    rtol: float,
    atol: float,
    strict: bool,
    graph_configs: GraphConfigs | Mapping[str, Any] | None,
    dry_run: bool = False,
) -> CompiledPipeline:
    started = time.perf_counter()
    from leapp.export import PhaseTimes, export_node

    phases = PhaseTimes()
    with phases("imports"):  # leapp's spec modules, the first time a process compiles
        from leapp import spec as spec_module
        from leapp.spec import examples as example_file

    if not recording.order:
        raise GraphError(
            f"pipeline {recording.name!r} recorded no nodes: annotate at least one node between "
            "leapp.start() and leapp.stop()."
        )
    directory = recording.save_path / recording.name
    directory.mkdir(parents=True, exist_ok=True)
    with phases("previous export"):
        _remove_previous_export(directory, recording.name)

    traced = not getattr(recording, "dry_run", False)  # a dry run recorded no graphs
    dry_run = dry_run or not traced
    firsts = {node: recording.runs[node][0] for node in recording.order}
    with phases("graphs"):
        graphs = {node: _export_graph(trace, traced) for node, trace in firsts.items()}
    backends = {node: None if dry_run else trace.export_with for node, trace in firsts.items()}
    names = {
        node: PortNaming.of(backends[node], graphs[node].inputs, graphs[node].outputs)
        for node in firsts
    }
    models, timings = [], {}
    for node, trace in firsts.items():
        began = time.perf_counter()
        prepared = graphs[node]
        artifact = export_node(
            prepared.module,
            prepared.example_inputs,
            node=node,
            input_names=tuple(names[node].inputs.values()),
            output_names=tuple(names[node].outputs.values()),
            backend=backends[node],
            directory=directory,
        )
        timings[node] = time.perf_counter() - began
        timings.update({f"{node}/{phase}": t for phase, t in artifact.timings.items()})
        logger.info("node %r: exported with %s in %.3f s", node, artifact.backend, timings[node])
        with phases("checksums"):
            models.append(
                _model_spec(spec_module, trace, prepared, names[node], artifact, directory)
            )

    with phases("examples"):
        if isinstance(graph_configs, GraphConfigs):
            configs = graph_configs.as_dict()
        else:
            configs = dict(graph_configs or {})
        pipeline = pipeline_section(spec_module, recording, firsts, graphs, names, configs)
        samples = {
            node: [_sample(example_file, run, names[node]) for run in recording.cached_runs(node)]
            for node in recording.order
        }
        example_file.save_examples(directory / pipeline.examples, samples)
        if pipeline.initial_values:
            save_initial_values(directory, pipeline, firsts, names)
    with phases("spec"):
        spec = spec_module.Spec(
            name=recording.name,
            models=tuple(models),
            pipeline=pipeline,
            system=spec_module.system_information(),
        )
        spec = spec_module.dump(spec, directory / f"{recording.name}.yaml")
    timings["export"] = time.perf_counter() - started

    report = None
    if validate and not dry_run:
        from leapp.run.validation import validate_export

        with phases("validation"):
            report = validate_export(spec, rtol=rtol, atol=atol)
        if strict:
            report.raise_for_failures()
        for failure in report.failures:
            logger.warning("validation: %s", failure)
    with phases("recorded graphs"):
        recorded = {node: recorded_graph(t) for node, t in firsts.items() if traced}
    timings.update(phases.seconds)
    timings["total"] = time.perf_counter() - started
    return CompiledPipeline(spec=spec, graphs=recorded, report=report, timings=timings)


def _export_graph(trace: Any, traced: bool) -> ExportGraph:
    """The node's export graph; a dry run's node has no graph, only its ports."""
    if traced:
        return export_graph(trace)
    return ExportGraph(None, tuple(trace.inputs), (), tuple(trace.outputs), ())


def _model_spec(
    spec_module, trace: NodeTrace, prepared: ExportGraph, names: PortNaming, artifact, directory
):
    md5 = sha256 = None
    if artifact.model_path is not None:
        md5, sha256 = spec_module.file_checksums(directory / artifact.model_path)
    warp = {}  # ours, ignored by LEAPP readers: the node's Warp archive and its checksums
    if artifact.warp_archive is not None:
        warp_md5, warp_sha256 = spec_module.file_checksums(directory / artifact.warp_archive)
        warp = {
            "warp_archive": artifact.warp_archive,
            "warp_md5sum": warp_md5,
            "warp_sha256sum": warp_sha256,
        }
    outputs = tuple(
        _port(
            spec_module, names.outputs[n], trace.output_examples[n], trace.output_semantics.get(n)
        )
        for n in prepared.outputs
    )
    if artifact.backend == "onnx":  # the model returns complex outputs as real pairs
        from leapp.spec.pairs import as_pairs

        outputs = tuple(map(as_pairs, outputs))
    return spec_module.ModelSpec(
        name=trace.node,
        inputs=tuple(
            _port(
                spec_module, names.inputs[n], trace.input_examples[n], trace.input_semantics.get(n)
            )
            for n in prepared.inputs
        ),
        outputs=outputs,
        parameters=spec_module.ModelParameters(
            model_path=artifact.model_path,
            md5sum=md5,
            sha256sum=sha256,
            backend=artifact.backend,
            warp_segments=artifact.warp_segments,
            opset_version=artifact.opset_version,
            torch_version=artifact.torch_version,
            extra=warp,
        ),
    )


def _port(spec_module, name: str, example: torch.Tensor, semantics: Mapping[str, Any] | None):
    """The port's spec entry; ``semantics`` (a TensorSemantics's spec fields) adds ``kind``,
    ``element_names``, ``temporal_period_ms`` and its extra fields."""
    fields = dict(semantics or {})
    names = fields.pop("element_names", None)
    period = fields.pop("temporal_period_ms", None)
    return spec_module.TensorSpec(
        name=name,
        dtype=str(example.dtype).removeprefix("torch."),
        shape=tuple(example.shape),
        kind=fields.pop("kind", None),
        element_names=None if names is None else tuple(map(_axis_names, names)),
        temporal_period_ms=None if period is None else float(period),
        extra=fields,
    )


def _axis_names(entry: Any) -> Any:
    return tuple(entry) if isinstance(entry, list) else entry  # a marker string or None as is


def _sample(example_file, run: NodeTrace, names: PortNaming):
    """One run's examples under the spec's port names."""
    return example_file.NodeSample(
        inputs={named: run.input_examples[port] for port, named in names.inputs.items()},
        outputs={named: run.output_examples[port] for port, named in names.outputs.items()},
    )


def _remove_previous_export(directory: Path, name: str) -> None:
    """Delete the files an earlier export of this pipeline wrote, so none go stale."""
    from leapp import spec as spec_module

    yaml_path = directory / f"{name}.yaml"
    if not yaml_path.exists():
        return
    try:
        old = spec_module.load(yaml_path, verify_checksums=False)
    except SpecError:
        logger.warning("replacing unreadable spec %s", yaml_path)
        yaml_path.unlink()
        return
    names = [m.parameters.model_path for m in old.models]
    archives = [m.parameters.extra.get("warp_archive") for m in old.models]
    names += [archive for archive in archives if isinstance(archive, str)]
    names += [old.pipeline.initial_values, old.pipeline.examples, yaml_path.name]
    for file_name in filter(None, names):
        target = directory / file_name
        if target.parent == directory and target.is_file():
            target.unlink()
