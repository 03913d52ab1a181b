"""``leapp-ros verify``: replays the recorded examples (eager PyTorch's outputs while tracing),
then seeded random ticks within their range (against leapp.Pipeline), through the live graph
(one process per node and composed) and passes on faithful exports; fails naming the topic
when the graph runs a perturbed weight matrix the seed's all-zero example cannot see; fails
before starting anything on a damaged model file; reports the topics and differences of
swapped models; refuses timer-fired pipelines; and finds the export inside a generated package
or an install prefix."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from support.commands import rows, trace, verify
from support.ros import eager_seed
from support.weights import export_perturbed_seed, fix_checksums, swap_artifact

from leapp import annotate
from leapp import spec as spec_file
from leapp_ros.testing import Deployment, GraphUnderTest
from leapp_ros.tools.reference import make_reference
from leapp_ros.tools.verification import find_export

pytestmark = pytest.mark.ros

DEPLOYMENTS = [Deployment.PROCESSES, Deployment.COMPOSED]
RANDOM_TICKS = 20  # verify's default, after the recorded examples
SEED_REFERENCE = (
    "the recorded examples (1 tick(s), eager PyTorch while tracing), then leapp.Pipeline on "
    "20 random ticks within their range (seed 0)"
)

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


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_verify_passes_on_the_seed_export(seed, deployment, capsys):
    code, out, _ = verify(capsys, seed.path, "--deployment", deployment.value)
    assert code == 0, out
    assert "21 of 21 samples replayed on /torch_pipeline" in out
    assert {topic: row[0::2] for topic, row in rows(out).items()} == {
        "/torch_pipeline/preprocess/obs": ["21/21", "pass"],
        "/torch_pipeline/policy/action": ["21/21", "pass"],
    }
    assert out.rstrip().endswith(f"verify passed: every published tensor matches {SEED_REFERENCE}")


def test_the_random_ticks_after_the_examples_lie_within_their_range_and_follow_eager(seed, three):
    """Each random element lies between the smallest and largest value the examples show
    (the seed's all-zero example: within 1 of 0), and leapp.Pipeline's outputs for them are
    eager PyTorch's: the reference the random ticks stand on."""
    reference = make_reference(spec_file.load(three), seed=4)
    assert (len(reference.ticks), reference.recorded) == (3 + RANDOM_TICKS, 3)
    for key in ("encode/state", "encode/command"):
        shown = torch.stack([tick.inputs[key] for tick in reference.ticks[:3]])
        drawn = torch.stack([tick.inputs[key] for tick in reference.ticks[3:]])
        assert (drawn >= shown.amin(0)).all() and (drawn <= shown.amax(0)).all(), key
        assert len(drawn.unique(dim=0)) == RANDOM_TICKS, key
    reference = make_reference(spec_file.load(seed.path), seed=4)
    for tick in reference.ticks[1:]:
        state, velocity = tick.inputs["preprocess/state"], tick.inputs["preprocess/velocity"]
        assert state.abs().max() <= 1 and state.abs().min() > 0
        obs, action = eager_seed(seed, state, velocity)
        torch.testing.assert_close(tick.outputs["preprocess/obs"], obs, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(tick.outputs["policy/action"], action, rtol=1e-5, atol=1e-5)


def test_verify_fails_naming_the_topic_when_the_graph_runs_a_perturbed_weight_matrix(
    seed, tmp_path, capsys, monkeypatch
):
    """The seed's one recorded example is all zero: the policy answers tanh(bias), whatever
    its weight matrix holds. A graph whose policy has a perturbed weight matrix and the same
    bias passes that example and fails every random tick. The reference runs the export's own
    artifacts, so the graph gets the other policy (a stale model file, its checksum fixed)
    once the reference is computed."""
    other = export_perturbed_seed(tmp_path / "other", seed).path
    export = Path(shutil.copytree(seed.path, tmp_path / "torch_pipeline"))
    start = GraphUnderTest.start

    def start_on_the_other_policy(graph):
        swap_artifact(export, other, "policy.onnx")
        return start(graph)

    monkeypatch.setattr(GraphUnderTest, "start", start_on_the_other_policy)
    code, out, _ = verify(capsys, export)
    assert code == 1, out
    assert {topic: row[0::2] for topic, row in rows(out).items()} == {
        "/torch_pipeline/preprocess/obs": ["21/21", "pass"],
        "/torch_pipeline/policy/action": ["21/21", "FAIL"],
    }
    assert "verify FAILED: 1 of 2 topics failed" in out
    # the recorded example (sample 0) passes; every random tick fails
    assert re.search(
        r"/torch_pipeline/policy/action: sample 1 \(random tick 0\): \d of 6 values beyond "
        r"tolerance \(largest difference [0-9.e-]+\); 19 more sample\(s\) differ",
        out,
    ), out


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_verify_passes_on_three_nodes_with_fan_out_and_mixed_backends(three, deployment, capsys):
    code, out, _ = verify(capsys, three, "--deployment", deployment.value)
    assert code == 0, out
    assert "23 of 23 samples replayed on /three_nodes" in out
    assert {topic: row[0::2] for topic, row in rows(out).items()} == {
        f"/three_nodes/{key}": ["23/23", "pass"]
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
    """Model files swapped inside the export (checksums fixed): leapp.Pipeline runs them too,
    so the random ticks pass; the recorded examples, eager PyTorch's outputs, catch it."""
    xs: list[torch.Tensor] = []

    def run():
        xs.append(torch.randn(4))
        two_linears(xs)

    export = trace(tmp_path, "swap", 3, run)
    first, second = export / "first.pt", export / "second.pt"
    first_bytes, second_bytes = first.read_bytes(), second.read_bytes()
    first.write_bytes(second_bytes)
    second.write_bytes(first_bytes)
    fix_checksums(export)

    code, out, _ = verify(capsys, export)

    assert code == 1
    with torch.no_grad():
        y_diff = max((SECOND(x) - FIRST(x)).abs().max().item() for x in xs)
        z_diff = max((FIRST(SECOND(x)) - SECOND(FIRST(x))).abs().max().item() for x in xs)
    table = rows(out)
    assert {topic: [row[0], row[2]] for topic, row in table.items()} == {
        "/swap/first/y": ["23/23", "FAIL"],
        "/swap/second/z": ["23/23", "FAIL"],
    }
    assert float(table["/swap/first/y"][1]) == pytest.approx(y_diff, rel=1e-2)
    assert float(table["/swap/second/z"][1]) == pytest.approx(z_diff, rel=1e-2)
    assert "verify FAILED: 2 of 2 topics failed" in out
    assert re.search(
        r"/swap/first/y: sample 0 \(recorded example 0\): \d of 4 values beyond tolerance "
        r"\(largest difference [0-9.e-]+\); 2 more sample\(s\) differ$",
        out,
        re.MULTILINE,
    ), out


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
