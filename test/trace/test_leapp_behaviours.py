"""NVIDIA LEAPP 0.7.2's session and state behaviours, as leapp does them (or stricter where
LEAPP would export a silently wrong graph), and annotate.mirror_leapp_tags."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

import leapp
from leapp import annotate
from leapp.errors import GraphError, SessionError, TraceError
from leapp.trace.arrays import crossing

torch.manual_seed(11)
LAYER = torch.nn.Linear(3, 3).eval()


def compile_and_load(tmp_path=None):
    compiled = leapp.compile_graph()
    return compiled, leapp.Pipeline.load(compiled.path)


# ------------------------------------------------------------- a. a node's own value as input
def test_a_value_the_node_computed_itself_becomes_a_fresh_input(tmp_path, caplog):
    def scale(x):  # composable functions, both annotated with node "n"
        x = annotate.input_tensors("n", {"x": x})
        return x * 2

    def finish(y):
        y = annotate.input_tensors("n", {"y": y})
        out = LAYER(y) + 1
        annotate.output_tensors("n", {"out": out}, export_with="jit")
        return out

    leapp.start("own", save_path=tmp_path)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="leapp"):
        finish(scale(torch.randn(3)))
    leapp.stop()
    warning = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "node 'n': input 'y' at " in m and "test_leapp_behaviours.py" in m and "fresh input" in m
        for m in warning
    )
    compiled, pipeline = compile_and_load()
    assert [p.name for p in compiled.spec.model("n").inputs] == ["y"]  # x feeds nothing now
    for _ in range(5):
        y = torch.randn(3)
        with torch.no_grad():
            expected = LAYER(y) + 1
        torch.testing.assert_close(pipeline.step({"n/y": y})["n/out"], expected)


def test_an_input_declared_again_under_another_name_is_refused(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.ones(3)})
    with pytest.raises(GraphError, match=r"input 'x2' .* is the value of its input 'x'"):
        annotate.input_tensors("n", {"x2": x})


# -------------------------------------------------------------- b. a state never updated
def counter_tick(x, h):
    x = annotate.input_tensors("n", {"x": x})
    h = annotate.state_tensors("n", {"h": h})
    y = x + h
    annotate.output_tensors("n", {"y": y}, export_with="jit")
    return y, h


def test_a_state_never_updated_is_a_regular_input_of_the_node_as_in_leapp(tmp_path, caplog):
    """NVIDIA LEAPP feeds back only the states given to update_state: a state declared without
    one is a plain input the caller feeds every tick (no feedback edge, no initial value),
    with a warning. The traced state handed back on the next tick stays that input."""
    leapp.start("pass", save_path=tmp_path)
    state = torch.full((3,), 0.5)
    with caplog.at_level(logging.WARNING, logger="leapp"):
        for _ in range(3):
            _, state = counter_tick(torch.randn(3), state)  # the traced state, handed on
    warned = [
        r.getMessage() for r in caplog.records if "never given a next value" in r.getMessage()
    ]
    assert len(warned) == 1 and "['h']" in warned[0], warned
    leapp.stop()
    compiled, pipeline = compile_and_load()
    assert compiled.spec.pipeline.feedback_flow == {}
    assert compiled.spec.pipeline.inputs == {"n": ("x", "h")}
    assert [p.name for p in compiled.spec.model("n").outputs] == ["y"]
    assert [p.name for p in compiled.spec.model("n").inputs] == ["x", "h"]
    for _ in range(5):  # fresh inputs, the state's included: whatever the caller gives
        x, h = torch.randn(3), torch.randn(3)
        out = pipeline.step({"n/x": x, "n/h": h})
        assert set(out) == {"n/y"}
        torch.testing.assert_close(out["n/y"], x + h)


def test_a_state_never_updated_may_change_between_runs_as_any_input(tmp_path):
    leapp.start("p", save_path=tmp_path)
    counter_tick(torch.randn(3), torch.zeros(3))
    counter_tick(torch.randn(3), torch.ones(3))
    leapp.stop()
    compiled, pipeline = compile_and_load()
    assert compiled.spec.pipeline.inputs == {"n": ("x", "h")}
    x, h = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(pipeline.step({"n/x": x, "n/h": h})["n/y"], x + h)


# -------------------------------------------------------------- c. and d. state rules
def test_state_tensors_before_input_tensors_is_refused(tmp_path):
    leapp.start("p", save_path=tmp_path)
    with pytest.raises(SessionError, match=r"state_tensors\('n'\).*input_tensors\('n'"):
        annotate.state_tensors("n", {"h": torch.zeros(2)})


def test_update_of_an_undeclared_state_raises_at_once_with_the_declared_states(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.ones(2)})
    annotate.state_tensors("n", {"h": torch.zeros(2), "c": torch.zeros(2)})
    with pytest.raises(GraphError, match=r"names 'hidden'.*declared states: \['h', 'c'\]"):
        annotate.update_state("n", {"hidden": x})


def test_update_with_another_shape_than_the_state_is_refused(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.ones(3)})
    annotate.state_tensors("n", {"h": torch.zeros(2)})
    with pytest.raises(GraphError, match=r"state 'h' a \[3\] float32 value.*\[2\] float32"):
        annotate.update_state("n", {"h": x * 2})


# -------------------------------------------------------------- e. start while recording
def test_start_while_recording_warns_and_replaces_the_old_session(tmp_path, caplog):
    buf = torch.zeros(3)
    model = torch.nn.Module()
    model.register_buffer("h", torch.zeros(2))
    h = model.h
    leapp.start("broken", save_path=tmp_path)
    with pytest.raises(RuntimeError):  # user code raising in the middle of a traced run
        x = annotate.input_tensors("n", {"x": torch.ones(3)})
        annotate.module("n", model)
        buf.copy_(x)
        raise RuntimeError("simulator crashed")
    with caplog.at_level(logging.WARNING, logger="leapp"):
        leapp.start("fresh", save_path=tmp_path)
    assert any("session 'broken' was still recording" in r.getMessage() for r in caplog.records)
    assert type(buf) is torch.Tensor and model.h is h  # released by the old session
    assert crossing.active()
    x = annotate.input_tensors("n", {"x": torch.ones(3)})
    annotate.output_tensors("n", {"y": x * 3})
    leapp.stop()
    assert not crossing.active()
    assert leapp.compile_graph().spec.name == "fresh"


# ------------------------------------------------------------ f. silently wrong exports
def test_a_traced_value_as_static_output_is_refused(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.ones(3)})
    with pytest.raises(TraceError, match=r"static output 'kp'.*must be a constant.*outputs dict"):
        annotate.output_tensors("n", {"y": x + 1}, static_outputs={"kp": x * 2})


def test_a_static_output_that_is_a_constant_is_exported(tmp_path):
    kp = torch.tensor([20.0, 30.0, 40.0])
    leapp.start("static", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.ones(3)})
    annotate.output_tensors("n", {"y": x + 1}, static_outputs={"kp": kp})
    leapp.stop()
    _, pipeline = compile_and_load()
    out = pipeline.step({"n/x": torch.randn(3)})
    torch.testing.assert_close(out["n/kp"], kp)


@pytest.mark.parametrize("write", ["copy_", "slice_assignment"])
def test_a_traced_value_copied_into_a_plain_buffer_and_declared_again_is_refused(tmp_path, write):
    b = torch.zeros(3)
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.ones(3)})
    if write == "copy_":
        b.copy_(x)
    else:
        b[:] = x
    with pytest.raises(TraceError, match=r"input 'b' .* written from its input\(s\) \['x'\]"):
        annotate.input_tensors("n", {"b": b})


def test_a_registered_buffer_declared_as_an_input_is_refused(tmp_path):
    obs = np.zeros(3, np.float32)
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": np.ones(3, np.float32)})
    obs = annotate.register_buffer("n", {"obs": obs})
    obs[:] = x * 2
    with pytest.raises(TraceError, match=r"input 'obs' .* written from its input\(s\) \['x'\]"):
        annotate.input_tensors("n", {"obs": obs})


@pytest.mark.parametrize(
    "aliases",
    [
        lambda buf: {"a": buf, "b": buf[:3]},
        lambda buf: {"a": buf, "b": buf},
        lambda buf: {"a": buf.numpy(), "b": buf[2:4]},
        lambda buf: {"a": buf.numpy()[::2], "b": buf.numpy()[2:]},
    ],
    ids=["view", "same_tensor", "numpy_and_torch", "numpy_views"],
)
def test_two_inputs_sharing_one_buffer_are_refused_at_declaration(tmp_path, aliases):
    leapp.start("p", save_path=tmp_path)
    with pytest.raises(GraphError, match=r"inputs 'a' and 'b' .* are the same memory"):
        annotate.input_tensors("n", aliases(torch.arange(6.0)))


def test_disjoint_parts_of_one_buffer_are_two_inputs(tmp_path):
    qpos = np.arange(10, dtype=np.float32)  # MuJoCo's d.qpos: base pose, then joints
    leapp.start("parts", save_path=tmp_path)
    quat, qj = annotate.input_tensors("n", {"quat": qpos[3:7], "qj": qpos[7:]})
    annotate.output_tensors("n", {"y": np.concatenate([quat * 2, qj])})
    leapp.stop()
    _, pipeline = compile_and_load()
    quat, qj = torch.randn(4), torch.randn(3)
    out = pipeline.step({"n/quat": quat, "n/qj": qj})["n/y"]
    torch.testing.assert_close(out, torch.cat([quat * 2, qj]))


# ---------------------------------------------------------------------- g. non_traced
@pytest.mark.parametrize("non_traced", ["post", ["post"]])
def test_non_traced_nodes_are_recorded_but_export_no_artifact(tmp_path, non_traced):
    leapp.start("partial", save_path=tmp_path, non_traced=non_traced)
    x = annotate.input_tensors("policy", {"x": torch.ones(3)})
    action = annotate.output_tensors("policy", {"action": x * 2}, export_with="jit")
    a = annotate.input_tensors("post", {"action": action})
    annotate.output_tensors("post", {"scaled": a * 3}, export_with="onnx")
    leapp.stop()
    spec = leapp.compile_graph(validate=False).spec
    assert spec.model("post").parameters.backend is None
    assert spec.model("post").parameters.model_path is None
    assert spec.model("policy").parameters.backend == "jit"
    assert spec.pipeline.data_flow == {"policy/action": ("post/action",)}
    assert not (spec.path.parent / "post.onnx").exists()


def test_non_traced_must_be_node_names(tmp_path):
    with pytest.raises(SessionError, match=r"non_traced=\[1\].*node name"):
        leapp.start("p", save_path=tmp_path, non_traced=[1])


# --------------------------------------------------------------------- h. NumPy handover
def encode(x):
    x = annotate.input_tensors("encode", {"x": x})
    y = np.tanh(x) * np.float32(3)
    annotate.output_tensors("encode", {"y": y}, export_with="jit")
    return y


def act(y):
    y = annotate.input_tensors("act", {"y": y})
    action = LAYER(torch.from_numpy(y))
    annotate.output_tensors("act", {"action": action}, export_with="jit")
    return action


NUMPY_IDENTITY_LIKE = {
    "copy": lambda y: y.copy(),
    "np_copy": lambda y: np.copy(y),
    "np_array": lambda y: np.array(y),
    "np_array_copy": lambda y: np.array(y, copy=True),
    "np_asarray": lambda y: np.asarray(y),
    "astype_same_dtype": lambda y: y.astype(np.float32),
    "copy_of_copy": lambda y: y.copy().copy(),
}
NUMPY_COMPUTATIONS = {
    "scaled": lambda y: y * 2,
    "sliced_and_joined": lambda y: np.concatenate([y[:1], y[1:]]),
    "to_float64_and_back": lambda y: y.astype(np.float64).astype(np.float32),
    "written_into": lambda y: (np.copyto(y, y * 0.5), y)[1],
    "slice_written": lambda y: (y.__setitem__(slice(0, 1), 0.0), y)[1],
}


@pytest.mark.parametrize("call", list(NUMPY_IDENTITY_LIKE))
def test_identity_like_numpy_calls_between_nodes_keep_the_edge(tmp_path, call):
    leapp.start("handover", save_path=tmp_path)
    with torch.no_grad():
        act(NUMPY_IDENTITY_LIKE[call](encode(np.ones(3, np.float32))))
    leapp.stop()
    compiled, pipeline = compile_and_load()
    assert compiled.spec.pipeline.data_flow == {"encode/y": ("act/y",)}
    for _ in range(5):
        x = torch.randn(3)
        with torch.no_grad():
            expected = LAYER(torch.tanh(x) * 3)
        got = pipeline.step({"encode/x": x})["act/action"]
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("call", list(NUMPY_COMPUTATIONS))
def test_numpy_computation_on_an_output_outside_any_node_is_refused_when_handed_to_a_node(
    tmp_path, call
):
    leapp.start("handover", save_path=tmp_path)
    with torch.no_grad():
        handed = NUMPY_COMPUTATIONS[call](encode(np.ones(3, np.float32)))
        with pytest.raises(TraceError, match=r"input 'y'.*outside any node.*test_leapp_behav"):
            act(handed)


def test_numpy_results_outside_nodes_stay_usable_as_plain_values(tmp_path):
    leapp.start("handover", save_path=tmp_path)
    y = encode(np.ones(3, np.float32))
    target = y * 0.25 + np.float32(1)  # a PD target for the simulator, computed between nodes
    as_tensor = torch.from_numpy(target)
    assert float(target.sum()) == pytest.approx(float(np.tanh(1.0) * 3 * 0.25 * 3 + 3))
    np.testing.assert_allclose(as_tensor.numpy(), target.view(np.ndarray))
    leapp.stop()


# -------------------------------------------------------------------- mirror_leapp_tags
def test_mirror_leapp_tags_carries_the_edge_onto_an_equal_copy(tmp_path):
    message = np.empty(3, np.float32)  # e.g. a middleware buffer the output is copied into
    leapp.start("mirror", save_path=tmp_path)
    with torch.no_grad():
        y = encode(np.ones(3, np.float32))
        message[:] = y.view(np.ndarray)  # a copy leapp cannot see
        act(annotate.mirror_leapp_tags(y, message))
    leapp.stop()
    compiled, pipeline = compile_and_load()
    assert compiled.spec.pipeline.data_flow == {"encode/y": ("act/y",)}
    x = torch.randn(3)
    with torch.no_grad():
        expected = LAYER(torch.tanh(x) * 3)
    torch.testing.assert_close(pipeline.step({"encode/x": x})["act/action"], expected)


def test_mirror_leapp_tags_marks_a_torch_target_in_place(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(2)})
    y = annotate.output_tensors("a", {"y": x * 2})
    target = torch.full((2,), 2.0)
    assert annotate.mirror_leapp_tags({"y": y}, {"y": target})["y"] is target
    assert isinstance(target, leapp.TracedTensor)


def test_mirror_leapp_tags_refuses_a_different_value(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(2)})
    y = annotate.output_tensors("a", {"y": x * 2})
    with pytest.raises(TraceError, match=r"target must equal source"):
        annotate.mirror_leapp_tags(y, torch.zeros(2))


def test_mirror_leapp_tags_with_a_plain_source_refuses_a_different_value_too(tmp_path):
    leapp.start("p", save_path=tmp_path)
    with pytest.raises(TraceError, match=r"target must equal source"):
        annotate.mirror_leapp_tags(torch.tensor([1.0]), torch.tensor([2.0]))
    target = torch.ones(2)
    mirrored = annotate.mirror_leapp_tags(torch.ones(2), target)
    assert mirrored is target and type(mirrored) is torch.Tensor  # plain stays plain


def test_mirror_leapp_tags_outside_a_session_returns_the_target():
    target = torch.zeros(2)
    assert annotate.mirror_leapp_tags(torch.ones(2), target) is target


def test_copies_of_an_output_that_passes_an_input_through_keep_the_edge(tmp_path):
    @annotate.method(export_with="jit")
    def split(a):
        return a, a + 1

    @annotate.method(export_with="jit")
    def join(b1, b2):
        return b1 * 2 + b2

    leapp.start("through", save_path=tmp_path)
    a, a_plus_one = split(torch.randn(3))
    buffer = torch.zeros_like(a)
    buffer[:] = a
    annotate.mirror_leapp_tags(a, buffer)  # in place, as LEAPP's tests use it
    join(buffer, a_plus_one.clone())
    leapp.stop()
    compiled, pipeline = compile_and_load()
    assert compiled.spec.pipeline.data_flow == {
        "split/a": ("join/b1",),
        "split/output2": ("join/b2",),
    }
    x = torch.randn(3)
    torch.testing.assert_close(pipeline.step({"split/a": x})["join/output1"], x * 2 + x + 1)
