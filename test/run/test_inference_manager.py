"""leapp.InferenceManager, NVIDIA LEAPP's runtime class over leapp.Pipeline: runs an export like
the eager loop, shows LEAPP's value_dict, and refuses bad exports and inputs with LEAPP's
exception types that are also leapp errors."""

from __future__ import annotations

import pytest
import torch
import yaml
from safetensors.torch import save_file

import leapp
from leapp import InferenceManager, annotate
from leapp.errors import LeappError, PipelineError, SpecError

torch.manual_seed(7)
SCALE = torch.rand(5) + 0.5
GRU = torch.nn.GRUCell(5, 4).eval()
HEAD = torch.nn.Linear(4, 2).eval()


def preprocess(state, velocity):
    state, velocity = annotate.input_tensors("preprocess", {"state": state, "velocity": velocity})
    obs = torch.cat([state * SCALE[:3], velocity * SCALE[3:]])
    annotate.output_tensors("preprocess", {"obs": obs}, export_with="jit")
    return obs


def policy(obs, h, backend):
    obs = annotate.input_tensors("policy", {"obs": obs})
    h = annotate.state_tensors("policy", {"h": h})
    h_next = GRU(obs.unsqueeze(0), h.unsqueeze(0)).squeeze(0)
    action = torch.tanh(HEAD(h_next))
    h_next = annotate.update_state("policy", {"h": h_next})
    annotate.output_tensors("policy", {"action": action}, export_with=backend)
    return action, h_next


def eager_loop(samples, backend="jit"):
    """``[(action, h)]`` of the two-node loop from h = 0 (recorded when inside a session)."""
    h, results = torch.zeros(4), []
    with torch.no_grad():
        for state, velocity in samples:
            action, h = policy(preprocess(state, velocity), h, backend)
            results.append((action, h))
    return results


def random_samples(n):
    return [(torch.randn(3), torch.randn(2)) for _ in range(n)]


def export_two_nodes(tmp_path, backend="jit"):
    """preprocess -> policy with GRU state h; returns the YAML path."""
    leapp.start("two", save_path=tmp_path)
    eager_loop(random_samples(3), backend)
    leapp.stop()
    return str(leapp.compile_graph().path)


def export_split(tmp_path):
    """node_a's to_b feeds node_b; final_a and node_b's final_b are pipeline outputs."""
    leapp.start("split", save_path=tmp_path)
    x = annotate.input_tensors("node_a", {"x": torch.randn(3)})
    to_b, _ = annotate.output_tensors(
        "node_a", {"to_b": x * 2.0, "final_a": x + 10.0}, export_with="jit"
    )
    y = annotate.input_tensors("node_b", {"x": to_b})
    annotate.output_tensors("node_b", {"final_b": y - 1.0}, export_with="jit")
    leapp.stop()
    return str(leapp.compile_graph().path)


def edit_yaml(path, change):
    with open(path) as f:
        data = yaml.safe_load(f)
    change(data)
    with open(path, "w") as f:
        yaml.safe_dump(data, f, sort_keys=False)


def step_inputs(state, velocity):
    return {"preprocess/state": state, "preprocess/velocity": velocity}


# --- running ---------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["jit", "onnx"])
def test_run_policy_matches_the_eager_loop_on_fresh_inputs_and_repeats_it_after_reset(
    tmp_path, backend
):
    manager = InferenceManager(export_two_nodes(tmp_path, backend))
    h_port = "h_in" if backend == "onnx" else "h"  # LEAPP names an ONNX node's state pair so
    samples = random_samples(20)
    expected = eager_loop(samples, backend)
    for _ in range(2):
        for (state, velocity), (action, h) in zip(samples, expected, strict=True):
            out = manager.run_policy(step_inputs(state, velocity))
            assert list(out) == ["policy/action"]
            torch.testing.assert_close(out["policy/action"], action, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(
                manager.value_dict["policy"][h_port], h, rtol=1e-5, atol=1e-5
            )
        manager.reset()


def test_run_policy_matches_pipeline_step_on_fresh_random_inputs(tmp_path):
    path = export_two_nodes(tmp_path)
    manager, pipeline = InferenceManager(path), leapp.Pipeline.load(path)
    for _ in range(10):
        inputs = manager.get_mock_input()
        out = manager(inputs)  # __call__ is run_policy
        torch.testing.assert_close(out["policy/action"], pipeline.step(inputs)["policy/action"])


def test_an_input_left_out_keeps_its_value_from_the_previous_step(tmp_path):
    manager = InferenceManager(export_two_nodes(tmp_path))
    pipeline = leapp.Pipeline.load(manager.model_path)
    state, velocity, later = torch.randn(3), torch.randn(2), torch.randn(3)
    manager.run_policy(step_inputs(state, velocity))
    pipeline.step(step_inputs(state, velocity))
    out = manager.run_policy({"preprocess/state": later})
    expected = pipeline.step(step_inputs(later, velocity))["policy/action"]
    torch.testing.assert_close(out["policy/action"], expected)


def test_value_dict_holds_each_node_input_and_the_pipeline_outputs_after_a_step(tmp_path):
    manager = InferenceManager(export_two_nodes(tmp_path))
    state, velocity = torch.randn(3), torch.randn(2)
    out = manager.run_policy(step_inputs(state, velocity))
    values = manager.value_dict
    assert set(values) == {"preprocess", "policy", "==out=="}
    assert values["preprocess"]["state"] is state
    torch.testing.assert_close(
        values["policy"]["obs"], torch.cat([state * SCALE[:3], velocity * SCALE[3:]])
    )
    action, h = eager_loop([(state, velocity)])[0]
    torch.testing.assert_close(values["policy"]["h"], h, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(values["==out=="]["policy/action"], action, rtol=1e-5, atol=1e-5)
    assert values["==out=="]["policy/action"] is out["policy/action"]


def test_reset_zeros_inputs_and_outputs_and_restores_state_to_its_initial_value(tmp_path):
    manager = InferenceManager(export_two_nodes(tmp_path))
    state = torch.randn(3)
    manager.run_policy(step_inputs(state, torch.randn(2)))
    kept = state.clone()
    manager.reset()
    values = manager.value_dict
    assert values["preprocess"]["state"].equal(torch.zeros(3))
    assert values["policy"]["obs"].equal(torch.zeros(5))
    assert values["policy"]["h"].equal(torch.zeros(4))  # the traced first value of h
    assert values["==out=="]["policy/action"].equal(torch.zeros(2))
    assert state.equal(kept)  # the caller's tensor is not zeroed in place


def test_setting_a_state_input_replaces_its_value_for_the_next_step(tmp_path):
    manager = InferenceManager(export_two_nodes(tmp_path))
    state, velocity, h = torch.randn(3), torch.randn(2), torch.randn(4)
    manager.set_input_value("policy", "h", h)
    out = manager.run_policy(step_inputs(state, velocity))
    obs = torch.cat([state * SCALE[:3], velocity * SCALE[3:]])
    with torch.no_grad():
        expected = torch.tanh(HEAD(GRU(obs.unsqueeze(0), h.unsqueeze(0)).squeeze(0)))
    torch.testing.assert_close(out["policy/action"], expected, rtol=1e-5, atol=1e-5)


def test_attributes_describe_the_export_as_leapp_does(tmp_path):
    manager = InferenceManager(export_two_nodes(tmp_path))
    assert manager.inputs == ["preprocess/state", "preprocess/velocity"]
    assert manager.outputs == ["policy/action"]
    assert manager.feedback_inputs == ["policy/h"]
    assert manager.organized_pipeline_connections == {
        "preprocess": {"obs": [("policy", "obs")]},
        "policy": {"h": [("policy", "h")], "action": [("==out==", "policy/action")]},
    }
    node = manager.nodes["policy"]
    assert (node.device, node.input_names, node.output_names) == (
        "cpu",
        ["obs", "h"],
        ["action", "h"],
    )
    assert node.input_shapes == [[5], [4]] and node.input_dtypes == ["float32", "float32"]
    assert set(manager.system_info) and set(manager.models) == {"preprocess", "policy"}
    obs = torch.randn(5)
    action, h_next = node(obs, torch.zeros(4))  # a node runs on its own, tuples for 2 outputs
    assert action.shape == (2,) and h_next.shape == (4,)


def test_get_mock_input_gives_random_tensors_of_every_pipeline_input_shape_and_dtype(tmp_path):
    manager = InferenceManager(export_two_nodes(tmp_path))
    first, second = manager.get_mock_input(), manager.get_mock_input()
    assert {k: (v.shape, v.dtype) for k, v in first.items()} == {
        "preprocess/state": ((3,), torch.float32),
        "preprocess/velocity": ((2,), torch.float32),
    }
    assert not first["preprocess/state"].equal(second["preprocess/state"])


def test_a_fanned_out_output_gives_every_later_consumer_its_own_copy(tmp_path):
    path = export_split(tmp_path)
    edit_yaml(path, lambda d: d["pipeline"]["outputs"]["node_a"].append("to_b"))
    manager = InferenceManager(path)
    x = torch.randn(3)
    out = manager.run_policy({"node_a/x": x})
    assert manager.organized_pipeline_connections["node_a"]["to_b"] == [
        ("node_b", "x"),
        ("==out==", "node_a/to_b"),
    ]
    torch.testing.assert_close(out["node_a/to_b"], x * 2.0)
    torch.testing.assert_close(out["node_b/final_b"], x * 2.0 - 1.0)
    fed = manager.value_dict["node_b"]["x"]
    assert fed.data_ptr() != manager.value_dict["==out=="]["node_a/to_b"].data_ptr()


def test_pipeline_feedback_is_read_and_replaced_through_its_public_methods(tmp_path):
    pipeline = leapp.Pipeline.load(export_two_nodes(tmp_path))
    assert list(pipeline.feedback) == ["policy/h"]
    h = torch.randn(4)
    pipeline.set_feedback({"policy/h": h})
    assert pipeline.feedback["policy/h"] is h
    with pytest.raises(PipelineError, match="no state or feedback inputs"):
        pipeline.set_feedback({"policy/obs": torch.zeros(5)})
    with pytest.raises(PipelineError, match=r"'policy/h' has shape \[3\], expected \[4\]"):
        pipeline.set_feedback({"policy/h": torch.zeros(3)})


def test_leapp_exports_inference_manager_lazily():
    assert "InferenceManager" in leapp.__all__
    assert leapp.InferenceManager is InferenceManager


# --- refused exports -------------------------------------------------------------------------


def refused(kind, fragment, make):
    """Run ``make``; the error must be ``kind`` and a LeappError, its message ``fragment``."""
    with pytest.raises(kind, match=fragment) as caught:
        make()
    assert isinstance(caught.value, LeappError)
    return str(caught.value)


def test_a_missing_yaml_is_refused_as_file_not_found_and_spec_error(tmp_path):
    missing = tmp_path / "none.yaml"
    message = refused(
        FileNotFoundError, "Leapp description file not found", lambda: InferenceManager(missing)
    )
    assert str(missing) in message
    with pytest.raises(SpecError):
        InferenceManager(missing)


def test_a_path_not_ending_in_yaml_is_refused_as_value_error(tmp_path):
    folder = tmp_path / "two"
    export_two_nodes(tmp_path)
    refused(ValueError, "must end with .yaml", lambda: InferenceManager(folder))


def test_an_unknown_constructor_keyword_is_refused():
    with pytest.raises(TypeError, match="device"):
        InferenceManager("x.yaml", device="cuda")  # type: ignore[call-arg]


@pytest.mark.parametrize("key", ["models", "pipeline", "system information"])
def test_a_missing_top_level_section_is_refused(tmp_path, key):
    path = export_two_nodes(tmp_path)
    edit_yaml(path, lambda d: d.pop(key))
    message = refused(
        ValueError,
        "Leapp description file must contain models, pipeline, and system_info",
        lambda: InferenceManager(path),
    )
    assert repr(key) in message and path in message


@pytest.mark.parametrize("key", ["model_path", "md5sum", "sha256sum", "backend"])
def test_a_missing_model_parameter_is_refused(tmp_path, key):
    path = export_two_nodes(tmp_path)
    edit_yaml(path, lambda d: d["models"]["policy"]["parameters"].pop(key))
    message = refused(
        ValueError,
        "Model description must contain model_path, md5sum, sha256sum, and backend",
        lambda: InferenceManager(path),
    )
    assert "models.policy.parameters" in message


def test_a_corrupted_model_is_refused_as_value_error_and_spec_error(tmp_path):
    path = export_two_nodes(tmp_path)
    with open(tmp_path / "two" / "policy.pt", "ab") as f:
        f.write(b"\x00\xff")
    message = refused(SpecError, "SHA256 checksum mismatch", lambda: InferenceManager(path))
    assert "policy.pt" in message and "re-export" in message
    refused(ValueError, "SHA256 checksum mismatch", lambda: InferenceManager(path))


def test_an_initial_value_key_with_two_slashes_is_refused(tmp_path):
    path = export_two_nodes(tmp_path)
    save_file(
        {"policy/h/extra": torch.zeros(4)}, tmp_path / "two" / "two_initial_values.safetensors"
    )
    message = refused(ValueError, "too many values to unpack", lambda: InferenceManager(path))
    assert "'policy/h/extra'" in message


def test_an_initial_value_key_naming_no_input_is_refused(tmp_path):
    path = export_two_nodes(tmp_path)
    values = {"policy/h": torch.zeros(4), "policy/nope": torch.zeros(4)}
    save_file(values, tmp_path / "two" / "two_initial_values.safetensors")
    refused(
        ValueError, "'policy/nope' does not match any node input", lambda: InferenceManager(path)
    )


def test_a_missing_initial_values_file_is_refused_as_file_not_found(tmp_path):
    path = export_two_nodes(tmp_path)
    (tmp_path / "two" / "two_initial_values.safetensors").unlink()
    refused(FileNotFoundError, "initial values file not found", lambda: InferenceManager(path))


def test_an_unroutable_output_is_refused_by_every_loader(tmp_path):
    path = export_split(tmp_path)
    edit_yaml(path, lambda d: d["pipeline"]["outputs"].update(node_a=[]))
    message = refused(ValueError, "unroutable outputs", lambda: InferenceManager(path))
    assert "node_a/final_a" in message and "pipeline.outputs.node_a" in message
    with pytest.raises(SpecError, match="'node_a' has unroutable outputs"):
        leapp.Pipeline.load(path)


# --- refused inputs --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("preprocess/state/x", "Invalid input key: 'preprocess/state/x'. Expected format"),
        ("preprocess", "Invalid input key"),
        ("preprocess/nope", "node 'preprocess' has no input 'nope'"),
        ("ghost/state", "there is no node 'ghost'"),
        ("policy/obs", "another node's output feeds it"),
    ],
)
def test_a_key_run_policy_cannot_set_is_refused(tmp_path, key, fragment):
    manager = InferenceManager(export_two_nodes(tmp_path))
    refused(ValueError, fragment, lambda: manager.run_policy({key: torch.zeros(3)}))


def test_a_refused_value_leaves_value_dict_unchanged(tmp_path):
    manager = InferenceManager(export_two_nodes(tmp_path))
    before = manager.value_dict["preprocess"]["state"]
    refused(
        PipelineError,
        r"'preprocess/state' has shape \[4\], expected \[3\]",
        lambda: manager.run_policy({"preprocess/state": torch.zeros(4)}),
    )
    assert manager.value_dict["preprocess"]["state"] is before
    manager.run_policy({"preprocess/velocity": torch.zeros(2)})  # still runs
