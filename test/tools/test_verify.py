"""``leapp-ros verify``: replays the recorded examples through the live graph (one process per
node and composed) and passes on faithful exports, fails before starting anything on a damaged
model file, reports the topics and differences of swapped models, refuses timer-fired
pipelines, and finds the export inside a generated package or an install prefix."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from support.commands import rows, trace, verify

from leapp import annotate
from leapp import spec as spec_file
from leapp_ros.testing import GraphUnderTest
from leapp_ros.tools.verification import find_export

pytestmark = pytest.mark.ros

MODES = {"processes": [], "composed": ["--composed"]}

torch.manual_seed(5)
ENCODER = torch.nn.Sequential(torch.nn.Linear(7, 16), torch.nn.ReLU(), torch.nn.LayerNorm(16))
HEAD = torch.nn.Linear(16, 4)
SCALE = torch.linspace(0.5, 1.5, 16)
FIRST = torch.nn.Linear(4, 4)
SECOND = torch.nn.Linear(4, 4)


def three_nodes():
    """encode (jit) fans out to act (onnx) and monitor (pt2)."""
    state, command = annotate.input_tensors(
        "encode", {"state": torch.randn(2, 5), "command": torch.randn(2, 2)}
    )
    features = annotate.output_tensors(
        "encode", {"features": ENCODER(torch.cat([state, command], dim=-1))}, export_with="jit"
    )
    act = annotate.input_tensors("act", {"features": features})
    annotate.output_tensors("act", {"action": torch.tanh(HEAD(act))}, export_with="onnx")
    seen = annotate.input_tensors("monitor", {"features": features})
    energy = (seen * SCALE).pow(2).sum(-1, keepdim=True)
    annotate.output_tensors(
        "monitor", {"energy": energy, "peak": seen.abs().amax(-1)}, export_with="pt2"
    )


def two_linears(xs: list[torch.Tensor]):
    """first: x -> y = FIRST(x); second: y -> z = SECOND(y); both TorchScript."""
    x = annotate.input_tensors("first", {"x": xs[len(xs) - 1]})
    y = annotate.output_tensors("first", {"y": FIRST(x)}, export_with="jit")
    y = annotate.input_tensors("second", {"y": y})
    annotate.output_tensors("second", {"z": SECOND(y)}, export_with="jit")


@pytest.fixture(scope="module")
def three(tmp_path_factory) -> Path:
    return trace(tmp_path_factory.mktemp("three"), "three_nodes", 3, three_nodes)


@pytest.mark.parametrize("mode", MODES)
def test_verify_passes_on_the_seed_export(seed, mode, capsys):
    code, out, _ = verify(capsys, seed.path, *MODES[mode])
    assert code == 0, out
    assert {topic: row[0::2] for topic, row in rows(out).items()} == {
        "/torch_pipeline/preprocess/obs": ["1/1", "pass"],
        "/torch_pipeline/policy/action": ["1/1", "pass"],
    }
    assert out.rstrip().endswith(
        "verify passed: every published tensor matches the recorded examples"
    )


@pytest.mark.parametrize("mode", MODES)
def test_verify_passes_on_three_nodes_with_fan_out_and_mixed_backends(three, mode, capsys):
    code, out, _ = verify(capsys, three, *MODES[mode])
    assert code == 0, out
    assert "3 of 3 samples replayed on /three_nodes" in out
    assert {topic: row[0::2] for topic, row in rows(out).items()} == {
        f"/three_nodes/{key}": ["3/3", "pass"]
        for key in ("encode/features", "act/action", "monitor/energy", "monitor/peak")
    }


def test_verify_with_a_corrupted_model_file_fails_before_starting_and_names_it(
    seed, tmp_path, capsys, monkeypatch
):
    export = Path(shutil.copytree(seed.path, tmp_path / "torch_pipeline"))
    artifact = export / "policy.onnx"
    artifact.write_bytes(artifact.read_bytes()[:-8] + b"damaged!")

    def never(self):
        raise AssertionError("verify started the graph of a damaged export")

    monkeypatch.setattr(GraphUnderTest, "start", never)
    code, out, err = verify(capsys, export)
    assert code == 2
    assert out == ""
    assert err.startswith("leapp-ros verify: ")
    assert "policy.onnx" in err and "sha256" in err


def test_verify_reports_the_topics_and_differences_of_swapped_models(tmp_path, capsys):
    xs: list[torch.Tensor] = []

    def run():
        xs.append(torch.randn(4))
        two_linears(xs)

    export = trace(tmp_path, "swap", 3, run)
    first, second = export / "first.pt", export / "second.pt"
    first_bytes, second_bytes = first.read_bytes(), second.read_bytes()
    first.write_bytes(second_bytes)
    second.write_bytes(first_bytes)
    spec = spec_file.load(export, verify_checksums=False)
    models = []
    for model in spec.models:
        md5, sha256 = spec_file.file_checksums(export / model.parameters.model_path)
        parameters = replace(model.parameters, md5sum=md5, sha256sum=sha256)
        models.append(replace(model, parameters=parameters))
    spec_file.dump(replace(spec, models=tuple(models)), spec.path)

    code, out, _ = verify(capsys, export)

    assert code == 1
    with torch.no_grad():
        y_diff = max((SECOND(x) - FIRST(x)).abs().max().item() for x in xs)
        z_diff = max((FIRST(SECOND(x)) - SECOND(FIRST(x))).abs().max().item() for x in xs)
    table = rows(out)
    assert {topic: [row[0], row[2]] for topic, row in table.items()} == {
        "/swap/first/y": ["3/3", "FAIL"],
        "/swap/second/z": ["3/3", "FAIL"],
    }
    assert float(table["/swap/first/y"][1]) == pytest.approx(y_diff, rel=1e-2)
    assert float(table["/swap/second/z"][1]) == pytest.approx(z_diff, rel=1e-2)
    assert "verify FAILED: 2 of 2 topics failed" in out
    assert re.search(
        r"/swap/first/y: sample 0: \d of 4 values beyond tolerance \(largest difference", out
    )


def test_verify_refuses_a_pipeline_whose_node_runs_on_a_timer(tmp_path, capsys):
    def run():
        x = annotate.input_tensors("gen", {"x": torch.randn(2)})
        annotate.output_tensors("gen", {"y": x * 2})

    export = trace(tmp_path, "timed", 1, run)
    spec = spec_file.load(export)
    pipeline = replace(spec.pipeline, inputs={}, feedback_flow={"gen/y": ("gen/x",)})
    spec_file.dump(replace(spec, pipeline=pipeline), spec.path)
    code, _, err = verify(capsys, export)
    assert code == 2
    assert "node(s) ['gen'] have only feedback or state inputs, so they run on a timer" in err


def test_verify_finds_the_export_of_a_generated_package_and_of_an_install_prefix(seed, tmp_path):
    from leapp_ros.tools.generate import generate_package

    package = generate_package(seed.path, tmp_path / "src").path
    assert find_export(package) == package / "export"
    assert spec_file.load(find_export(package)).name == "torch_pipeline"
    installed = tmp_path / "install" / "share" / "torch_pipeline_ros" / "export"
    shutil.copytree(seed.path, installed)
    assert find_export(tmp_path / "install") == installed
    assert find_export(seed.path) == seed.path
    assert find_export(seed.path / "torch_pipeline.yaml") == seed.path / "torch_pipeline.yaml"
