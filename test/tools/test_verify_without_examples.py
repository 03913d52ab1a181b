"""``leapp-ros verify`` of an export without recorded examples (every export of NVIDIA's leapp
0.7.2): the graph is driven with seeded random inputs, or the inputs of a ``--inputs`` file,
and every published tensor is compared with leapp.Pipeline run in-process on the same inputs,
state and feedback carried tick to tick; the generated package's launch_testing test does the
same. A graph that computes something else than the export fails naming the topic; an inputs
file that does not fit is exit code 2, before anything starts.

The NVIDIA test runs where LEAPP_NVIDIA_PYTHON names a Python with NVIDIA's leapp 0.7.2
installed (``pip install torch==2.13.0 leapp==0.7.2`` in a second venv); it skips elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from support.commands import rows, trace, verify
from support.recurrent import feedback_loop
from support.robot import export_robot
from support.ros import eager_seed
from support.weights import export_perturbed_seed, swap_artifact

from leapp import annotate
from leapp import spec as spec_file
from leapp_ros.plan.pipeline import make_plan
from leapp_ros.testing import GraphUnderTest, reserve_domain_id, ros_env
from leapp_ros.tools.reference import random_inputs, reference_ticks

pytestmark = pytest.mark.ros

RANDOM = "leapp.Pipeline on random inputs"


def without_examples(export: Path, destination: Path) -> Path:
    """A copy of ``export`` whose spec names no examples file and whose folder has none."""
    bare = Path(shutil.copytree(export, destination / export.name))
    spec = spec_file.load(bare)
    (bare / spec.pipeline.examples).unlink()
    spec_file.dump(replace(spec, pipeline=replace(spec.pipeline, examples=None)), spec.path)
    return bare


@pytest.fixture(scope="module")
def bare_seed(seed, tmp_path_factory) -> Path:
    return without_examples(seed.path, tmp_path_factory.mktemp("bare"))


@pytest.fixture
def never_started(monkeypatch):
    def never(self):
        raise AssertionError("verify started the graph although its inputs do not fit")

    monkeypatch.setattr(GraphUnderTest, "start", never)


def test_random_inputs_are_seeded_and_of_every_external_port_shape_and_dtype(bare_seed):
    spec = spec_file.load(bare_seed)
    first, again, other = (random_inputs(spec, 3, s) for s in (4, 4, 5))
    assert [sorted(tick) for tick in first] == [["preprocess/state", "preprocess/velocity"]] * 3
    assert [(v.dtype, tuple(v.shape)) for v in first[0].values()] == [
        (torch.float32, (6,)), (torch.float32, (3,))
    ]  # fmt: skip
    for a, b, c in zip(first, again, other, strict=True):
        assert all(torch.equal(a[k], b[k]) and not torch.equal(a[k], c[k]) for k in a)


def test_random_integers_are_0_to_4_and_random_bools_take_both_values(tmp_path):
    def run():
        x, n, mask = annotate.input_tensors(
            "mix", {"x": torch.randn(8), "n": torch.arange(8), "mask": torch.ones(8).bool()}
        )
        annotate.output_tensors("mix", {"y": torch.where(mask, x * n, x)}, export_with="jit")

    spec = spec_file.load(trace(tmp_path, "mix", 1, run))
    ticks = random_inputs(spec, 10, 0)
    n = torch.stack([tick["mix/n"] for tick in ticks])
    mask = torch.stack([tick["mix/mask"] for tick in ticks])
    assert (n.dtype, mask.dtype, ticks[0]["mix/x"].dtype) == (
        torch.int64,
        torch.bool,
        torch.float32,
    )
    assert set(n.unique().tolist()) == {0, 1, 2, 3, 4}
    assert set(mask.unique().tolist()) == {False, True}


def test_the_reference_of_random_inputs_is_what_eager_pytorch_computes(seed, bare_seed):
    spec = spec_file.load(bare_seed)
    for tick in reference_ticks(spec, random_inputs(spec, 5, 0)):
        obs, action = eager_seed(seed, tick.inputs["preprocess/state"],
                                 tick.inputs["preprocess/velocity"])  # fmt: skip
        torch.testing.assert_close(tick.outputs["preprocess/obs"], obs, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(tick.outputs["policy/action"], action, rtol=1e-5, atol=1e-5)


def test_seed_without_examples_passes_on_20_ticks_of_random_inputs(bare_seed, capsys):
    code, out, _ = verify(capsys, bare_seed, "--seed", "3")
    assert code == 0, out
    assert "20 of 20 samples replayed on /torch_pipeline" in out
    assert f"against {RANDOM} (seed 3)" in out
    assert {topic: row[0::2] for topic, row in rows(out).items()} == {
        "/torch_pipeline/preprocess/obs": ["20/20", "pass"],
        "/torch_pipeline/policy/action": ["20/20", "pass"],
    }
    assert out.rstrip().endswith(
        f"verify passed: every published tensor matches {RANDOM} (seed 3)"
    )


def test_feedback_without_examples_carries_pipeline_feedback_tick_to_tick(tmp_path, capsys):
    def run():
        feedback_loop([torch.randn(5) for _ in range(2)], torch.full((2,), 0.25))

    bare = without_examples(trace(tmp_path / "export", "loop", 1, run), tmp_path)
    code, out, _ = verify(capsys, bare, "--deployment", "composed", "--ticks", "15")
    assert code == 0, out
    assert "15 of 15 samples replayed on /loop (composed)" in out
    assert set(rows(out)) == {"/loop/preprocess/obs", "/loop/act/action"}


def test_robot_message_inputs_without_examples_are_published_as_their_messages(tmp_path, capsys):
    """JointState, Imu and Twist carry the random joint, body and command inputs."""
    bare = without_examples(export_robot(tmp_path / "export").path, tmp_path)
    plan = make_plan(spec_file.load(bare))
    external = [port for node in plan.nodes for port in node.inputs if port.kind == "external"]
    messages = {port.message_type for port in external}
    assert messages == {"sensor_msgs/msg/JointState", "sensor_msgs/msg/Imu",
                        "geometry_msgs/msg/Twist"}  # fmt: skip
    code, out, _ = verify(capsys, bare, "--composed")
    assert code == 0, out
    assert {topic: row[0::2] for topic, row in rows(out).items()} == {
        "/robot_policy/preprocess/obs": ["20/20", "pass"],
        "/robot_policy/policy/joint_targets": ["20/20", "pass"],
    }


def test_a_graph_running_other_policy_weights_than_the_reference_fails_naming_the_topic(
    seed, bare_seed, tmp_path, capsys, monkeypatch
):
    """Random inputs check the graph against the export: the reference runs the export's own
    artifacts, so the graph is made to load another policy (a perturbed weight matrix: a stale
    artifact, its checksum fixed) only once the reference is computed."""
    other = export_perturbed_seed(tmp_path / "other", seed).path
    export = Path(shutil.copytree(bare_seed, tmp_path / "torch_pipeline"))
    start = GraphUnderTest.start

    def start_on_the_other_policy(graph):
        swap_artifact(export, other, "policy.onnx")
        return start(graph)

    monkeypatch.setattr(GraphUnderTest, "start", start_on_the_other_policy)
    code, out, _ = verify(capsys, export, "--ticks", "5", "--composed")
    assert code == 1, out
    assert {topic: row[0::2] for topic, row in rows(out).items()} == {
        "/torch_pipeline/preprocess/obs": ["5/5", "pass"],
        "/torch_pipeline/policy/action": ["5/5", "FAIL"],
    }
    assert "verify FAILED: 1 of 2 topics failed" in out
    assert "/torch_pipeline/policy/action: sample 0: " in out
    assert "; 4 more sample(s) differ" in out


def test_an_inputs_file_is_replayed_instead_of_the_recorded_examples(seed, tmp_path, capsys):
    inputs = tmp_path / "inputs.safetensors"
    save_file({"preprocess/state": torch.randn(4, 6), "preprocess/velocity": torch.randn(4, 3)},
              str(inputs))  # fmt: skip
    code, out, _ = verify(capsys, seed.path, "--inputs", str(inputs), "--composed")
    assert code == 0, out
    assert "4 of 4 samples replayed on /torch_pipeline" in out
    assert (
        f"verify passed: every published tensor matches leapp.Pipeline on the inputs in {inputs}"
        in out
    )


@pytest.mark.parametrize(
    "values, problem",
    [
        ({"preprocess/state": torch.randn(4, 6)},
         "no value for external input(s) ['preprocess/velocity']"),
        ({"preprocess/state": torch.randn(4, 6), "preprocess/velocity": torch.randn(4, 4)},
         "'preprocess/velocity' is float32 of shape [4, 4], expected float32 of shape "
         "['ticks', 3]"),
        ({"preprocess/state": torch.randn(6), "preprocess/velocity": torch.randn(3)},
         "'preprocess/state' is float32 of shape [6], expected float32 of shape ['ticks', 6]"),
    ],
    ids=["missing port", "wrong shape", "no ticks axis"],
)  # fmt: skip
def test_an_inputs_file_that_does_not_fit_is_exit_code_2_naming_the_port(
    bare_seed, tmp_path, capsys, never_started, values, problem
):
    inputs = tmp_path / "inputs.safetensors"
    save_file(values, str(inputs))
    code, out, err = verify(capsys, bare_seed, "--inputs", str(inputs))
    assert code == 2 and out == ""
    assert err.startswith(f"leapp-ros verify: inputs file {inputs}: {problem}"), err
    assert "pipeline 'torch_pipeline' takes 'preprocess/state': float32 ['ticks', 6]" in err


# --------------------------------------------------------------------- NVIDIA's leapp 0.7.2
NVIDIA_EXPORT = """
import sys
import torch
import leapp
from leapp import annotate

torch.manual_seed(0)
policy = torch.nn.Sequential(torch.nn.Linear(9, 16), torch.nn.ELU(), torch.nn.Linear(16, 6))
leapp.start(name="nv_pipeline", save_path=sys.argv[1])
with torch.no_grad():
    state, velocity = annotate.input_tensors(
        "preprocess", {"state": torch.randn(6), "velocity": torch.randn(3)}
    )
    obs = torch.cat([torch.clamp(state * 2.0, -5.0, 5.0), velocity])
    annotate.output_tensors("preprocess", {"obs": obs}, export_with="jit")
    obs = annotate.input_tensors("policy", {"obs": obs})
    annotate.output_tensors("policy", {"action": torch.tanh(policy(obs))}, export_with="onnx")
leapp.stop()
leapp.compile_graph()
print("leapp", leapp.__version__, "from", leapp.__file__)
"""


def test_an_export_of_nvidia_leapp_passes_on_random_inputs(tmp_path, capsys):
    python = os.environ.get("LEAPP_NVIDIA_PYTHON")
    if not python:
        pytest.skip("LEAPP_NVIDIA_PYTHON does not name a Python with NVIDIA's leapp 0.7.2")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [python, "-c", NVIDIA_EXPORT, str(tmp_path)],
        cwd=tmp_path,  # not this repository, whose leapp would shadow NVIDIA's
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "leapp 0.7.2 from" in done.stdout and "site-packages" in done.stdout, done.stdout
    export = tmp_path / "nv_pipeline"
    assert spec_file.load(export).pipeline.examples is None
    code, out, _ = verify(capsys, export, "--ticks", "10")
    assert code == 0, out
    assert (
        f"10 of 10 samples replayed on /nv_pipeline (one process per node) against {RANDOM}" in out
    )
    assert {topic: row[0::2] for topic, row in rows(out).items()} == {
        "/nv_pipeline/preprocess/obs": ["10/10", "pass"],
        "/nv_pipeline/policy/action": ["10/10", "pass"],
    }


# ---------------------------------------------------------- the generated launch_testing test
@pytest.mark.launch
@pytest.mark.slow
def test_generated_launch_test_compares_random_inputs_with_leapp_pipeline(bare_seed, tmp_path):
    """``launch_test`` of the installed package's test, every launch file, real launch stack:
    each replay passes and nothing is skipped."""
    pytest.importorskip(
        "launch_testing.actions",
        reason="the ROS 2 launch stack is not installed (launch_testing): use a ROS 2 install, "
        "or run scripts/setup.sh with ../shared/ros2-launch present",
    )
    from leapp_ros.tools.generate import generate_package

    package = generate_package(bare_seed, tmp_path / "src").path
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation"]
    pip += ["--no-index", "--no-compile", "-q", "--target", str(site), str(package)]
    subprocess.run(pip, check=True, capture_output=True, timeout=120)
    test_file = package / "test" / "test_torch_pipeline_topics.py"
    with reserve_domain_id() as domain_id:
        prefixes = os.pathsep.join([str(site), os.environ.get("AMENT_PREFIX_PATH", sys.prefix)])
        env = {**os.environ, **ros_env(domain_id), "PYTHONPATH": str(site),
               "AMENT_PREFIX_PATH": prefixes}  # fmt: skip
        done = subprocess.run(
            [str(Path(sys.executable).parent / "launch_test"), str(test_file)],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    launch_files = [f"torch_pipeline{suffix}.launch.py" for suffix in ("", "_composed", "_fused")]
    for launch_file in launch_files:
        ran = f"test_every_published_tensor_matches_its_reference[{launch_file}]) ... ok"
        assert ran in out, out
    assert "skipped" not in out, out
