"""Rules of leapp.spec: load/dump of the LEAPP 0.7.2 compatible pipeline spec."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path

import pytest
from support.specs import LEAPP_SEED_SPEC, LEAPP_SEMANTIC_SPEC

from leapp.errors import SpecError
from leapp.spec import (
    ModelParameters,
    ModelSpec,
    PipelineSpec,
    Spec,
    TensorSpec,
    dump,
    file_checksums,
    load,
    system_information,
)

JOINTS = ("hip_l", "knee_l", "ankle_l", "hip_r", "knee_r", "ankle_r")


def assert_problems(error: SpecError, *patterns: str) -> None:
    """``error`` lists exactly one problem per pattern (regex, matched from the start)."""
    problems = list(error.problems)
    assert len(problems) == len(patterns), problems
    for pattern in patterns:
        matching = [p for p in problems if re.match(pattern, p)]
        assert len(matching) == 1, (pattern, problems)
        assert matching[0] in str(error)


def write(tmp_path: Path, text: str, name: str = "torch_pipeline.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def with_real_artifacts(tmp_path: Path, text: str) -> str:
    """``text`` with the checksums of dummy artifact files written next to it."""
    for model_path in re.findall(r"model_path: (\S+)", text):
        artifact = tmp_path / model_path
        artifact.write_bytes(f"dummy artifact {model_path}".encode())
        md5, sha256 = file_checksums(artifact)
        block = re.search(rf"model_path: {re.escape(model_path)}\n.*?sha256sum: \w+", text, re.S)
        assert block is not None
        fixed = re.sub(r"md5sum: \w+", f"md5sum: {md5}", block.group(0))
        fixed = re.sub(r"sha256sum: \w+", f"sha256sum: {sha256}", fixed)
        text = text.replace(block.group(0), fixed)
    return text


def seed_spec() -> Spec:
    """The seed pipeline of LEAPP_SEED_SPEC, built from the dataclasses."""
    return Spec(
        name="torch_pipeline",
        models=(
            ModelSpec(
                name="preprocess",
                inputs=(
                    TensorSpec("state", "float32", (6,)),
                    TensorSpec("velocity", "float32", (3,)),
                ),
                outputs=(TensorSpec("obs", "float32", (9,)),),
                parameters=ModelParameters(
                    model_path="preprocess.pt",
                    md5sum="f45a9214ccda98bc7c509872ab3c4f74",
                    sha256sum="e169269023d144f9581daba489526f1cb93052c7f29a06773108b7d83f31050c",
                    backend="jit",
                ),
            ),
            ModelSpec(
                name="policy",
                inputs=(TensorSpec("obs", "float32", (9,)),),
                outputs=(TensorSpec("action", "float32", (6,)),),
                parameters=ModelParameters(
                    model_path="policy.onnx",
                    md5sum="6455a4066b6feeab64b5432bc7a2055e",
                    sha256sum="7ddf591d75e4553d3bc60b54a7f49f0823154ea87a5fe26c043fe247eb10c517",
                    backend="onnx",
                    opset_version=20,
                ),
            ),
        ),
        pipeline=PipelineSpec(
            data_flow={"preprocess/obs": ("policy/obs",)},
            feedback_flow={},
            inputs={"preprocess": ("state", "velocity")},
            outputs={"policy": ("action",)},
        ),
        system={
            "leapp version": "0.7.2",
            "leapp config version": "1.3",
            "torch version": "2.13.0+cpu",
            "python version": "3.11.7",
            "cuda version": "None",
            "warp version": None,
            "os": "Debian GNU/Linux 12",
        },
    )


# --- reading LEAPP 0.7.2 files ------------------------------------------------------------


def test_load_reads_leapp_072_seed_spec_unchanged(tmp_path):
    path = write(tmp_path, LEAPP_SEED_SPEC)

    spec = load(path, verify_checksums=False)

    assert spec == dataclasses.replace(seed_spec(), path=path)
    assert [m.name for m in spec.models] == ["preprocess", "policy"]


def test_load_reads_leapp_072_semantic_spec_unchanged(tmp_path):
    path = write(tmp_path, LEAPP_SEMANTIC_SPEC, "sem_graph.yaml")

    spec = load(path, verify_checksums=False)

    joint_pos = spec.model("policy").input("joint_pos")
    assert joint_pos.kind == "state/joint/position"
    assert joint_pos.element_names == (JOINTS,)
    assert joint_pos.extra == {"frame": "base", "units": "rad"}
    chunk = spec.model("policy").output("action_chunk")
    assert chunk.shape == (4, 6)
    assert chunk.element_names == ("__temporal_axis__", JOINTS)
    assert chunk.temporal_period_ms == 20.0
    assert spec.model("post").parameters.torch_version == "2.13.0+cpu"
    assert spec.pipeline.feedback_flow == {"policy/h": ("policy/h",)}
    assert spec.pipeline.configs == {"frequency": 50, "runtime": "ros2"}
    assert spec.pipeline.initial_values == "sem_graph_initial_values.safetensors"
    assert spec.system["cuda version"] == "None"
    assert spec.name == "sem_graph"


@pytest.mark.parametrize("text", [LEAPP_SEED_SPEC, LEAPP_SEMANTIC_SPEC], ids=["seed", "semantic"])
def test_load_verifies_checksums_of_leapp_072_specs(tmp_path, text):
    path = write(tmp_path, with_real_artifacts(tmp_path, text))

    spec = load(path)

    assert spec.path == path


def test_load_finds_the_spec_named_after_the_export_folder(tmp_path):
    folder = tmp_path / "torch_pipeline"
    folder.mkdir()
    write(folder, LEAPP_SEED_SPEC)
    write(folder, "notes: not a spec\n", "notes.yaml")

    spec = load(folder, verify_checksums=False)

    assert spec.path == folder / "torch_pipeline.yaml"
    assert spec.name == "torch_pipeline"


def test_load_takes_the_only_yaml_of_a_folder_not_named_after_it(tmp_path):
    write(tmp_path, LEAPP_SEED_SPEC, "renamed.yaml")

    spec = load(tmp_path, verify_checksums=False)

    assert spec.name == "renamed"


def test_load_rejects_a_folder_with_several_candidate_yaml_files(tmp_path):
    write(tmp_path, LEAPP_SEED_SPEC, "one.yaml")
    write(tmp_path, LEAPP_SEED_SPEC, "two.yaml")

    with pytest.raises(SpecError, match=r"one\.yaml, two\.yaml.*pass the YAML file itself"):
        load(tmp_path, verify_checksums=False)


def test_load_keeps_unknown_keys_everywhere(tmp_path):
    text = """\
models:
  a:
    owner: team-a
    inputs:
    - {name: x, dtype: float32, shape: [2], type: tensor, frame: base}
    outputs:
    - {name: y, dtype: float32, shape: [2], type: tensor}
    parameters: {model_path: null, md5sum: null, sha256sum: null, backend: null, quantized: true}
pipeline:
  data_flow: {}
  feedback_flow: {}
  inputs: {a: [x]}
  outputs: {a: [y]}
  examples: tiny_examples.safetensors
  schedule: fifo
system information: {leapp version: 0.1.0}
future section:
  anything: [1, 2]
"""

    spec = load(write(tmp_path, text, "tiny.yaml"), verify_checksums=False)

    assert spec.model("a").extra == {"owner": "team-a"}
    assert spec.model("a").input("x").extra == {"frame": "base"}
    assert spec.model("a").parameters.extra == {"quantized": True}
    assert spec.pipeline.extra == {"schedule": "fifo"}
    assert spec.pipeline.examples == "tiny_examples.safetensors"
    assert spec.extra == {"future section": {"anything": [1, 2]}}


def test_load_accepts_scalar_ports_and_missing_system_information(tmp_path):
    text = """\
models:
  a:
    inputs:
    - {name: x, dtype: int64, shape: [], type: tensor}
    outputs:
    - {name: y, dtype: bool, shape: [], type: tensor}
    parameters: {model_path: null, md5sum: null, sha256sum: null, backend: null}
pipeline:
  inputs: {a: [x]}
  outputs: {a: [y]}
"""

    spec = load(write(tmp_path, text, "tiny.yaml"), verify_checksums=False)

    assert spec.model("a").inputs == (TensorSpec("x", "int64", ()),)
    assert spec.model("a").outputs == (TensorSpec("y", "bool", ()),)
    assert spec.system == {}


# --- every problem, with its YAML path ----------------------------------------------------


def test_load_reports_every_problem_with_its_yaml_path(tmp_path):
    text = """\
models:
  a:
    inputs:
    - {name: x, dtype: float33, shape: [2], type: tensor}
    outputs:
    - {name: y, dtype: float32, shape: [2, -1], type: tensor}
    parameters: {model_path: a.onnx, md5sum: null, sha256sum: null, backend: tflite}
pipeline:
  inputs: {a: [x]}
  outputs: {a: [y]}
"""

    with pytest.raises(SpecError) as caught:
        load(write(tmp_path, text, "tiny.yaml"), verify_checksums=False)

    assert_problems(
        caught.value,
        r"models\.a\.inputs\[0\]\.dtype: expected one of float32, float64, .* but found "
        r"'float33'$",
        r"models\.a\.outputs\[0\]\.shape: expected a list of non-negative integers but found "
        r"\[2, -1\]$",
        r"models\.a\.parameters\.backend: expected one of jit, onnx, pt2, null but found "
        r"'tflite'$",
    )
    assert str(tmp_path / "tiny.yaml") in str(caught.value)
    assert "3 problem(s)" in str(caught.value)


def test_load_rejects_missing_top_level_and_port_keys(tmp_path):
    text = """\
models:
  a:
    inputs:
    - {name: x, shape: [2], type: tensor}
    outputs: []
    parameters: {}
"""

    with pytest.raises(SpecError) as caught:
        load(write(tmp_path, text, "tiny.yaml"), verify_checksums=False)

    assert_problems(
        caught.value,
        r"pipeline: expected a mapping but the key is missing",
        r"models\.a\.inputs\[0\]\.dtype: expected one of .* but the key is missing",
        r"models\.a\.inputs\[0\]: expected a/x to be fed by exactly one of",
    )


def test_load_rejects_duplicate_port_names_within_inputs(tmp_path):
    text = """\
models:
  a:
    inputs:
    - {name: x, dtype: float32, shape: [2], type: tensor}
    - {name: x, dtype: float32, shape: [3], type: tensor}
    outputs:
    - {name: x, dtype: float32, shape: [2], type: tensor}
    parameters: {model_path: null, md5sum: null, sha256sum: null, backend: null}
pipeline:
  inputs: {a: [x]}
  outputs: {a: [x]}
"""

    with pytest.raises(SpecError) as caught:
        load(write(tmp_path, text, "tiny.yaml"), verify_checksums=False)

    assert_problems(
        caught.value,
        r"models\.a\.inputs\[1\]\.name: expected port names unique within models\.a\.inputs "
        r"but found 'x' again \(also models\.a\.inputs\[0\]\)",
    )


def test_load_rejects_model_path_missing_when_backend_is_set(tmp_path):
    text = """\
models:
  a:
    inputs: []
    outputs:
    - {name: y, dtype: float32, shape: [2], type: tensor}
    parameters: {model_path: null, md5sum: null, sha256sum: nope, backend: onnx}
pipeline:
  outputs: {a: [y]}
"""

    with pytest.raises(SpecError) as caught:
        load(write(tmp_path, text, "tiny.yaml"), verify_checksums=False)

    assert_problems(
        caught.value,
        r"models\.a\.parameters\.model_path: expected the artifact file of backend 'onnx'",
        r"models\.a\.parameters\.sha256sum: expected 64 hex digits but found 'nope'",
    )


def test_load_rejects_edges_between_unknown_or_misdirected_ports(tmp_path):
    text = """\
models:
  a:
    inputs:
    - {name: x, dtype: float32, shape: [2], type: tensor}
    outputs:
    - {name: y, dtype: float32, shape: [2], type: tensor}
    parameters: {model_path: null, md5sum: null, sha256sum: null, backend: null}
  b:
    inputs:
    - {name: y, dtype: float32, shape: [2], type: tensor}
    outputs:
    - {name: z, dtype: float32, shape: [2], type: tensor}
    parameters: {model_path: null, md5sum: null, sha256sum: null, backend: null}
pipeline:
  data_flow:
    a/x: [b/y]
    a/y: [c/y, b/z, by]
  inputs: {a: [x]}
  outputs: {b: [z, w]}
"""

    with pytest.raises(SpecError) as caught:
        load(write(tmp_path, text, "tiny.yaml"), verify_checksums=False)

    assert_problems(
        caught.value,
        r"pipeline\.data_flow\.a/x: expected an output of node 'a' \(y\) but found 'x', "
        r"which is an input",
        r"pipeline\.data_flow\.a/y\[0\]: expected a node of models \(a, b\) but found 'c'",
        r"pipeline\.data_flow\.a/y\[1\]: expected an input of node 'b' \(y\) but found 'z', "
        r"which is an output",
        r"pipeline\.data_flow\.a/y\[2\]: expected '<node>/<port>' \(an input\) but found 'by'",
        r"pipeline\.outputs\.b\[1\]: expected an output of node 'b' \(z\) but found 'w'",
    )


def test_load_rejects_inputs_fed_twice_or_never(tmp_path):
    text = """\
models:
  a:
    inputs:
    - {name: x, dtype: float32, shape: [2], type: tensor}
    - {name: unfed, dtype: float32, shape: [2], type: tensor}
    outputs:
    - {name: y, dtype: float32, shape: [2], type: tensor}
    parameters: {model_path: null, md5sum: null, sha256sum: null, backend: null}
pipeline:
  feedback_flow: {a/y: [a/x]}
  inputs: {a: [x]}
  outputs: {a: [y]}
"""

    with pytest.raises(SpecError) as caught:
        load(write(tmp_path, text, "tiny.yaml"), verify_checksums=False)

    assert_problems(
        caught.value,
        r"models\.a\.inputs\[0\]: expected a/x to be fed exactly once but found 2 feeds "
        r"\(pipeline\.feedback_flow\.a/y, pipeline\.inputs\.a\)",
        r"models\.a\.inputs\[1\]: expected a/unfed to be fed by exactly one of "
        r"pipeline\.data_flow, pipeline\.feedback_flow or pipeline\.inputs but nothing feeds it",
    )


def test_load_rejects_edges_whose_ports_disagree_naming_both(tmp_path):
    text = """\
models:
  a:
    inputs:
    - {name: x, dtype: float32, shape: [2], type: tensor}
    outputs:
    - {name: y, dtype: float32, shape: [2], type: tensor}
    parameters: {model_path: null, md5sum: null, sha256sum: null, backend: null}
  b:
    inputs:
    - {name: y, dtype: float64, shape: [3], type: tensor}
    outputs:
    - {name: z, dtype: float32, shape: [2], type: tensor}
    parameters: {model_path: null, md5sum: null, sha256sum: null, backend: null}
pipeline:
  data_flow: {a/y: [b/y]}
  inputs: {a: [x]}
  outputs: {b: [z]}
"""

    with pytest.raises(SpecError) as caught:
        load(write(tmp_path, text, "tiny.yaml"), verify_checksums=False)

    assert_problems(
        caught.value,
        r"pipeline\.data_flow\.a/y\[0\]: expected b/y to match a/y \(dtype float32, shape "
        r"\[2\]\) but found dtype float64, shape \[3\]",
    )


def test_load_rejects_data_flow_edges_that_go_backwards(tmp_path):
    text = """\
models:
  b:
    inputs:
    - {name: y, dtype: float32, shape: [2], type: tensor}
    outputs:
    - {name: z, dtype: float32, shape: [2], type: tensor}
    parameters: {model_path: null, md5sum: null, sha256sum: null, backend: null}
  a:
    inputs:
    - {name: x, dtype: float32, shape: [2], type: tensor}
    outputs:
    - {name: y, dtype: float32, shape: [2], type: tensor}
    parameters: {model_path: null, md5sum: null, sha256sum: null, backend: null}
pipeline:
  data_flow: {a/y: [b/y]}
  inputs: {a: [x]}
  outputs: {b: [z]}
"""

    with pytest.raises(SpecError) as caught:
        load(write(tmp_path, text, "tiny.yaml"), verify_checksums=False)

    assert_problems(
        caught.value,
        r"pipeline\.data_flow\.a/y\[0\]: expected a forward edge .* use feedback_flow",
    )


def test_load_rejects_element_names_that_do_not_fit_the_shape(tmp_path):
    text = """\
models:
  a:
    inputs:
    - name: x
      dtype: float32
      shape: [4, 2]
      type: tensor
      element_names: [__temporal_axis__, [l]]
    outputs:
    - {name: y, dtype: float32, shape: [2], type: tensor, element_names: [l, r]}
    parameters: {model_path: null, md5sum: null, sha256sum: null, backend: null}
pipeline:
  inputs: {a: [x]}
  outputs: {a: [y]}
"""

    with pytest.raises(SpecError) as caught:
        load(write(tmp_path, text, "tiny.yaml"), verify_checksums=False)

    assert_problems(
        caught.value,
        r"models\.a\.inputs\[0\]\.element_names\[1\]: expected 2 names \(axis 1 of shape "
        r"\[4, 2\]\) or a marker .* \(port 'x'\)",
        r"models\.a\.outputs\[0\]\.element_names: expected a list with one entry per axis of "
        r"shape \[2\], or fewer for the last axes, but found \['l', 'r'\] \(port 'y'\)",
    )


def test_load_rejects_duplicate_yaml_keys(tmp_path):
    text = """\
models:
  a:
    inputs: []
    outputs:
    - {name: y, dtype: float32, shape: [2], type: tensor}
    parameters: {model_path: null, md5sum: null, sha256sum: null, backend: null}
  a:
    inputs: []
    outputs: []
    parameters: {model_path: null, md5sum: null, sha256sum: null, backend: null}
pipeline: {}
"""

    with pytest.raises(SpecError) as caught:
        load(write(tmp_path, text, "tiny.yaml"), verify_checksums=False)

    assert_problems(caught.value, r"line 7: duplicate key 'a'")


# --- files --------------------------------------------------------------------------------


def test_load_rejects_a_missing_file_naming_it(tmp_path):
    missing = tmp_path / "nowhere" / "torch_pipeline.yaml"

    with pytest.raises(SpecError, match=re.escape(str(missing))):
        load(missing)


def test_load_rejects_malformed_yaml_naming_the_file(tmp_path):
    path = write(tmp_path, "models:\n  a: [1, 2\npipeline: {}\n")

    with pytest.raises(SpecError, match=re.escape(str(path)) + ": not valid YAML"):
        load(path)


def test_load_rejects_yaml_that_is_not_a_mapping(tmp_path):
    path = write(tmp_path, "- models\n- pipeline\n")

    with pytest.raises(SpecError, match=re.escape(str(path)) + ": expected a YAML mapping"):
        load(path)


def test_load_rejects_a_checksum_mismatch_naming_file_and_node(tmp_path):
    path = write(tmp_path, with_real_artifacts(tmp_path, LEAPP_SEED_SPEC))
    (tmp_path / "policy.onnx").write_bytes(b"tampered")

    with pytest.raises(SpecError) as caught:
        load(path)

    artifact = re.escape(str(tmp_path / "policy.onnx"))
    assert_problems(
        caught.value,
        rf"models\.policy\.parameters\.md5sum: expected {artifact} \(node 'policy'\) to have "
        r"md5sum .*re-export the pipeline",
        rf"models\.policy\.parameters\.sha256sum: expected {artifact} \(node 'policy'\) to "
        r"have sha256sum .*re-export the pipeline or restore the original file",
    )


def test_load_rejects_a_missing_artifact_naming_file_and_node(tmp_path):
    path = write(tmp_path, with_real_artifacts(tmp_path, LEAPP_SEED_SPEC))
    (tmp_path / "preprocess.pt").unlink()

    with pytest.raises(SpecError) as caught:
        load(path)

    assert_problems(
        caught.value,
        r"models\.preprocess\.parameters\.model_path: expected the artifact of node "
        rf"'preprocess' at {re.escape(str(tmp_path / 'preprocess.pt'))} but there is no such",
    )


def test_file_checksums_are_md5_and_sha256_of_the_bytes(tmp_path):
    data = bytes(range(256)) * 5000  # more than one read chunk
    path = tmp_path / "blob.bin"
    path.write_bytes(data)

    assert file_checksums(path) == (
        hashlib.md5(data).hexdigest(),
        hashlib.sha256(data).hexdigest(),
    )


# --- writing ------------------------------------------------------------------------------


def test_dump_writes_the_leapp_072_layout_line_for_line(tmp_path):
    written = dump(seed_spec(), tmp_path / "torch_pipeline.yaml")

    text = written.path.read_text(encoding="utf-8")

    assert text.splitlines() == LEAPP_SEED_SPEC.splitlines()
    assert text == LEAPP_SEED_SPEC


def test_dump_of_a_loaded_leapp_072_spec_reproduces_its_text(tmp_path):
    spec = load(write(tmp_path, LEAPP_SEMANTIC_SPEC, "sem_graph.yaml"), verify_checksums=False)

    written = dump(spec, tmp_path / "out" / "sem_graph.yaml")

    assert written.path.read_text(encoding="utf-8") == LEAPP_SEMANTIC_SPEC


@pytest.mark.parametrize("text", [LEAPP_SEED_SPEC, LEAPP_SEMANTIC_SPEC], ids=["seed", "semantic"])
def test_dump_then_load_round_trips_to_an_equal_spec(tmp_path, text):
    spec = load(write(tmp_path, text), verify_checksums=False)

    written = dump(spec, tmp_path / "copy")

    assert written.path == tmp_path / "copy" / "torch_pipeline.yaml"
    assert load(written.path, verify_checksums=False) == written
    assert written == dataclasses.replace(spec, path=written.path)


def test_dump_round_trips_extras_and_our_examples_key(tmp_path):
    spec = dataclasses.replace(
        seed_spec(),
        pipeline=dataclasses.replace(
            seed_spec().pipeline,
            examples="torch_pipeline_examples.safetensors",
            configs={"frequency": 50.0},
            extra={"schedule": ("a", "b")},
        ),
        extra={"future section": {"anything": (1, 2)}},
    )

    written = dump(spec, tmp_path / "torch_pipeline.yaml")

    loaded = load(written.path, verify_checksums=False)
    assert loaded == written
    assert loaded.pipeline.examples == "torch_pipeline_examples.safetensors"
    assert loaded.extra == {"future section": {"anything": [1, 2]}}
    assert "  examples: torch_pipeline_examples.safetensors\n" in written.path.read_text()


def test_dump_refuses_a_spec_that_load_would_reject(tmp_path):
    seed = seed_spec()
    broken = dataclasses.replace(
        seed, pipeline=dataclasses.replace(seed.pipeline, inputs={"preprocess": ("state",)})
    )

    with pytest.raises(SpecError) as caught:
        dump(broken, tmp_path / "torch_pipeline.yaml")

    assert_problems(caught.value, r"models\.preprocess\.inputs\[1\]: expected preprocess/velocity")
    assert not (tmp_path / "torch_pipeline.yaml").exists()


def test_system_information_has_the_leapp_keys():
    info = system_information()

    assert list(info) == [
        "cuda version",
        "leapp config version",
        "leapp version",
        "os",
        "python version",
        "torch version",
        "warp version",
    ]
    assert info["leapp config version"] == "1.3"
    assert info["torch version"].startswith("2.")
    assert isinstance(info["cuda version"], str)
