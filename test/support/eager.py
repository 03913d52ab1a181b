"""Trace a function as one node, export it, and compare the artifact with eager PyTorch."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

import leapp
from leapp import annotate

FRESH_SAMPLES = 50


def export_module(module, examples, backend, directory, inputs, outputs, node="node"):
    """Export ``module`` (fx-traced, eval mode) as one node; returns (graph module, artifact)."""
    from leapp.export import export_node

    graph_module = torch.fx.symbolic_trace(module.eval())
    artifact = export_node(
        graph_module,
        examples,
        node=node,
        input_names=inputs,
        output_names=outputs,
        backend=backend,
        directory=directory,
    )
    return graph_module, artifact


def export_function(
    tmp_path,
    fn: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]],
    inputs: Mapping[str, torch.Tensor],
    backend: str | None,
    node: str = "node",
    name: str = "pipe",
):
    """Trace ``fn(**traced inputs)`` as node ``node`` and export it with ``backend``.
    ``inputs`` are tensors or NumPy arrays (copied first: tracing must not touch them)."""
    leapp.start(name, save_path=tmp_path)
    copies = {k: v.clone() if isinstance(v, torch.Tensor) else v.copy() for k, v in inputs.items()}
    traced = annotate.input_tensors(node, copies)
    traced = traced if isinstance(traced, tuple) else (traced,)
    result = fn(**dict(zip(inputs, traced, strict=True)))
    results = result if isinstance(result, tuple) else (result,)
    annotate.output_tensors(
        node, {f"out{i}": r for i, r in enumerate(results)}, export_with=backend
    )
    leapp.stop()
    return leapp.compile_graph()


def assert_matches_eager(
    compiled,
    fn: Callable,
    make_inputs: Callable[[], dict[str, torch.Tensor]],
    node: str = "node",
    samples: int = FRESH_SAMPLES,
    atol: float = 1e-5,
):
    """Run the exported artifact of ``node`` and eager ``fn`` on fresh inputs; they must agree."""
    from leapp.run.model import load_model

    model = load_model(compiled.spec, node)
    ports = [p.name for p in compiled.spec.model(node).inputs]
    for _ in range(samples):
        fresh = make_inputs()
        expected = fn(**{k: v.clone() for k, v in fresh.items()})
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = model.run([fresh[p].clone() for p in ports])
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=atol)
