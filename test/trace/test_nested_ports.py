"""Nested containers as ports: one port per tensor, named by its path, values handed back in
the structure given (NVIDIA LEAPP's flattening).

Every export is compared with eager PyTorch on fresh random inputs through
``leapp.Pipeline.load(path).step``.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import torch

import leapp
from leapp import annotate
from leapp.errors import GraphError, PortNameError, PortTypeError, TraceError
from leapp.trace.arrays.array import TracedArray

HERE = Path(__file__).name


def _ports(compiled, node):
    model = compiled.spec.model(node)
    return [p.name for p in model.inputs], [p.name for p in model.outputs]


def _compile(tmp_path, run, name="nested"):
    leapp.start(name, save_path=tmp_path)
    run()
    leapp.stop()
    return leapp.compile_graph()


def _assert_steps_match(compiled, make_inputs, eager, steps=20):
    """``pipeline.step(make_inputs())`` equals ``eager(inputs)`` on fresh inputs."""
    pipeline = leapp.Pipeline.load(compiled.path)
    for _ in range(steps):
        inputs = make_inputs()
        got = pipeline.step(inputs)
        for key, expected in eager(inputs).items():
            torch.testing.assert_close(got[key], expected)


# ---------------------------------------------------------------------------- inputs
def test_nested_dict_input_becomes_one_port_per_leaf_named_by_path(tmp_path):
    def run():
        for _ in range(3):
            group = annotate.input_tensors(
                "node", {"group": {"x": torch.randn(3), "y": torch.randn(3)}}
            )
            assert isinstance(group, dict) and list(group) == ["x", "y"]
            annotate.output_tensors("node", {"result": group["x"] * group["y"] + 1.0})

    compiled = _compile(tmp_path, run)
    assert _ports(compiled, "node") == (["group_x", "group_y"], ["result"])
    _assert_steps_match(
        compiled,
        lambda: {"node/group_x": torch.randn(3), "node/group_y": torch.randn(3)},
        lambda i: {"node/result": i["node/group_x"] * i["node/group_y"] + 1.0},
    )


def test_several_entries_come_back_as_a_tuple_of_their_structures(tmp_path):
    def run():
        batch, scale = annotate.input_tensors(
            "node", {"batch": [torch.randn(2), torch.randn(2)], "scale": torch.randn(1)}
        )
        assert isinstance(batch, list) and len(batch) == 2
        annotate.output_tensors("node", {"result": (batch[0] + batch[1]) * scale})

    compiled = _compile(tmp_path, run)
    assert _ports(compiled, "node") == (["batch_0", "batch_1", "scale"], ["result"])
    _assert_steps_match(
        compiled,
        lambda: {
            "node/batch_0": torch.randn(2),
            "node/batch_1": torch.randn(2),
            "node/scale": torch.randn(1),
        },
        lambda i: {"node/result": (i["node/batch_0"] + i["node/batch_1"]) * i["node/scale"]},
    )


class Pair(NamedTuple):
    left: torch.Tensor
    right: torch.Tensor


def test_deep_nesting_keeps_every_container_type_and_names_ports_by_path(tmp_path):
    def run():
        payload = {
            "a": [torch.randn(3), {"leaf": torch.randn(3)}],
            "b": (torch.randn(3), [torch.randn(3)]),
            "c": Pair(torch.randn(3), torch.randn(3)),
        }
        traced = annotate.input_tensors("node", {"payload": payload})
        assert isinstance(traced["a"], list) and isinstance(traced["a"][1], dict)
        assert isinstance(traced["b"], tuple) and isinstance(traced["b"][1], list)
        assert isinstance(traced["c"], Pair)
        leaves = [traced["a"][0], traced["a"][1]["leaf"], traced["b"][0], traced["b"][1][0]]
        assert all(isinstance(leaf, leapp.TracedTensor) for leaf in leaves)
        total = sum(leaves) + traced["c"].left * traced["c"].right
        annotate.output_tensors("node", {"total": total})

    compiled = _compile(tmp_path, run)
    names = [
        "payload_a_0",
        "payload_a_1_leaf",
        "payload_b_0",
        "payload_b_1_0",
        "payload_c_0",
        "payload_c_1",
    ]
    assert _ports(compiled, "node") == (names, ["total"])

    def eager(i):
        total = sum(i[f"node/{n}"] for n in names[:4])
        return {"node/total": total + i["node/payload_c_0"] * i["node/payload_c_1"]}

    _assert_steps_match(compiled, lambda: {f"node/{n}": torch.randn(3) for n in names}, eager)


def test_numpy_arrays_nest_like_tensors(tmp_path):
    def run():
        arrays = annotate.input_tensors(
            "node", {"arrays": [np.random.rand(3).astype(np.float32) for _ in range(2)]}
        )
        assert all(isinstance(a, TracedArray) for a in arrays)
        annotate.output_tensors("node", {"out": {"sum": arrays[0] + arrays[1]}})

    compiled = _compile(tmp_path, run)
    assert _ports(compiled, "node") == (["arrays_0", "arrays_1"], ["out_sum"])
    _assert_steps_match(
        compiled,
        lambda: {"node/arrays_0": torch.rand(3), "node/arrays_1": torch.rand(3)},
        lambda i: {"node/out_sum": i["node/arrays_0"] + i["node/arrays_1"]},
    )


def test_an_empty_container_makes_no_port_and_comes_back_empty(tmp_path):
    def run():
        extras, x = annotate.input_tensors("node", {"extras": [], "x": torch.randn(3)})
        assert extras == []
        annotate.output_tensors("node", {"y": x - 1.0})

    compiled = _compile(tmp_path, run)
    assert _ports(compiled, "node") == (["x"], ["y"])
    _assert_steps_match(
        compiled, lambda: {"node/x": torch.randn(3)}, lambda i: {"node/y": i["node/x"] - 1.0}
    )


def test_nested_inputs_outside_a_session_come_back_as_given():
    a, b = torch.randn(3), torch.randn(3)
    group = {"x": a, "y": [b]}
    assert annotate.input_tensors("node", {"group": group}) is group
    outputs = [a, b]
    assert annotate.output_tensors("node", {"outs": outputs}) is outputs


# --------------------------------------------------------------------------- outputs
def test_nested_outputs_become_one_port_per_leaf_and_are_returned_as_given(tmp_path):
    def run():
        x = annotate.input_tensors("node", {"x": torch.randn(3)})
        outs = [x * 2.0, {"shifted": x + 1.0}]
        assert annotate.output_tensors("node", {"outs": outs}) is outs
        y = annotate.input_tensors("other", {"y": torch.randn(3)})
        given = annotate.output_tensors("other", {"a": (y,), "b": y * 3.0})
        assert isinstance(given, tuple) and given[0][0] is y

    compiled = _compile(tmp_path, run)
    assert _ports(compiled, "node") == (["x"], ["outs_0", "outs_1_shifted"])
    assert _ports(compiled, "other") == (["y"], ["a_0", "b"])

    def eager(i):
        x, y = i["node/x"], i["other/y"]
        return {
            "node/outs_0": x * 2,
            "node/outs_1_shifted": x + 1,
            "other/a_0": y,
            "other/b": y * 3,
        }

    _assert_steps_match(
        compiled, lambda: {"node/x": torch.randn(3), "other/y": torch.randn(3)}, eager
    )


def test_nested_outputs_fed_to_another_node_are_edges_leaf_by_leaf(tmp_path):
    def run():
        for _ in range(2):
            x = annotate.input_tensors("split", {"x": torch.randn(4)})
            parts = annotate.output_tensors("split", {"parts": [x[:2] * 2.0, x[2:] + 1.0]})
            got = annotate.input_tensors("join", {"parts": parts})
            annotate.output_tensors("join", {"joined": torch.cat([got[1], got[0]])})

    compiled = _compile(tmp_path, run)
    assert compiled.spec.pipeline.data_flow == {
        "split/parts_0": ("join/parts_0",),
        "split/parts_1": ("join/parts_1",),
    }
    _assert_steps_match(
        compiled,
        lambda: {"split/x": torch.randn(4)},
        lambda i: {"join/joined": torch.cat([i["split/x"][2:] + 1.0, i["split/x"][:2] * 2.0])},
    )


# -------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("api", ["state_tensors", "update_state"])
def test_a_nested_state_is_a_type_error_asking_for_one_named_tensor_per_state(tmp_path, api):
    leapp.start("states", save_path=tmp_path)
    annotate.input_tensors("node", {"obs": torch.randn(3)})
    with pytest.raises(
        PortTypeError,
        match=rf"at .*{HERE}:\d+: {api}\(\) for node 'node' does not support nested state "
        r"structures: state 'h' is a dict\. List each state as its own named tensor",
    ) as caught:
        getattr(annotate, api)("node", {"h": {"inner": torch.zeros(3)}})
    assert isinstance(caught.value, TypeError)


def test_a_nested_state_is_refused_outside_a_session_too():
    with pytest.raises(TypeError, match="does not support nested state structures"):
        annotate.state_tensors("node", {"h": [torch.zeros(3)]})


def test_a_flattened_name_that_collides_with_another_entry_is_refused_naming_both(tmp_path):
    leapp.start("collide", save_path=tmp_path)
    with pytest.raises(
        PortNameError,
        match=rf"at .*{HERE}:\d+: a_0 and a\[0\] both become the port 'a_0' of node 'node' "
        r"\(containers are flattened to <name>_<key or index>\); rename one",
    ) as caught:
        annotate.input_tensors("node", {"a_0": torch.zeros(3), "a": [torch.ones(3)]})
    assert isinstance(caught.value, GraphError)


def test_a_flattened_name_that_collides_with_an_earlier_input_is_refused(tmp_path):
    leapp.start("collide", save_path=tmp_path)
    annotate.input_tensors("node", {"group": {"x": torch.zeros(3)}})
    with pytest.raises(GraphError, match=r"input 'group_x' is declared twice"):
        annotate.input_tensors("node", {"group_x": torch.zeros(3)})


def test_a_flattened_name_must_be_a_valid_port_name(tmp_path):
    leapp.start("names", save_path=tmp_path)
    with pytest.raises(GraphError, match=r"name 'g_x-y' is not valid: .*\(e\.g\. 'g_x_y'\)"):
        annotate.input_tensors("node", {"g": {"x-y": torch.zeros(3)}})


def test_a_leaf_that_is_not_a_tensor_is_refused_by_its_port_name(tmp_path):
    leapp.start("leaves", save_path=tmp_path)
    with pytest.raises(TraceError, match=rf"input 'g_scale' at .*{HERE}:\d+ is a float"):
        annotate.input_tensors("node", {"g": {"x": torch.zeros(3), "scale": 2.0}})


def test_a_dict_key_that_is_not_a_string_is_refused(tmp_path):
    with pytest.raises(PortTypeError, match=r"port names are strings, got the key 3"):
        annotate.input_tensors("node", {3: torch.zeros(3)})


# ------------------------------------------------------------------- annotate.method
def test_method_arguments_holding_containers_are_flattened_by_path(tmp_path):
    @annotate.method()
    def mix(obs, gains):
        mixed = obs["joint"][0] * gains[0] + obs["joint"][1] * obs["base"]["vel"]
        return mixed

    def call():
        mix(
            {"joint": [torch.randn(3), torch.randn(3)], "base": {"vel": torch.randn(3)}},
            (torch.randn(3), 2),
        )

    compiled = _compile(tmp_path, call)
    assert _ports(compiled, "mix") == (
        ["obs_joint_0", "obs_joint_1", "obs_base_vel", "gains_0"],
        ["mixed"],
    )
    _assert_steps_match(
        compiled,
        lambda: {f"mix/{p}": torch.randn(3) for p in _ports(compiled, "mix")[0]},
        lambda i: {
            "mix/mixed": i["mix/obs_joint_0"] * i["mix/gains_0"]
            + i["mix/obs_joint_1"] * i["mix/obs_base_vel"]
        },
    )


def test_method_returned_containers_are_flattened_under_their_names(tmp_path):
    @annotate.method()
    def split(x):
        parts = [x * 2.0, x - 1.0]
        return parts

    @annotate.method()
    def named(x):
        return {"up": x + 1.0, "down": x - 1.0}

    @annotate.method()
    def pair(x):
        both = (x * 3.0, {"k": x * 4.0})
        return x + 0.5, both

    def call():
        x = torch.randn(3)
        assert isinstance(split(x), list)
        named(x)
        pair(x)

    compiled = _compile(tmp_path, call)
    assert _ports(compiled, "split") == (["x"], ["parts_0", "parts_1"])
    assert _ports(compiled, "named") == (["x"], ["output1_up", "output1_down"])
    assert _ports(compiled, "pair") == (["x"], ["output1", "both_0", "both_1_k"])

    def eager(i):
        s, n, p = i["split/x"], i["named/x"], i["pair/x"]
        return {
            "split/parts_0": s * 2,
            "split/parts_1": s - 1,
            "named/output1_up": n + 1,
            "named/output1_down": n - 1,
            "pair/output1": p + 0.5,
            "pair/both_0": p * 3,
            "pair/both_1_k": p * 4,
        }

    _assert_steps_match(
        compiled, lambda: {f"{n}/x": torch.randn(3) for n in ("split", "named", "pair")}, eager
    )


def test_method_arguments_flattening_to_one_port_name_are_refused(tmp_path):
    @annotate.method()
    def clash(a_0, a):
        return a_0 + a[0]

    leapp.start("clash", save_path=tmp_path)
    with pytest.raises(
        PortNameError,
        match=r"node 'clash': the arguments a_0 and a\[0\] of the function decorated with "
        r"annotate.method both become the port 'a_0'",
    ):
        clash(torch.zeros(3), [torch.ones(3)])
