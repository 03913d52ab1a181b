"""TensorSemantics: what a port means travels from the annotation to the spec and back.

Every export is compared with eager PyTorch on fresh random inputs through
``leapp.Pipeline.load(path).step``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

import leapp
from leapp import (
    InputKindEnum,
    OutputKindEnum,
    TemporalAxis,
    TensorSemantics,
    annotate,
)
from leapp.errors import LeappError, PortNameError, PortTypeError, SemanticsError, SpecError
from leapp.spec import dump, load

HERE = Path(__file__).name
JOINTS = ["hip", "knee", "ankle"]
W = torch.randn(3, 3)
KP = torch.tensor([20.0, 30.0, 10.0])


def _yaml_ports(compiled, node):
    document = yaml.safe_load(Path(compiled.path).read_text())
    model = document["models"][node]
    return {p["name"]: p for p in model["inputs"]}, {p["name"]: p for p in model["outputs"]}


def _policy(pos, vel):
    action = torch.tanh((pos + 0.1 * vel) @ W)
    return action, torch.stack([action, action * 0.5])


def _trace_policy(tmp_path, runs=1):
    leapp.start("sem", save_path=tmp_path)
    for _ in range(runs):
        pos, vel = annotate.input_tensors(
            "policy",
            [
                TensorSemantics(
                    name="joint_pos",
                    ref=torch.randn(1, 3),
                    kind=InputKindEnum.JOINT_POSITION,
                    element_names=JOINTS,
                    extra={"frame": "base", "units": "rad"},
                ),
                TensorSemantics(name="joint_vel", ref=torch.randn(1, 3), kind="my/custom/kind"),
            ],
        )
        action, chunk = _policy(pos, vel)
        annotate.output_tensors(
            "policy",
            [
                TensorSemantics(name="action", ref=action, kind=OutputKindEnum.JOINT_POSITION),
                TensorSemantics(
                    name="chunk", ref=chunk, element_names=[TemporalAxis(20), None, JOINTS]
                ),
            ],
            static_outputs=[TensorSemantics(name="kp", ref=KP, kind=OutputKindEnum.KP)],
        )
    leapp.stop()
    return leapp.compile_graph()


def _assert_policy_matches_eager(compiled):
    pipeline = leapp.Pipeline.load(compiled.path)
    for _ in range(20):
        pos, vel = torch.randn(1, 3), torch.randn(1, 3)
        got = pipeline.step({"policy/joint_pos": pos, "policy/joint_vel": vel})
        action, chunk = _policy(pos, vel)
        torch.testing.assert_close(got["policy/action"], action)
        torch.testing.assert_close(got["policy/chunk"], chunk)
        torch.testing.assert_close(got["policy/kp"], KP)


# ------------------------------------------------------------------ TensorSemantics itself
def test_a_flat_list_of_names_is_normalized_to_one_list_per_axis():
    semantics = TensorSemantics(name="p", ref=torch.zeros(1, 3), element_names=["x", "y", "z"])
    assert semantics.element_names == [["x", "y", "z"]]
    assert semantics.temporal_period_ms is None


def test_a_temporal_axis_becomes_the_marker_and_sets_the_period():
    semantics = TensorSemantics(
        name="chunk", ref=torch.zeros(4, 3), element_names=[TemporalAxis(20), JOINTS]
    )
    assert semantics.element_names == ["__temporal_axis__", JOINTS]
    assert semantics.temporal_period_ms == 20
    assert semantics.to_dict() == {
        "element_names": ["__temporal_axis__", JOINTS],
        "temporal_period_ms": 20,
    }


def test_kind_enums_carry_leapps_names_and_strings():
    assert InputKindEnum.JOINT_POSITION.value == "state/joint/position"
    assert InputKindEnum.JOINT_POSITION == "state/joint/position"
    assert InputKindEnum.COMMAND_POSE.value == "command/body/pose"
    assert OutputKindEnum.JOINT_TORQUES == "target/joint/torques"
    assert OutputKindEnum.KD.value == "kd"
    assert (len(InputKindEnum), len(OutputKindEnum)) == (20, 11)


def test_update_sets_known_fields_and_puts_unknown_keys_in_extra():
    semantics = TensorSemantics(name="p", ref=torch.zeros(3))
    semantics.update({"kind": "state/joint/position", "frame": "base"})
    assert semantics.kind == "state/joint/position"
    assert semantics.extra == {"frame": "base"}
    assert semantics.to_dict() == {"kind": "state/joint/position", "frame": "base"}


@pytest.mark.parametrize(
    ("keywords", "error", "message"),
    [
        ({"ref": [1.0, 2.0]}, PortTypeError, r"ref must be the tensor it describes.*list"),
        ({"name": 3}, PortTypeError, r"name must be a str"),
        ({"kind": 7}, PortTypeError, r"kind must be an InputKindEnum/OutputKindEnum member"),
        ({"kind": ""}, SemanticsError, r"kind is empty"),
        ({"element_names": ["x", "y"]}, SemanticsError, r"2 names but axis 1 .* 3 elements"),
        ({"element_names": [["a"], ["b"], JOINTS]}, SemanticsError, r"3 axis entries .*"),
        ({"element_names": [1, 2, 3]}, PortTypeError, r"entry 1 is a int; use names"),
        ({"element_names": []}, PortTypeError, r"non-empty list"),
        ({"element_names": ["__temporal_axis__", JOINTS]}, SemanticsError, r"is reserved"),
        (
            {"element_names": [TemporalAxis(1), TemporalAxis(2)]},
            SemanticsError,
            r"more than one TemporalAxis",
        ),
        ({"element_names": [[TemporalAxis(1)]]}, SemanticsError, r"plain names"),
        ({"extra": {"shape": [3]}}, SemanticsError, r"extra key 'shape' cannot be a field"),
        ({"extra": {"gain": object()}}, PortTypeError, r"extra\['gain'\] holds a object"),
        ({"extra": ["units"]}, PortTypeError, r"extra must be a dict"),
    ],
)
def test_invalid_tensor_semantics_are_refused_at_construction(keywords, error, message):
    arguments = {"name": "joint_pos", "ref": torch.zeros(1, 3), **keywords}
    with pytest.raises(error, match=message) as caught:
        TensorSemantics(**arguments)
    assert isinstance(caught.value, LeappError)


@pytest.mark.parametrize("period", [0, -5, "20", True])
def test_a_temporal_axis_needs_a_positive_period(period):
    with pytest.raises(SemanticsError, match=r"TemporalAxis\(period_ms=.*positive") as caught:
        TemporalAxis(period)
    assert isinstance(caught.value, ValueError)


def test_temporal_period_is_not_a_constructor_keyword():
    with pytest.raises(TypeError, match="temporal_period_ms"):
        TensorSemantics(name="p", ref=torch.zeros(3), temporal_period_ms=20)  # type: ignore[call-arg]


# ------------------------------------------------------------------------- the spec
def test_semantics_are_written_to_and_read_from_the_spec(tmp_path):
    compiled = _trace_policy(tmp_path)
    inputs, outputs = _yaml_ports(compiled, "policy")
    assert inputs["joint_pos"] == {
        "name": "joint_pos",
        "dtype": "float32",
        "shape": [1, 3],
        "type": "tensor",
        "kind": "state/joint/position",
        "element_names": [JOINTS],
        "frame": "base",
        "units": "rad",
    }
    assert inputs["joint_vel"]["kind"] == "my/custom/kind"
    assert outputs["action"]["kind"] == "target/joint/position"
    assert outputs["chunk"]["element_names"] == ["__temporal_axis__", None, JOINTS]
    assert outputs["chunk"]["temporal_period_ms"] == 20
    assert outputs["kp"]["kind"] == "kp"

    spec = load(compiled.path)
    assert spec == compiled.spec
    model = spec.model("policy")
    position = model.input("joint_pos")
    assert (position.kind, position.element_names) == ("state/joint/position", (tuple(JOINTS),))
    assert position.extra == {"frame": "base", "units": "rad"}
    chunk = model.output("chunk")
    assert chunk.element_names == ("__temporal_axis__", None, tuple(JOINTS))
    assert chunk.temporal_period_ms == 20.0
    _assert_policy_matches_eager(compiled)


def test_ports_without_semantics_have_no_semantic_fields(tmp_path):
    leapp.start("plain", save_path=tmp_path)
    x = annotate.input_tensors("node", {"x": torch.randn(4)})
    annotate.output_tensors("node", {"y": x * 2.0})
    leapp.stop()
    compiled = leapp.compile_graph()
    inputs, outputs = _yaml_ports(compiled, "node")
    assert set(inputs["x"]) == set(outputs["y"]) == {"name", "dtype", "shape", "type"}
    pipeline = leapp.Pipeline.load(compiled.path)
    x = torch.randn(4)
    torch.testing.assert_close(pipeline.step({"node/x": x})["node/y"], x * 2.0)


def test_one_tensor_semantics_is_one_input_returned_as_its_traced_value(tmp_path):
    leapp.start("single", save_path=tmp_path)
    ref = torch.randn(1, 4)
    traced = annotate.input_tensors(
        "node", TensorSemantics(name="pos", ref=ref, kind=InputKindEnum.JOINT_POSITION)
    )
    assert isinstance(traced, leapp.TracedTensor)
    torch.testing.assert_close(torch.Tensor(traced), ref)
    annotate.output_tensors("node", {"out": traced * 2.0})
    leapp.stop()
    compiled = leapp.compile_graph()
    assert compiled.spec.model("node").input("pos").kind == "state/joint/position"
    pipeline = leapp.Pipeline.load(compiled.path)
    for _ in range(10):
        pos = torch.randn(1, 4)
        torch.testing.assert_close(pipeline.step({"node/pos": pos})["node/out"], pos * 2.0)


def test_numpy_arrays_take_semantics_too(tmp_path):
    leapp.start("arrays", save_path=tmp_path)
    ref = np.random.rand(3).astype(np.float32)
    traced = annotate.input_tensors(
        "node", [TensorSemantics(name="q", ref=ref, element_names=JOINTS)]
    )
    annotate.output_tensors("node", {"out": np.clip(traced * 2.0, 0.0, 1.5)})
    leapp.stop()
    compiled = leapp.compile_graph()
    assert compiled.spec.model("node").input("q").element_names == (tuple(JOINTS),)
    pipeline = leapp.Pipeline.load(compiled.path)
    for _ in range(10):
        q = torch.rand(3)
        torch.testing.assert_close(pipeline.step({"node/q": q})["node/out"], (q * 2).clamp(0, 1.5))


def test_a_state_described_by_semantics_carries_them_on_its_input_and_output(tmp_path):
    def step(x, h):
        return torch.tanh(x @ W + h)

    leapp.start("stateful", save_path=tmp_path)
    h = torch.zeros(3)
    for _ in range(3):
        x = annotate.input_tensors("rnn", {"x": torch.randn(3)})
        h_in = annotate.state_tensors(
            "rnn", TensorSemantics(name="h", ref=h, kind="state/hidden", element_names=JOINTS)
        )
        h = annotate.update_state("rnn", {"h": step(x, h_in)})
        annotate.output_tensors("rnn", {"y": h * 2.0})
    leapp.stop()
    compiled = leapp.compile_graph()
    model = compiled.spec.model("rnn")
    assert model.input("h").kind == model.output("h").kind == "state/hidden"
    assert model.output("h").element_names == (tuple(JOINTS),)
    assert "x" not in {p.name for p in model.inputs if p.kind}

    pipeline = leapp.Pipeline.load(compiled.path)
    hidden = torch.zeros(3)
    for _ in range(10):
        x = torch.randn(3)
        hidden = step(x, hidden)
        torch.testing.assert_close(pipeline.step({"rnn/x": x})["rnn/y"], hidden * 2.0)


def test_a_node_run_again_with_the_same_semantics_keeps_them(tmp_path):
    compiled = _trace_policy(tmp_path, runs=3)
    model = compiled.spec.model("policy")
    assert model.input("joint_pos").kind == "state/joint/position"
    assert model.output("action").kind == "target/joint/position"
    _assert_policy_matches_eager(compiled)


def test_a_node_run_again_with_different_semantics_is_a_graph_error(tmp_path):
    leapp.start("changed", save_path=tmp_path)
    for kind in (InputKindEnum.JOINT_POSITION, InputKindEnum.JOINT_VELOCITY):
        x = annotate.input_tensors(
            "node", TensorSemantics(name="x", ref=torch.zeros(3), kind=kind)
        )
        if kind is InputKindEnum.JOINT_VELOCITY:
            with pytest.raises(
                leapp.GraphError,
                match=rf"node 'node' ran again at .*{HERE}:\d+ with different semantics for "
                r"input 'x' .*state/joint/position.*state/joint/velocity.*same TensorSemantics",
            ):
                annotate.output_tensors("node", {"y": x + 1.0})
        else:
            annotate.output_tensors("node", {"y": x + 1.0})


def test_annotations_outside_a_session_return_the_tensors_they_describe():
    pos, vel = torch.randn(3), torch.randn(3)
    got = annotate.input_tensors(
        "node", [TensorSemantics(name="pos", ref=pos), TensorSemantics(name="vel", ref=vel)]
    )
    assert got[0] is pos and got[1] is vel
    assert annotate.output_tensors("node", TensorSemantics(name="out", ref=pos)) is pos


# ------------------------------------------------------------------------- error paths
def test_tensor_semantics_mixed_with_raw_tensors_is_a_type_error(tmp_path):
    leapp.start("mixed", save_path=tmp_path)
    with pytest.raises(
        PortTypeError,
        match=rf"annotate.input_tensors\('node', ...\) at .*{HERE}:\d+: a list holding "
        r"TensorSemantics must hold only TensorSemantics, but it also holds Tensor\. Wrap",
    ) as caught:
        annotate.input_tensors(
            "node", [torch.zeros(3), TensorSemantics(name="a", ref=torch.zeros(3))]
        )
    assert isinstance(caught.value, TypeError)
    leapp.stop()


def test_two_tensor_semantics_with_one_name_are_refused(tmp_path):
    leapp.start("dup", save_path=tmp_path)
    with pytest.raises(PortNameError, match=r"two TensorSemantics are named 'same'") as caught:
        annotate.output_tensors(
            "node",
            [
                TensorSemantics(name="same", ref=torch.zeros(3)),
                TensorSemantics(name="same", ref=torch.ones(3)),
            ],
        )
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, leapp.GraphError)
    leapp.stop()


def test_tensor_semantics_without_a_name_is_refused(tmp_path):
    with pytest.raises(PortTypeError, match=r"TensorSemantics\(ref=..., kind='k'\) has no name"):
        annotate.input_tensors("node", TensorSemantics(ref=torch.zeros(3), kind="k"))


@pytest.mark.parametrize("api", ["input_tensors", "output_tensors", "state_tensors"])
def test_a_bare_tensor_is_a_type_error_saying_how_to_name_it(tmp_path, api):
    with pytest.raises(
        PortTypeError,
        match=rf"annotate\.{api}\('node', ...\) at .*{HERE}:\d+: got a bare Tensor; name it: "
        r"pass a dict \{'name': tensor\} or TensorSemantics",
    ) as caught:
        getattr(annotate, api)("node", torch.zeros(3))
    assert isinstance(caught.value, TypeError)


@pytest.mark.parametrize("payload", [[torch.zeros(3), torch.ones(3)], {}, "x", None])
def test_a_payload_that_is_not_a_dict_or_tensor_semantics_is_a_type_error(payload):
    with pytest.raises(PortTypeError, match=r"pass a non-empty dict \{name: tensor\}, a Tensor"):
        annotate.input_tensors("node", payload)


def test_a_spec_port_whose_element_names_do_not_fit_names_the_file_node_and_port(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        NVIDIA_SPEC.replace("[[hip_l, knee_l, ankle_l, hip_r, knee_r, ankle_r]]", "[[a, b]]", 1)
    )
    with pytest.raises(SpecError) as caught:
        load(path, verify_checksums=False)
    message = str(caught.value)
    assert str(path) in message
    assert (
        "models.policy.inputs[0].element_names[0]: expected 6 names (axis 1 of shape [1, 6]) or "
        "a marker such as __temporal_axis__ but found ['a', 'b'] (port 'joint_pos')"
    ) in message


# ------------------------------------------------------------- specs written by NVIDIA
NVIDIA_SPEC = """\
models:
  policy:
    inputs:
    - name: joint_pos
      dtype: float32
      shape: [1, 6]
      type: tensor
      kind: state/joint/position
      element_names: [[hip_l, knee_l, ankle_l, hip_r, knee_r, ankle_r]]
      frame: base
      units: rad
    outputs:
    - name: action_chunk
      dtype: float32
      shape: [4, 6]
      type: tensor
      kind: target/joint/position_chunk
      element_names: [__temporal_axis__, [hip_l, knee_l, ankle_l, hip_r, knee_r, ankle_r]]
      temporal_period_ms: 20
    - name: kp
      dtype: float32
      shape: [6]
      type: tensor
      kind: kp
      element_names: [[hip_l, knee_l, ankle_l, hip_r, knee_r, ankle_r]]
    parameters:
      model_path: policy.pt
      md5sum: 070fe030406f9bb0980511d73eb2f116
      sha256sum: ed4695b02f8a37ac2d6bd5eab3fa289d6600087515d6992a1f7e8f0d5b06c056
      backend: jit
      warp_segments: 0

pipeline:
  data_flow: {}
  feedback_flow: {}
  inputs:
    policy: [joint_pos]
  outputs:
    policy: [action_chunk, kp]

system information:
  cuda version: None
  leapp config version: '1.3'
  leapp version: 0.7.2
  os: Debian GNU/Linux 12
  python version: 3.11.7
  torch version: 2.13.0+cpu
  warp version: null
"""


def test_a_spec_written_by_nvidia_leapp_with_semantics_loads_and_round_trips(tmp_path):
    original = tmp_path / "nvidia" / "nvidia.yaml"
    original.parent.mkdir()
    original.write_text(NVIDIA_SPEC)
    spec = load(original, verify_checksums=False)
    joints = ("hip_l", "knee_l", "ankle_l", "hip_r", "knee_r", "ankle_r")
    position = spec.model("policy").input("joint_pos")
    assert position.kind == "state/joint/position"
    assert position.element_names == (joints,)
    assert position.extra == {"frame": "base", "units": "rad"}
    chunk = spec.model("policy").output("action_chunk")
    assert chunk.element_names == ("__temporal_axis__", joints)
    assert chunk.temporal_period_ms == 20.0

    written = dump(spec, tmp_path / "again" / "nvidia.yaml")
    assert written.path.read_text() == NVIDIA_SPEC
    assert load(written.path, verify_checksums=False) == written
