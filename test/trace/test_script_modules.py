"""TorchScript inside a node: a scripted, traced or loaded module (the ``policy.pt`` rsl_rl and
Isaac Lab write), a ScriptFunction or a torch.export program's ``.module()`` called on traced
values is recorded as the operations it runs; tensors a script writes (an LSTM actor's hidden
and cell state) are states of the node, carried across ticks as in eager PyTorch; what cannot
be recorded is a TraceError naming the node, the script and the user's line. Every export is
compared with eager PyTorch on fresh inputs through leapp.Pipeline (and the LSTM actor over
the live ROS graph)."""

from __future__ import annotations

import inspect

import pytest
import torch
from safetensors.torch import load_file
from support.eager import assert_matches_eager, export_function

import leapp
from leapp import annotate
from leapp import session as session_module
from leapp.errors import TraceError

BACKENDS = ("jit", "onnx", "pt2")
TICKS = 30
OBS, HIDDEN, ACT = 8, 16, 4


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(OBS, 32), torch.nn.ELU(), torch.nn.Linear(32, ACT)
    ).eval()


class LSTMActor(torch.nn.Module):
    """A recurrent actor as rsl_rl-style exporters write it: LSTM memory in buffers written in
    place by forward, an MLP head, and reset()."""

    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(OBS, HIDDEN, num_layers=1)
        self.head = torch.nn.Sequential(
            torch.nn.Linear(HIDDEN, 32), torch.nn.ELU(), torch.nn.Linear(32, ACT)
        )
        self.register_buffer("hidden_state", torch.zeros(1, 1, HIDDEN))
        self.register_buffer("cell_state", torch.zeros(1, 1, HIDDEN))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        out, (h, c) = self.rnn(obs.unsqueeze(0), (self.hidden_state, self.cell_state))
        self.hidden_state[:] = h
        self.cell_state[:] = c
        return self.head(out.squeeze(0))

    @torch.jit.export
    def reset(self) -> None:
        self.hidden_state[:] = 0.0
        self.cell_state[:] = 0.0


def saved_and_loaded(module: torch.nn.Module, path) -> torch.jit.ScriptModule:
    """``torch.jit.script`` + save, then ``torch.jit.load``, as a policy.pt is made and used."""
    torch.jit.save(torch.jit.script(module), str(path))
    return torch.jit.load(str(path))


def policy_tick(policy, obs: torch.Tensor, backend: str) -> torch.Tensor:
    obs = annotate.input_tensors("policy", {"obs": obs})
    action = policy(obs)
    annotate.output_tensors("policy", {"action": action}, export_with=backend)
    return action


def export_policy(tmp_path, policy, backend: str, ticks: int = 2):
    session_module._active = None
    leapp.start("scripted", save_path=tmp_path / backend)
    with torch.no_grad():
        for _ in range(ticks):
            policy_tick(policy, torch.randn(1, OBS), backend)
    leapp.stop()
    return leapp.compile_graph()


def assert_pipeline_follows_eager(compiled, eager, states=(), ticks: int = TICKS) -> None:
    pipeline = leapp.Pipeline.load(compiled.path)
    with torch.no_grad():
        for tick in range(ticks):
            obs = torch.randn(1, OBS)
            expected = eager(obs)
            got = pipeline.step({"policy/obs": obs})
            close = {"rtol": 1e-5, "atol": 1e-5, "msg": lambda m, t=tick: f"tick {t}: {m}"}
            torch.testing.assert_close(got["policy/action"], expected, **close)
            for name in states:  # an ONNX node's state output is <name>_out, as LEAPP names it
                key = f"policy/{name}_out" if f"policy/{name}_out" in got else f"policy/{name}"
                torch.testing.assert_close(got[key], getattr(eager, name), **close)


# ----------------------------------------------------------------------------- scripted MLP
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loaded_scripted_mlp_exports_and_matches_eager_over_30_ticks(tmp_path, backend):
    torch.manual_seed(0)
    policy = saved_and_loaded(mlp(), tmp_path / "policy.pt")
    compiled = export_policy(tmp_path, policy, backend)
    assert dict(compiled) == {"policy": True}
    assert [p.name for p in compiled.spec.model("policy").inputs] == ["obs"]
    assert_pipeline_follows_eager(compiled, policy)


def test_a_scripted_mlp_is_recorded_as_its_operations_with_its_weights_as_constants(tmp_path):
    torch.manual_seed(0)
    policy = torch.jit.script(mlp())
    leapp.start("scripted", save_path=tmp_path)
    policy_tick(policy, torch.randn(1, OBS), "jit")
    leapp.stop()
    trace = session_module._active.runs["policy"][0]
    calls = [str(n.target) for n in trace.graph.nodes if n.op == "call_function"]
    assert calls == ["aten.linear.default", "aten.elu.default", "aten.linear.default"]
    assert list(trace.inputs) == ["obs"] and not trace.state_ports


# ------------------------------------------------------------------- scripted LSTM actor
@pytest.fixture(scope="module")
def lstm_file(tmp_path_factory):
    torch.manual_seed(3)
    path = tmp_path_factory.mktemp("lstm") / "policy.pt"
    torch.jit.save(torch.jit.script(LSTMActor().eval()), str(path))
    return path


@pytest.mark.parametrize("backend", BACKENDS)
def test_lstm_buffers_written_in_place_are_states_carried_across_30_ticks_like_eager(
    tmp_path, lstm_file, backend
):
    compiled = export_policy(tmp_path, torch.jit.load(str(lstm_file)), backend, ticks=3)
    assert dict(compiled) == {"policy": True}
    model = compiled.spec.model("policy")
    into, out = ("_in", "_out") if backend == "onnx" else ("", "")  # LEAPP's ONNX state names
    assert [p.name for p in model.inputs] == ["obs", f"hidden_state{into}", f"cell_state{into}"]
    assert [p.name for p in model.outputs] == [
        "action",
        f"hidden_state{out}",
        f"cell_state{out}",
    ]
    assert compiled.spec.pipeline.feedback_flow == {
        f"policy/hidden_state{out}": (f"policy/hidden_state{into}",),
        f"policy/cell_state{out}": (f"policy/cell_state{into}",),
    }
    initial = load_file(str(compiled.spec.directory / compiled.spec.pipeline.initial_values))
    assert torch.equal(initial[f"policy/hidden_state{into}"], torch.zeros(1, 1, HIDDEN))
    assert_pipeline_follows_eager(
        compiled, torch.jit.load(str(lstm_file)), states=("hidden_state", "cell_state")
    )


def test_tracing_the_lstm_actor_leaves_its_buffers_as_eager_calls_do(lstm_file, tmp_path):
    traced, eager = torch.jit.load(str(lstm_file)), torch.jit.load(str(lstm_file))
    observations = [torch.randn(1, OBS) for _ in range(3)]
    leapp.start("scripted", save_path=tmp_path)
    with torch.no_grad():
        for obs in observations:
            action = policy_tick(traced, obs.clone(), "jit")
            torch.testing.assert_close(action.tensor, eager(obs))
    leapp.stop()
    assert type(traced.hidden_state) is torch.Tensor
    torch.testing.assert_close(traced.hidden_state, eager.hidden_state)
    torch.testing.assert_close(traced.cell_state, eager.cell_state)
    traced.reset()
    assert not traced.hidden_state.any()


@pytest.mark.ros
def test_the_lstm_actor_over_the_live_ros_graph_equals_eager_at_every_tick(tmp_path, lstm_file):
    pytest.importorskip("rclpy")
    from leapp_ros.testing import Deployment, GraphUnderTest

    compiled = export_policy(tmp_path, torch.jit.load(str(lstm_file)), "jit")
    eager = torch.jit.load(str(lstm_file))
    with GraphUnderTest(compiled.path.parent, Deployment.COMPOSED) as graph, torch.no_grad():
        for tick in range(TICKS):
            obs = torch.randn(1, OBS)
            expected = eager(obs)
            got = graph.step({"policy/obs": obs})
            close = {"rtol": 0, "atol": 1e-5, "msg": lambda m, t=tick: f"tick {t}: {m}"}
            torch.testing.assert_close(got["policy/action"], expected, **close)
            torch.testing.assert_close(got["policy/cell_state"], eager.cell_state, **close)


class History(torch.nn.Module):
    """An observation history written slice by slice, and a step counter reassigned."""

    def __init__(self):
        super().__init__()
        self.register_buffer("history", torch.zeros(3, OBS))
        self.register_buffer("steps", torch.zeros(1))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        self.history[1:] = self.history[:-1].clone()
        self.history[0] = obs[0]
        self.steps = self.steps + 1
        return self.history.sum(0, keepdim=True) / self.steps


def test_partial_writes_and_reassigned_buffers_are_states_too(tmp_path):
    path = tmp_path / "history.pt"
    compiled = export_policy(tmp_path, saved_and_loaded(History(), path), "onnx", ticks=2)
    ports = [p.name for p in compiled.spec.model("policy").inputs]
    assert ports == ["obs", "history_in", "steps_in"]  # an ONNX node's states, as LEAPP names them
    assert_pipeline_follows_eager(compiled, torch.jit.load(str(path)), ("history", "steps"))


def test_a_buffer_the_script_only_reads_is_a_constant(tmp_path):
    class Normalized(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.randn(OBS))

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return obs - self.mean

    policy = torch.jit.script(Normalized())
    compiled = export_policy(tmp_path, policy, "pt2")
    assert [p.name for p in compiled.spec.model("policy").inputs] == ["obs"]
    assert not compiled.spec.pipeline.feedback_flow
    assert_pipeline_follows_eager(compiled, policy, ticks=5)


def test_two_calls_in_one_tick_chain_the_state(tmp_path, lstm_file):
    traced, eager = torch.jit.load(str(lstm_file)), torch.jit.load(str(lstm_file))

    def twice(module, obs):
        return module(obs) + module(obs * 2)

    leapp.start("scripted", save_path=tmp_path)
    with torch.no_grad():
        for _ in range(2):
            obs = annotate.input_tensors("policy", {"obs": torch.randn(1, OBS)})
            annotate.output_tensors("policy", {"action": twice(traced, obs)}, export_with="jit")
    leapp.stop()
    compiled = leapp.compile_graph()
    with torch.no_grad():
        assert_pipeline_follows_eager(compiled, lambda obs: twice(eager, obs), ticks=10)


# ------------------------------------------------- traced modules, functions, torch.export
def fresh_obs() -> dict[str, torch.Tensor]:
    return {"obs": torch.randn(1, OBS)}


def test_a_torch_jit_traced_module_is_recorded(tmp_path):
    torch.manual_seed(4)
    traced = torch.jit.trace(mlp(), torch.randn(1, OBS))
    compiled = export_function(tmp_path, lambda obs: traced(obs), fresh_obs(), "onnx")
    assert dict(compiled) == {"node": True}
    assert_matches_eager(compiled, lambda obs: traced(obs), fresh_obs, samples=TICKS)


@torch.jit.script
def squash(obs: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.tanh(obs) * scale + obs.mean(-1, keepdim=True)


def test_a_script_function_called_on_traced_values_is_recorded(tmp_path):
    compiled = export_function(tmp_path, lambda obs: squash(obs, 0.5), fresh_obs(), "jit")
    assert dict(compiled) == {"node": True}
    assert_matches_eager(compiled, lambda obs: squash(obs, 0.5), fresh_obs, samples=TICKS)
    assert type(squash(torch.ones(1), 1.0)) is torch.Tensor


def test_script_functions_are_called_unwrapped_once_the_session_stops(tmp_path):
    original = torch._C.ScriptFunction.__call__
    leapp.start("scripted", save_path=tmp_path)
    assert torch._C.ScriptFunction.__call__ is not original
    leapp.stop()
    assert torch._C.ScriptFunction.__call__ is original


def test_a_torch_export_program_module_is_recorded(tmp_path):
    torch.manual_seed(5)
    program = torch.export.export(mlp(), (torch.randn(1, OBS),)).module()
    compiled = export_function(tmp_path, lambda obs: program(obs), fresh_obs(), "onnx")
    assert dict(compiled) == {"node": True}
    assert_matches_eager(compiled, lambda obs: program(obs), fresh_obs, samples=TICKS)


class Accumulating(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(1, OBS))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        self.total.add_(obs)
        return self.total * 2


def test_a_torch_export_program_writing_its_buffer_is_a_state_with_annotate_module(tmp_path):
    example = (torch.randn(1, OBS),)
    program = torch.export.export(Accumulating(), example).module()
    eager = torch.export.export(Accumulating(), example).module()
    leapp.start("exported", save_path=tmp_path)
    with torch.no_grad():
        for _ in range(2):
            obs = annotate.input_tensors("policy", {"obs": torch.randn(1, OBS)})
            annotate.module("policy", program)
            annotate.output_tensors("policy", {"action": program(obs)}, export_with="pt2")
    leapp.stop()
    compiled = leapp.compile_graph()
    assert [p.name for p in compiled.spec.model("policy").inputs] == ["obs", "total"]
    assert_pipeline_follows_eager(compiled, eager, states=("total",), ticks=10)


# -------------------------------------------------------------------------- error paths
def line_of(marker: str) -> str:
    source, _ = inspect.getsourcelines(inspect.getmodule(line_of))
    number = next(i for i, text in enumerate(source, 1) if marker in text)
    return f"{__file__}:{number}"


@torch.jit.script
def flip_if_positive(obs: torch.Tensor) -> torch.Tensor:
    if bool(obs.sum() > 0):
        return -obs
    return obs


def test_control_flow_on_values_inside_a_script_is_a_trace_error_naming_node_and_line(tmp_path):
    leapp.start("scripted", save_path=tmp_path)
    obs = annotate.input_tensors("policy", {"obs": torch.ones(1, OBS)})
    with pytest.raises(TraceError) as error:
        flip_if_positive(obs)  # the call site
    message = str(error.value)
    assert "node 'policy'" in message and "flip_if_positive" in message
    assert line_of("flip_if_positive(obs)  # the call site") in message
    assert "turns a tensor into a Python value" in message and "torch.where" in message
    assert f"at {line_of('if bool(obs.sum() > 0):')} in the script" in message


class Counting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return obs * 2


def test_a_script_changing_a_non_tensor_attribute_is_refused_and_left_unchanged(tmp_path):
    counting = torch.jit.script(Counting())
    leapp.start("scripted", save_path=tmp_path)
    obs = annotate.input_tensors("policy", {"obs": torch.ones(1, OBS)})
    with pytest.raises(TraceError) as error:
        counting(obs)  # the counting call
    message = str(error.value)
    assert "node 'policy'" in message and "module Counting (forward)" in message
    assert "attribute 'calls' (int)" in message and "annotate.state_tensors" in message
    assert line_of("counting(obs)  # the counting call") in message
    assert counting.calls == 0


def test_a_script_that_fails_on_its_inputs_is_a_trace_error_naming_the_module(tmp_path):
    policy = torch.jit.script(mlp())
    leapp.start("scripted", save_path=tmp_path)
    obs = annotate.input_tensors("policy", {"obs": torch.ones(1, OBS + 1)})
    with pytest.raises(TraceError) as error:
        policy(obs)  # the wrong shape
    message = str(error.value)
    assert "node 'policy'" in message and "module Sequential (forward)" in message
    assert line_of("policy(obs)  # the wrong shape") in message


class ListHistory(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.frames: list[torch.Tensor] = [torch.zeros(1, OBS)]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        self.frames[0].add_(obs)
        return self.frames[0]


def test_a_write_into_a_tensor_held_in_a_list_attribute_is_refused(tmp_path):
    history = torch.jit.script(ListHistory())
    leapp.start("scripted", save_path=tmp_path)
    obs = annotate.input_tensors("policy", {"obs": torch.ones(1, OBS)})
    with pytest.raises(TraceError) as error:
        history(obs)  # the list write
    message = str(error.value)
    assert "node 'policy'" in message and "module ListHistory (forward)" in message
    assert line_of("history(obs)  # the list write") in message
    assert "registered buffer" in message
    assert not history.frames[0].any()  # the dry run's write was put back


def test_a_script_function_on_an_output_between_nodes_cannot_feed_another_node(tmp_path):
    leapp.start("scripted", save_path=tmp_path)
    obs = annotate.input_tensors("first", {"obs": torch.ones(1, OBS)})
    out = obs * 2
    annotate.output_tensors("first", {"out": out}, export_with="jit")
    squashed = squash(out, 0.5)  # outside any node
    with pytest.raises(TraceError) as error:
        annotate.input_tensors("second", {"obs": squashed})
    assert "TorchScript function squash" in str(error.value)
    assert line_of("squashed = squash(out, 0.5)  # outside any node") in str(error.value)
