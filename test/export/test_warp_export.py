"""Nodes with Warp segments exported (jit, pt2) and run through leapp.Pipeline: equal to the
eager Warp code on 50 fresh inputs; the Warp archive is in the spec and checked; onnx and
archives of another Warp version are refused with what to do."""

from __future__ import annotations

import json
import shutil
import zipfile

import numpy as np
import pytest
import torch
from support.eager import FRESH_SAMPLES, export_function
from support.warp import example, example_export_fixture, example_policy, kernels, wp  # noqa: F401

import leapp
from leapp import InferenceManager, annotate
from leapp.errors import ExportError, PipelineError, SpecError
from leapp.run.model import load_model
from leapp_ros.tools.cli import main as leapp_ros


def dynamics(x, m, p):
    """Torch and Warp in one node: an in-place Warp write into a traced tensor, mat33 and vec3
    arrays, an accumulation into a fresh wp.zeros, a torch operation between two runs of Warp
    calls, and a Warp array of the first run read by the second."""
    y = x * 2.0
    wp.launch(kernels.square_in_place, 4, inputs=[wp.from_torch(y)])
    moved = wp.zeros(3, dtype=wp.vec3)
    matrices, points = wp.from_torch(m, dtype=wp.mat33), wp.from_torch(p, dtype=wp.vec3)
    wp.launch(kernels.transform, 3, inputs=[matrices, points], outputs=[moved])
    total = wp.zeros(1, dtype=wp.float32)
    wp.launch(kernels.length_sum, 3, inputs=[moved], outputs=[total])
    z = torch.sin(y) + 1.0
    bias = wp.array([1.0, 2.0, 3.0, 4.0], dtype=wp.float32)
    out = wp.zeros(4, dtype=wp.float32)
    wp.launch(kernels.scale_add, 4, inputs=[wp.from_torch(z), 0.5, bias], outputs=[out])
    again = wp.zeros(1, dtype=wp.float32)
    wp.launch(kernels.length_sum, 3, inputs=[moved], outputs=[again])
    return wp.to_torch(out) * wp.to_torch(total), wp.to_torch(moved), wp.to_torch(again) - 1


def dynamics_inputs() -> dict[str, torch.Tensor]:
    return {"x": torch.randn(4), "m": torch.randn(3, 3, 3), "p": torch.randn(3, 3)}


@pytest.fixture(scope="module", params=["jit", "pt2"])
def dynamics_export(request, tmp_path_factory):
    backend = request.param
    folder = tmp_path_factory.mktemp(f"dynamics_{backend}")
    return export_function(folder, dynamics, dynamics_inputs(), backend, node="dyn"), backend


def test_warp_and_torch_in_one_node_match_eager_on_fresh_inputs_through_pipeline(
    dynamics_export,
):
    compiled, backend = dynamics_export
    assert compiled.spec.model("dyn").parameters.backend == backend
    pipeline = leapp.Pipeline.load(compiled.path)
    for _ in range(FRESH_SAMPLES):
        fresh = dynamics_inputs()
        expected = dynamics(**{k: v.clone() for k, v in fresh.items()})
        got = pipeline.step({f"dyn/{k}": v for k, v in fresh.items()})
        for port, value in zip(("out0", "out1", "out2"), expected, strict=True):
            torch.testing.assert_close(got[f"dyn/{port}"], value, rtol=1e-5, atol=1e-5)


def test_buffers_allocated_once_and_viewed_by_torch_once_export_as_eager(tmp_path):
    body = wp.empty(2, dtype=wp.vec3)  # allocated once, reused every tick
    body_view = wp.to_torch(body)  # one zero-copy torch view, made before the session

    def tick(q, v):
        q, v = annotate.input_tensors("pre", {"q": q, "v": v})
        quats, vectors = wp.from_torch(q, dtype=wp.quat), wp.from_torch(v, dtype=wp.vec3)
        wp.launch(kernels.rotate_into_body, 2, inputs=[quats, vectors], outputs=[body])
        out = v * 0.5 + body_view  # the view meets traced values: it stands for the array
        annotate.output_tensors("pre", {"out": out}, export_with="jit")
        return out

    def fresh():
        q = torch.randn(2, 4)
        return q / q.norm(dim=1, keepdim=True), torch.randn(2, 3)

    leapp.start("reused", save_path=tmp_path)
    for _ in range(3):
        tick(*fresh())
    leapp.stop()
    pipeline = leapp.Pipeline.load(leapp.compile_graph().path)  # validated on every tick
    for _ in range(FRESH_SAMPLES):
        q, v = fresh()
        got = pipeline.step({"pre/q": q, "pre/v": v})["pre/out"]
        torch.testing.assert_close(got, tick(q, v), rtol=1e-5, atol=1e-5)


def test_each_run_of_warp_calls_is_a_segment_in_the_spec_and_archive(dynamics_export):
    compiled, _ = dynamics_export
    parameters = compiled.spec.model("dyn").parameters
    assert parameters.warp_segments == 2
    with zipfile.ZipFile(compiled.path.parent / parameters.extra["warp_archive"]) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        names = set(archive.namelist())
    assert manifest["warp_version"] == wp.config.version
    assert [s["device"] for s in manifest["segments"]] == ["cpu", "cpu"]
    assert {"segment0.wrp", "segment1.wrp"} <= names
    assert any(n.startswith("segment0_modules/") and n.endswith(".o") for n in names)


def test_the_example_matches_eager_on_fresh_states_through_pipeline(example_export):
    spec = leapp.spec.load(example_export)
    assert [m.parameters.warp_segments for m in spec.models] == [1, 0, 1]
    assert [m.parameters.backend for m in spec.models] == ["jit", "onnx", "pt2"]
    pipeline = leapp.Pipeline.load(example_export)
    policy = example_policy()
    generator = torch.Generator().manual_seed(7)
    for _ in range(FRESH_SAMPLES):
        state = example.random_state(generator)
        with torch.no_grad():
            expected = example.step(policy, *state)
        inputs = dict(zip(pipeline.input_keys, state, strict=True))
        got = pipeline.step(inputs)["targets/joint_target"]
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_inference_manager_runs_the_example(example_export):
    manager = InferenceManager(str(example_export / "warp_gravity.yaml"))
    state = example.random_state(torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = example.step(example_policy(), *state)
    out = manager.run_policy(dict(zip(manager.inputs, state, strict=True)))
    torch.testing.assert_close(out["targets/joint_target"], expected, rtol=1e-5, atol=1e-5)


def test_numpy_values_handed_to_warp_match_eager_through_pipeline(tmp_path):
    def shift(x):
        out = wp.zeros(4, dtype=wp.float32)
        bias = wp.array([0.5, -0.5, 1.0, 0.0], dtype=wp.float32)
        values = wp.from_numpy(np.square(x), dtype=wp.float32)
        wp.launch(kernels.scale_add, 4, inputs=[values, 3.0, bias], outputs=[out])
        return wp.to_torch(out)

    def fresh():
        return np.random.default_rng().standard_normal(4).astype(np.float32)

    compiled = export_function(tmp_path, shift, {"x": fresh()}, "jit")
    pipeline = leapp.Pipeline.load(compiled.path)
    for _ in range(FRESH_SAMPLES):
        x = fresh()
        got = pipeline.step({"node/x": torch.from_numpy(x)})["node/out0"]
        torch.testing.assert_close(got, shift(x.copy()), rtol=1e-5, atol=1e-5)


def test_leapp_ros_verify_replays_the_example(example_export, capsys):
    assert leapp_ros(["verify", str(example_export), "--composed"]) == 0
    assert "verify passed" in capsys.readouterr().out


def test_a_generated_ros_package_carries_the_warp_archives(example_export, tmp_path):
    from leapp_ros.tools.generate import generate_package

    generate_package(example_export, tmp_path)
    export = next(path for path in tmp_path.rglob("export") if path.is_dir())
    assert {"observe.warp", "targets.warp"} <= {path.name for path in export.iterdir()}
    assert leapp.Pipeline.load(export).models["targets"].backend == "pt2"


def test_a_changed_warp_archive_fails_the_checksum_check(example_export, tmp_path):
    folder = shutil.copytree(example_export, tmp_path / "copy")
    with open(folder / "observe.warp", "ab") as archive:
        archive.write(b"\0")
    with pytest.raises(SpecError) as raised:
        leapp.spec.load(folder)
    assert any("observe.warp" in p and "warp_md5sum" in p for p in raised.value.problems)


def test_an_archive_of_another_warp_version_is_refused_with_the_version_to_install(
    example_export, tmp_path
):
    folder = shutil.copytree(example_export, tmp_path / "copy")
    path = folder / "targets.warp"
    with zipfile.ZipFile(path) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    manifest = json.loads(files["manifest.json"])
    manifest["warp_version"] = "0.9.0"
    files["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    spec = leapp.spec.load(folder, verify_checksums=False)
    with pytest.raises(PipelineError, match=r"warp-lang 0\.9\.0.*install warp-lang==0\.9\.0"):
        load_model(spec, "targets")


def test_a_warp_node_exported_with_onnx_is_refused_naming_the_backends_that_hold_warp(tmp_path):
    def body(x):
        out = wp.zeros(4, dtype=wp.float32)
        bias = wp.zeros(4, dtype=wp.float32)
        wp.launch(kernels.scale_add, 4, inputs=[wp.from_torch(x), 2.0, bias], outputs=[out])
        return wp.to_torch(out)

    with pytest.raises(ExportError, match=r"node 'node' holds 1 Warp segment.*'jit' or 'pt2'"):
        export_function(tmp_path, body, {"x": torch.randn(4)}, "onnx")


@pytest.mark.skipif(
    not wp.is_cuda_available(), reason="no CUDA device (the CPU tests cover the rest)"
)
@pytest.mark.parametrize("backend", ["jit", "pt2"])
def test_a_warp_node_traced_on_cuda_runs_on_cuda_and_matches_eager(tmp_path, backend):
    def rotate(q, v):
        body = wp.zeros(q.shape[0], dtype=wp.vec3, device="cuda:0")
        quats, vectors = wp.from_torch(q, dtype=wp.quat), wp.from_torch(v, dtype=wp.vec3)
        wp.launch(kernels.rotate_into_body, q.shape[0], inputs=[quats, vectors], outputs=[body])
        wp.synchronize_device("cuda:0")
        return wp.to_torch(body)

    def inputs():
        q = torch.randn(8, 4, device="cuda")
        return {"q": q / q.norm(dim=1, keepdim=True), "v": torch.randn(8, 3, device="cuda")}

    compiled = export_function(tmp_path, rotate, inputs(), backend, node="rotate")
    with zipfile.ZipFile(compiled.path.parent / "rotate.warp") as archive:
        manifest = json.loads(archive.read("manifest.json"))
    assert [s["device"] for s in manifest["segments"]] == ["cuda:0"]
    model = load_model(compiled.spec, "rotate")
    for _ in range(FRESH_SAMPLES):
        fresh = inputs()
        (got,) = model.run([fresh["q"], fresh["v"]])
        assert got.is_cuda
        torch.testing.assert_close(got, rotate(**fresh), rtol=1e-5, atol=1e-5)
