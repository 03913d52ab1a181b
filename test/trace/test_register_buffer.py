"""annotate.register_buffer: buffers a node writes into are part of the node; what it writes
into them is recorded, so the export computes them from the node's inputs (torch and NumPy)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import leapp
from leapp import annotate
from leapp.errors import SessionError, TraceError
from leapp.session import active_session


def export_and_load(tmp_path, trace_once, name="buffers"):
    leapp.start(name, save_path=tmp_path)
    with torch.no_grad():
        trace_once()
    leapp.stop()
    compiled = leapp.compile_graph()
    return compiled, leapp.Pipeline.load(compiled.path)


def compile_and_load_stopped():
    compiled = leapp.compile_graph()
    return compiled, leapp.Pipeline.load(compiled.path)


def step(pipeline, inputs):
    """``pipeline.step`` with NumPy inputs; outputs as NumPy arrays."""
    outputs = pipeline.step({key: torch.from_numpy(value) for key, value in inputs.items()})
    return {key: value.numpy() for key, value in outputs.items()}


# ----------------------------------------------------------------------------- torch buffers
def test_in_place_writes_into_a_registered_torch_buffer_are_recorded(tmp_path):
    buf = torch.zeros(4)

    def scale(x):
        x = annotate.input_tensors("scale", {"x": x})
        b = annotate.register_buffer("scale", {"buf": buf})
        b[:] = x
        out = b * 100
        annotate.output_tensors("scale", {"out": out}, export_with="jit")
        return out

    _, pipeline = export_and_load(tmp_path, lambda: scale(torch.randn(4)))
    for _ in range(10):
        x = torch.randn(4)
        got = pipeline.step({"scale/x": x})["scale/out"]
        torch.testing.assert_close(got, x * 100)


def test_elements_a_run_does_not_write_keep_their_value_at_registration(tmp_path):
    buf = torch.arange(6.0)

    def half_write(x):
        x = annotate.input_tensors("n", {"x": x})
        b = annotate.register_buffer("n", buf)
        b[:3].copy_(x)
        annotate.output_tensors("n", {"y": b * 2}, export_with="onnx")

    _, pipeline = export_and_load(tmp_path, lambda: half_write(torch.randn(3)))
    for _ in range(5):
        x = torch.randn(3)
        expected = torch.cat([x, torch.tensor([3.0, 4.0, 5.0])]) * 2
        torch.testing.assert_close(pipeline.step({"n/x": x})["n/y"], expected)


def test_a_registered_torch_buffer_is_the_same_object_and_plain_after_the_node(tmp_path):
    buf = torch.zeros(3)
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.ones(3)})
    assert annotate.register_buffer("n", buf) is buf
    assert isinstance(buf, leapp.TracedTensor)
    buf.add_(x)
    annotate.output_tensors("n", {"y": buf * 1})
    leapp.stop()
    assert type(buf) is torch.Tensor
    torch.testing.assert_close(buf, torch.ones(3))


def test_unregistered_plain_tensor_of_another_class_says_to_register_it(tmp_path):
    weights = torch.nn.Parameter(torch.zeros(3), requires_grad=False)
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.ones(3)})
    with pytest.raises(TraceError, match=r"annotate\.register_buffer\('n'"):
        weights.copy_(x)
    traced = annotate.register_buffer("n", {"weights": weights})
    traced.copy_(x)
    annotate.output_tensors("n", {"y": traced + 1})


LAYER = torch.nn.Linear(5, 2).eval()


def prepare(buf, x):
    x = annotate.input_tensors("prepare", {"x": x})
    obs = annotate.register_buffer("prepare", {"obs": buf})
    obs[:3] = x * 2
    annotate.output_tensors("prepare", {"obs": obs}, export_with="jit")
    return obs


def act(obs):
    obs = annotate.input_tensors("act", {"obs": obs})
    action = LAYER(obs)
    annotate.output_tensors("act", {"action": action}, export_with="jit")
    return action


def test_a_published_torch_buffer_is_an_edge_to_the_next_node(tmp_path):
    buf = torch.zeros(5)
    leapp.start("edge", save_path=tmp_path)
    with torch.no_grad():
        for _ in range(2):
            act(prepare(buf, torch.randn(3)))
    leapp.stop()
    compiled = leapp.compile_graph()
    assert type(buf) is torch.Tensor  # plain again between the nodes
    assert compiled.spec.pipeline.data_flow == {"prepare/obs": ("act/obs",)}
    pipeline = leapp.Pipeline.load(compiled.path)
    for _ in range(5):
        x = torch.randn(3)
        with torch.no_grad():
            expected = LAYER(torch.cat([x * 2, torch.zeros(2)]))
        torch.testing.assert_close(pipeline.step({"prepare/x": x})["act/action"], expected)


def test_a_published_torch_buffer_written_between_the_nodes_is_refused(tmp_path):
    buf = torch.zeros(5)
    leapp.start("edge", save_path=tmp_path)
    obs = prepare(buf, torch.randn(3))
    obs[3:] = 1.0  # outside any node
    with pytest.raises(TraceError, match=r"buffer node 'prepare' published as 'obs', written"):
        act(obs)


# ----------------------------------------------------------------------------- names
def test_buffers_given_without_names_are_numbered_and_one_value_comes_back_alone(tmp_path):
    a, b, c = torch.zeros(2), torch.zeros(2), torch.zeros(2)
    leapp.start("p", save_path=tmp_path)
    annotate.input_tensors("n", {"x": torch.ones(2)})
    assert annotate.register_buffer("n", [a, b]) == (a, b)
    assert annotate.register_buffer("n", c) is c
    assert list(active_session().open["n"].registered) == ["buffer_0", "buffer_1", "buffer_2"]


def test_a_dict_gives_the_names_and_one_entry_comes_back_alone(tmp_path):
    a, b = np.zeros(2, np.float32), np.zeros(3, np.float32)
    leapp.start("p", save_path=tmp_path)
    annotate.input_tensors("n", {"x": torch.ones(2)})
    one = annotate.register_buffer("n", {"a": a})
    two = annotate.register_buffer("n", {"b": b, "c": torch.zeros(1)})
    assert isinstance(one, leapp.TracedArray) and isinstance(two, tuple) and len(two) == 2
    assert list(active_session().open["n"].registered) == ["a", "b", "c"]
    with pytest.raises(leapp.GraphError, match=r"already has a buffer named 'a'"):
        annotate.register_buffer("n", {"a": torch.zeros(1)})


def test_a_nested_buffer_payload_comes_back_in_its_structure(tmp_path):
    payload = {"a": [torch.full((3,), 0.5)], "b": {"inner": torch.full((3,), 1.5)}}
    leapp.start("nested", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.ones(3)})
    traced = annotate.register_buffer("n", {"buffers": payload})
    assert list(active_session().open["n"].registered) == ["buffers_a_0", "buffers_b_inner"]
    assert traced["a"][0] is payload["a"][0] and traced["b"]["inner"] is payload["b"]["inner"]
    traced["a"][0].copy_(x)
    annotate.output_tensors("n", {"y": traced["a"][0] + traced["b"]["inner"]})
    leapp.stop()
    _, pipeline = compile_and_load_stopped()
    x = torch.randn(3)
    torch.testing.assert_close(pipeline.step({"n/x": x})["n/y"], x + 1.5)


def test_register_buffer_outside_a_session_returns_the_values_unchanged():
    a, b = torch.zeros(2), np.zeros(2)
    assert annotate.register_buffer("n", a) is a
    assert annotate.register_buffer("n", {"a": a}) is a
    assert annotate.register_buffer("n", [a, b]) == (a, b)
    assert annotate.register_buffer("n", {"a": a, "b": b}) == (a, b)


def test_register_buffer_needs_the_node_open(tmp_path):
    leapp.start("p", save_path=tmp_path)
    with pytest.raises(SessionError, match=r"node 'n' has no open run.*input_tensors\('n'"):
        annotate.register_buffer("n", {"buf": torch.zeros(2)})


def test_another_nodes_published_output_is_not_a_buffer(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(2)})
    y = annotate.output_tensors("a", {"y": x * 2})
    annotate.input_tensors("b", {"z": torch.ones(2)})
    with pytest.raises(TraceError, match=r"output 'y' of node 'a'.*input_tensors\('b'"):
        annotate.register_buffer("b", {"buf": y})


# ----------------------------------------------------------------------------- NumPy buffers
def test_registered_numpy_obs_buffer_records_slice_writes(tmp_path):
    obs_buffer = np.zeros(8, np.float32)

    def observe(omega, qj):
        omega, qj = annotate.input_tensors("obs", {"omega": omega, "qj": qj})
        obs = annotate.register_buffer("obs", {"obs": obs_buffer})
        obs[:3] = omega * 0.25
        obs[3:7] = qj - np.float32(0.5)
        out = torch.from_numpy(obs) * 2
        annotate.output_tensors("obs", {"out": out}, export_with="jit")
        return out

    rng = np.random.default_rng(0)
    _, pipeline = export_and_load(
        tmp_path, lambda: observe(rng.standard_normal(3, np.float32), np.ones(4, np.float32))
    )
    for _ in range(10):
        omega, qj = rng.standard_normal(3, np.float32), rng.standard_normal(4, np.float32)
        expected = np.concatenate([omega * 0.25, qj - 0.5, [0.0]]).astype(np.float32) * 2
        got = step(pipeline, {"obs/omega": omega, "obs/qj": qj})["obs/out"]
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_a_numpy_buffer_rebound_to_the_registered_array_works_on_every_tick(tmp_path):
    obs = np.zeros(4, np.float32)
    leapp.start("p", save_path=tmp_path)
    for tick in range(3):
        x = annotate.input_tensors("n", {"x": np.full(2, tick, np.float32)})
        obs = annotate.register_buffer("n", obs)  # the traced array from now on
        obs[2:] = x * 3
        annotate.output_tensors("n", {"y": obs + 1}, export_with="jit")
    leapp.stop()
    pipeline = leapp.Pipeline.load(leapp.compile_graph().path)
    x = np.array([1.5, -2.0], np.float32)
    np.testing.assert_allclose(step(pipeline, {"n/x": x})["n/y"], [1, 1, 5.5, -5])


def test_unregistered_numpy_buffer_filled_by_slice_writes_says_to_register_it(tmp_path):
    obs = np.zeros(6, np.float32)
    leapp.start("p", save_path=tmp_path)
    omega = annotate.input_tensors("n", {"omega": np.ones(3, np.float32)})
    obs[:3] = omega * 0.25  # plain NumPy: no hook sees this write
    with pytest.raises(TraceError, match=r"annotate\.register_buffer\('n', \{'obs': obs\}\)"):
        annotate.output_tensors("n", {"y": torch.from_numpy(obs) * 2})


def test_numpy_writes_into_an_unregistered_array_say_to_register_it(tmp_path):
    out = np.zeros(3, np.float32)
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": np.ones(3, np.float32)})
    with pytest.raises(TraceError, match=r"not traced.*annotate\.register_buffer\('n'"):
        np.copyto(out, x * 2)


# ----------------------------------------------------------------------- a real deploy loop
NUM_ACTIONS = 12
NUM_OBS = 9 + 3 * NUM_ACTIONS + 2
DEFAULT_ANGLES = np.array(
    [-0.1, 0.0, 0.0, 0.3, -0.2, 0.0, -0.1, 0.0, 0.0, 0.3, -0.2, 0.0], np.float32
)
ANG_VEL_SCALE, DOF_POS_SCALE, DOF_VEL_SCALE, ACTION_SCALE = 0.25, 1.0, 0.05, 0.25
CMD_SCALE = np.array([2.0, 2.0, 0.25], np.float32)
torch.manual_seed(7)
POLICY = torch.nn.Sequential(
    torch.nn.Linear(NUM_OBS, 32), torch.nn.ELU(), torch.nn.Linear(32, NUM_ACTIONS)
).eval()


def policy_step(obs_buffer, omega, gravity, cmd, qj, dqj, phase, last_action):
    """One control tick as Unitree's deploy scripts write it, annotated as one node."""
    omega, gravity, cmd, qj, dqj, phase, last_action = annotate.input_tensors(
        "policy",
        {
            "omega": omega,
            "gravity": gravity,
            "cmd": cmd,
            "qj": qj,
            "dqj": dqj,
            "phase": phase,
            "last_action": last_action,
        },
    )
    obs = annotate.register_buffer("policy", {"obs": obs_buffer})
    obs[:3] = omega * ANG_VEL_SCALE
    obs[3:6] = gravity
    obs[6:9] = cmd * CMD_SCALE
    obs[9 : 9 + NUM_ACTIONS] = (qj - DEFAULT_ANGLES) * DOF_POS_SCALE
    obs[9 + NUM_ACTIONS : 9 + 2 * NUM_ACTIONS] = dqj * DOF_VEL_SCALE
    obs[9 + 2 * NUM_ACTIONS : 9 + 3 * NUM_ACTIONS] = last_action
    obs[9 + 3 * NUM_ACTIONS :] = phase
    obs_tensor = torch.from_numpy(obs).unsqueeze(0)
    action = POLICY(obs_tensor).detach().numpy().squeeze()
    target_dof_pos = action * ACTION_SCALE + DEFAULT_ANGLES
    annotate.output_tensors(
        "policy", {"action": action, "target_dof_pos": target_dof_pos}, export_with="jit"
    )
    return action, target_dof_pos


def sensors(rng, tick):
    period = 0.8
    phase = (tick * 0.02) % period / period
    return (
        rng.standard_normal(3).astype(np.float32),  # angular velocity
        rng.standard_normal(3).astype(np.float32),  # projected gravity
        rng.uniform(-1, 1, 3).astype(np.float32),  # command
        (DEFAULT_ANGLES + 0.1 * rng.standard_normal(NUM_ACTIONS)).astype(np.float32),
        rng.standard_normal(NUM_ACTIONS).astype(np.float32),  # joint velocities
        np.array([np.sin(2 * np.pi * phase), np.cos(2 * np.pi * phase)], np.float32),
    )


def deploy(ticks):
    """The deploy loop: one preallocated obs, the last action fed back; targets per tick."""
    obs_buffer = np.zeros(NUM_OBS, np.float32)
    action, targets = np.zeros(NUM_ACTIONS, np.float32), []
    with torch.no_grad():
        for tick in ticks:
            action, target = policy_step(obs_buffer, *tick, action)
            targets.append(np.array(target, copy=True))
    return targets


def test_unitree_style_deploy_loop_exports_and_matches_eager(tmp_path):
    rng = np.random.default_rng(1)
    leapp.start("g1", save_path=tmp_path)
    deploy([sensors(rng, t) for t in range(3)])
    leapp.stop()
    compiled = leapp.compile_graph()
    spec = compiled.spec
    assert spec.pipeline.feedback_flow == {"policy/action": ("policy/last_action",)}
    assert spec.pipeline.inputs == {"policy": ("omega", "gravity", "cmd", "qj", "dqj", "phase")}
    pipeline = leapp.Pipeline.load(compiled.path)
    ticks = [sensors(rng, t) for t in range(20)]  # fresh values
    names = ("omega", "gravity", "cmd", "qj", "dqj", "phase")
    for tick, expected in zip(ticks, deploy(ticks), strict=True):
        got = step(pipeline, {f"policy/{n}": v for n, v in zip(names, tick, strict=True)})
        np.testing.assert_allclose(got["policy/target_dof_pos"], expected, rtol=1e-5, atol=1e-5)
