"""``annotate.method``: one call of a decorated function is one run of one pipeline node.

Every exported artifact is compared with eager PyTorch on fresh random inputs.
"""

from __future__ import annotations

import pytest
import torch
from support.eager import assert_matches_eager

import leapp
from leapp import annotate
from leapp.trace.tensors.tensor import TracedTensor

W = torch.randn(6, 4)
U = torch.randn(4, 4)
GAIN, OFFSET = torch.tensor(2.0), torch.tensor(0.5)


def _ports(compiled, node):
    model = compiled.spec.model(node)
    return [p.name for p in model.inputs], [p.name for p in model.outputs]


def _compile(tmp_path, run, name="pipe"):
    leapp.start(name, save_path=tmp_path)
    run()
    leapp.stop()
    return leapp.compile_graph()


# ------------------------------------------------------------------------------ pipelines
@annotate.method(export_with="jit")
def preprocess(state, velocity):
    obs = torch.cat([torch.clamp(state * 2.0 - 1.0, -5.0, 5.0), velocity])
    return obs


@annotate.method(export_with="onnx")
def policy(obs):
    action = torch.tanh(obs @ W)
    return action


def test_passing_one_decorated_result_to_the_next_is_a_data_flow_edge(tmp_path):
    compiled = _compile(tmp_path, lambda: policy(preprocess(torch.randn(3), torch.randn(3))))
    assert compiled.spec.pipeline.data_flow == {"preprocess/obs": ("policy/obs",)}
    assert compiled.spec.pipeline.outputs == {"policy": ("action",)}
    pipeline = leapp.Pipeline.load(compiled.path)
    for _ in range(20):
        state, velocity = torch.randn(3), torch.randn(3)
        got = pipeline.step({"preprocess/state": state, "preprocess/velocity": velocity})
        expected = policy(preprocess(state, velocity))  # outside a session: plain calls
        torch.testing.assert_close(got["policy/action"], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["jit", "onnx"])
def test_calls_in_a_loop_are_runs_of_one_node_with_their_feedback(tmp_path, backend):
    @annotate.method(export_with=backend)
    def gru_step(x, h):
        h = torch.tanh(x @ W + h @ U)
        return h

    def loop():
        h = torch.zeros(4)
        for _ in range(3):
            h = gru_step(torch.randn(6), h)

    compiled = _compile(tmp_path, loop)
    h_in, h_out = ("h_in", "h_out") if backend == "onnx" else ("h", "h")  # LEAPP's ONNX names
    assert compiled.spec.pipeline.feedback_flow == {f"gru_step/{h_out}": (f"gru_step/{h_in}",)}
    assert compiled.spec.pipeline.inputs == {"gru_step": ("x",)}
    pipeline = leapp.Pipeline.load(compiled.path)
    h = torch.zeros(4)
    for _ in range(10):
        x = torch.randn(6)
        got = pipeline.step({"gru_step/x": x})
        h = gru_step(x, h)
        torch.testing.assert_close(got[f"gru_step/{h_out}"], h, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------ inputs
def test_parameters_left_at_their_defaults_are_not_inputs(tmp_path):
    @annotate.method()
    def scale(x, gain=GAIN, offset=OFFSET):
        y = x * gain + offset
        return y

    compiled = _compile(tmp_path, lambda: scale(torch.randn(5), offset=torch.tensor(1.0)))
    assert _ports(compiled, "scale") == (["x", "offset"], ["y"])
    assert_matches_eager(
        compiled,
        lambda x, offset: x * 2.0 + offset,
        lambda: {"x": torch.randn(5), "offset": torch.randn(())},
        node="scale",
    )


def test_python_number_arguments_are_values_not_inputs(tmp_path):
    @annotate.method()
    def shift(x, k):
        y = x + k
        return y

    compiled = _compile(tmp_path, lambda: shift(torch.randn(3), 4))
    assert _ports(compiled, "shift") == (["x"], ["y"])
    assert_matches_eager(compiled, lambda x: x + 4, lambda: {"x": torch.randn(3)}, node="shift")


def test_tensors_among_star_args_are_inputs_named_by_position(tmp_path):
    @annotate.method()
    def combine(*parts):
        total = parts[0] * parts[1] + parts[2]
        return total

    compiled = _compile(tmp_path, lambda: combine(torch.randn(3), 3.0, torch.randn(3)))
    assert _ports(compiled, "combine") == (["parts_0", "parts_2"], ["total"])
    assert_matches_eager(
        compiled,
        lambda parts_0, parts_2: parts_0 * 3.0 + parts_2,
        lambda: {"parts_0": torch.randn(3), "parts_2": torch.randn(3)},
        node="combine",
    )


def test_keyword_arguments_are_inputs_named_by_parameter(tmp_path):
    @annotate.method()
    def mix(a, b):
        c = a - b
        return c

    compiled = _compile(tmp_path, lambda: mix(b=torch.randn(2), a=torch.randn(2)))
    inputs, _ = _ports(compiled, "mix")
    assert sorted(inputs) == ["a", "b"]


def test_a_node_without_inputs_exports_its_constant_outputs(tmp_path):
    @annotate.method()
    def limits():
        return torch.ones(3) * 2.0

    compiled = _compile(tmp_path, limits)
    assert _ports(compiled, "limits") == ([], ["output1"])
    got = leapp.Pipeline.load(compiled.path).step({})
    torch.testing.assert_close(got["limits/output1"], torch.full((3,), 2.0))


# ------------------------------------------------------------------------------ outputs
def test_returned_names_name_the_outputs_and_expressions_count_by_position(tmp_path):
    @annotate.method()
    def split(x):
        a = x * 2
        b = x - 1
        return a, b + 1, b

    compiled = _compile(tmp_path, lambda: split(torch.randn(4)))
    assert _ports(compiled, "split") == (["x"], ["a", "output2", "b"])
    assert_matches_eager(
        compiled, lambda x: (x * 2, x, x - 1), lambda: {"x": torch.randn(4)}, node="split"
    )


def test_a_single_returned_expression_is_output1(tmp_path):
    @annotate.method()
    def double(x):
        return x * 2

    compiled = _compile(tmp_path, lambda: double(torch.randn(4)))
    assert _ports(compiled, "double") == (["x"], ["output1"])


def test_return_statements_agreeing_on_a_name_keep_it(tmp_path):
    @annotate.method()
    def pick(x, fast=False):
        if fast:
            y = x
            return y
        y = x + 1
        return y

    compiled = _compile(tmp_path, lambda: pick(torch.randn(2)))
    assert _ports(compiled, "pick") == (["x"], ["y"])


def test_return_statements_with_different_counts_are_refused(tmp_path):
    @annotate.method()
    def uneven(x, both=True):
        if both:
            return x, x * 2
        return x

    leapp.start("pipe", save_path=tmp_path)
    with pytest.raises(leapp.TraceError, match=r"uneven.*different numbers of values"):
        uneven(torch.randn(2))
    leapp.stop()  # nothing left open


def test_without_source_outputs_are_named_by_position(tmp_path):
    namespace = {"torch": torch}
    exec("def hidden(x):\n    a = x + 1\n    return a, a * 2\n", namespace)
    hidden = annotate.method()(namespace["hidden"])
    compiled = _compile(tmp_path, lambda: hidden(torch.randn(3)))
    assert _ports(compiled, "hidden") == (["x"], ["output1", "output2"])


# ------------------------------------------------------------------------------ wrapped callables
class Policy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(6, 3)

    def forward(self, obs):
        action = torch.tanh(self.net(obs))
        return action


def test_a_bound_method_is_a_node_without_self(tmp_path):
    model = Policy().eval()
    eager = Policy().eval()
    eager.load_state_dict(model.state_dict())
    model.forward = annotate.method(node_name="model_forward", export_with="jit")(model.forward)
    compiled = _compile(tmp_path, lambda: model(torch.randn(2, 6)))
    assert _ports(compiled, "model_forward") == (["obs"], ["action"])
    with torch.no_grad():
        assert_matches_eager(
            compiled, eager, lambda: {"obs": torch.randn(2, 6)}, node="model_forward"
        )


def test_a_no_grad_wrapped_function_is_named_and_bound_by_the_inner_function(tmp_path):
    @annotate.method(export_with="onnx")
    @torch.no_grad()
    def act(obs, gain=GAIN):
        action = obs * gain
        return action

    compiled = _compile(tmp_path, lambda: act(torch.randn(4)))
    assert [m.name for m in compiled.spec.models] == ["act"]
    assert _ports(compiled, "act") == (["obs"], ["action"])
    assert_matches_eager(compiled, lambda obs: obs * 2.0, lambda: {"obs": torch.randn(4)}, "act")


# ------------------------------------------------------------------------------ around a session
def test_outside_a_session_the_function_is_simply_called():
    x = torch.randn(3)
    result = preprocess(x, x)
    assert type(result) is torch.Tensor
    torch.testing.assert_close(result, torch.cat([torch.clamp(x * 2.0 - 1.0, -5.0, 5.0), x]))


def test_inside_a_session_the_function_returns_traced_values_plain_again_after_stop(tmp_path):
    leapp.start("pipe", save_path=tmp_path)
    obs = preprocess(torch.randn(3), torch.randn(3))
    assert isinstance(obs, TracedTensor)
    kept = obs
    leapp.stop()
    assert type(obs) is torch.Tensor and obs is kept
    assert not [name for name in vars(obs) if name.startswith("_leapp_")]


def test_backend_params_are_kept_on_the_node_recording(tmp_path):
    @annotate.method(export_with=None, backend_params={"opset_version": 17})
    def node(x):
        y = x + 1
        return y

    recording = leapp.start("pipe", save_path=tmp_path)
    node(torch.randn(2))
    leapp.stop()
    assert recording.runs["node"][0].backend_params == {"opset_version": 17}


def test_an_exception_inside_the_function_leaves_no_node_open(tmp_path):
    @annotate.method()
    def broken(x):
        raise RuntimeError("boom")

    leapp.start("pipe", save_path=tmp_path)
    with pytest.raises(RuntimeError, match="boom"):
        broken(torch.randn(2))
    leapp.stop()  # would raise SessionError if 'broken' were still open


class DecoratedPolicy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(6, 3)

    @annotate.method(export_with="onnx")
    def forward(self, obs):
        action = torch.tanh(self.net(obs))
        return action


def test_a_method_decorated_in_the_class_body_is_a_node_without_self(tmp_path):
    model = DecoratedPolicy().eval()
    compiled = _compile(tmp_path, lambda: model(torch.randn(6)))
    assert _ports(compiled, "forward") == (["obs"], ["action"])
    with torch.no_grad():
        assert_matches_eager(compiled, model, lambda: {"obs": torch.randn(6)}, node="forward")


def test_numpy_array_arguments_are_inputs(tmp_path):
    import numpy as np

    @annotate.method()
    def norm(q):
        unit = q / np.linalg.norm(q)
        return unit

    compiled = _compile(tmp_path, lambda: norm(np.random.rand(4).astype(np.float32) + 0.1))
    assert _ports(compiled, "norm") == (["q"], ["unit"])
    assert_matches_eager(
        compiled, lambda q: q / torch.linalg.norm(q), lambda: {"q": torch.rand(4) + 0.1}, "norm"
    )


@pytest.mark.parametrize("argument", ["outer's input", "a fresh tensor"])
def test_a_decorated_call_inside_another_decorated_call_is_refused(tmp_path, argument):
    """Decorated nodes do not nest (NVIDIA LEAPP refuses it too), whatever the inner call is
    given: not only a value of the open outer node, a tensor of its own as well."""

    @annotate.method()
    def inner(x):
        y = x + 1
        return y

    @annotate.method()
    def outer(x):
        z = inner(x if argument == "outer's input" else torch.ones(2)) * 2 + x
        return z

    leapp.start("pipe", save_path=tmp_path)
    with pytest.raises(leapp.TraceError, match="inside the decorated call of node 'outer'"):
        outer(torch.randn(2))
    leapp.stop()  # neither node is left open
    with pytest.raises(leapp.GraphError, match="recorded no nodes"):
        leapp.compile_graph()  # neither call was recorded


def test_annotating_another_node_inside_a_decorated_call_is_refused(tmp_path):
    @annotate.method()
    def policy(x):
        annotate.input_tensors("rogue", {"y": torch.randn(3)})
        return x * 2

    leapp.start("pipe", save_path=tmp_path)
    with pytest.raises(leapp.TraceError, match=r"input_tensors\('rogue'\).*node 'policy'"):
        policy(torch.randn(3))
    leapp.stop()  # neither node is left open
