"""compile_graph() does each phase once and says what each cost: the ONNX exporter leaves the
onnx package unimported where nothing needs it, scripting skips the fx Graph attribute, and the
garbage collector walks only the compile's own objects while it runs."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
import torch
from support.eager import assert_matches_eager, export_function

import leapp
import leapp.export
from leapp.export import exporter_scope, jit

ROOT = Path(__file__).resolve().parents[2]


def test_onnx_export_and_validation_leave_the_onnx_package_unimported(tmp_path):
    script = textwrap.dedent(
        f"""
        import sys
        import torch
        from support.eager import export_function
        layer = torch.nn.Linear(9, 6)
        compiled = export_function(
            {str(tmp_path)!r}, lambda obs: torch.tanh(layer(obs)), {{"obs": torch.randn(9)}},
            "onnx",
        )
        assert compiled.report.ok and compiled.spec.model("node").parameters.backend == "onnx"
        print("onnx imported:", "onnx" in sys.modules)
        """
    )
    # run from test/, whose support package the script imports (``-c`` puts the current
    # folder first on its path)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT / "test",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "onnx imported: False" in done.stdout


def test_onnx_export_runs_torchs_function_step_where_a_custom_domain_function_is_registered(
    tmp_path, monkeypatch
):
    """Torch's step inserts onnxscript functions of custom-domain ops: with one registered, the
    scope lets it run; without, it returns the bytes as torch's step would."""
    from torch.onnx._internal.torchscript_exporter import onnx_proto_utils

    calls = []
    original = onnx_proto_utils._add_onnxscript_fn

    def recorded(model_bytes, custom_opsets):
        calls.append(len(model_bytes))
        return original(model_bytes, custom_opsets)

    monkeypatch.setattr(onnx_proto_utils, "_add_onnxscript_fn", recorded)
    # The scope sees a process that never imported onnx (this one has).
    monkeypatch.setattr(exporter_scope, "sys", types.SimpleNamespace(modules={}))
    export_function(tmp_path / "plain", lambda x: x * 3.0, {"x": torch.randn(4)}, "onnx")
    assert not calls and not exporter_scope._custom_functions_registered()

    def symbolic(g, x):
        return g.op("leapp_test::Twice", x)

    symbolic.to_function_proto = lambda: None  # what an onnxscript function has
    torch.onnx.register_custom_op_symbolic("leapp_test::twice", symbolic, 9)
    try:
        assert exporter_scope._custom_functions_registered()
        compiled = export_function(tmp_path, lambda x: x * 3.0, {"x": torch.randn(4)}, "onnx")
    finally:
        torch.onnx.unregister_custom_op_symbolic("leapp_test::twice", 9)
    assert calls, "torch's step did not run although a custom-domain function is registered"
    assert_matches_eager(compiled, lambda x: x * 3.0, lambda: {"x": torch.randn(4)})


def test_scripting_leaves_the_graph_module_as_it_was_and_matches_eager(tmp_path):
    def fn(x, y):
        return torch.clamp(x * 2 - y, -1.0, 1.0)

    gm = torch.fx.symbolic_trace(fn)
    before = dict(vars(gm))
    artifact = jit.export(
        gm,
        (torch.randn(5), torch.randn(5)),
        node="node",
        input_names=("x", "y"),
        output_names=("out",),
        directory=tmp_path,
    )
    assert "__jit_ignored_attributes__" not in vars(gm) and gm._graph is before["_graph"]
    module = torch.jit.load(str(tmp_path / artifact.model_path))
    assert not hasattr(module, "_graph")
    for _ in range(20):
        x, y = torch.randn(5), torch.randn(5)
        torch.testing.assert_close(module(x, y), fn(x, y), rtol=0, atol=0)


def test_compile_graph_reports_the_cost_of_each_phase(tmp_path):
    compiled = export_function(
        tmp_path, lambda x: torch.tanh(x * 2.0), {"x": torch.randn(4)}, "onnx"
    )
    timings = compiled.timings
    for phase in ("imports", "graphs", "checksums", "examples", "spec", "validation", "total"):
        assert timings[phase] >= 0.0, phase
    for phase in ("torch.onnx.export", "agreement", "inputs"):
        assert timings[f"node/{phase}"] >= 0.0, phase
    assert timings["node"] >= timings["node/torch.onnx.export"]
    assert timings["total"] >= timings["export"] >= timings["node"]


def test_compile_sets_older_objects_aside_from_the_collector_only_while_it_runs(
    tmp_path, monkeypatch
):
    seen = []
    export_node = leapp.export.export_node

    def recording(*args, **kwargs):
        seen.append(gc.get_freeze_count())
        return export_node(*args, **kwargs)

    monkeypatch.setattr(leapp.export, "export_node", recording)
    assert gc.get_freeze_count() == 0
    layer = torch.nn.Linear(3, 2)
    compiled = export_function(tmp_path, lambda x: layer(x), {"x": torch.randn(3)}, "onnx")
    assert seen and all(count > 0 for count in seen), seen
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    assert_matches_eager(compiled, lambda x: layer(x), lambda: {"x": torch.randn(3)})
    leapp.start("empty", save_path=tmp_path)
    leapp.stop()
    with pytest.raises(leapp.GraphError, match="recorded no nodes"):
        leapp.compile_graph()
    assert gc.get_freeze_count() == 0  # put back when the compile fails too


def test_compile_keeps_a_freeze_of_the_caller_and_a_collector_turned_off(tmp_path):
    gc.freeze()
    try:
        export_function(tmp_path / "frozen", lambda x: x * 2.0, {"x": torch.randn(4)}, "onnx")
        assert gc.get_freeze_count() > 0  # not unfrozen by the compile (freed ones leave it)
    finally:
        gc.unfreeze()
    gc.disable()
    try:
        export_function(tmp_path / "off", lambda x: x * 2.0, {"x": torch.randn(4)}, "onnx")
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()
