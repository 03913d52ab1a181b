"""Rules of leapp.spec.examples: the <name>_examples.safetensors file."""

from __future__ import annotations

import json
import re

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from leapp.errors import SpecError
from leapp.spec.examples import NodeSample, load_examples, save_examples


def file_keys(path) -> list[str]:
    with safe_open(str(path), framework="pt") as handle:
        return sorted(handle.keys())


def assert_same_samples(actual, expected) -> None:
    assert list(actual) == list(expected)
    for node in expected:
        assert len(actual[node]) == len(expected[node])
        for got, want in zip(actual[node], expected[node], strict=True):
            for role in ("inputs", "outputs"):
                got_ports, want_ports = getattr(got, role), getattr(want, role)
                assert list(got_ports) == list(want_ports)
                for port, value in want_ports.items():
                    assert got_ports[port].dtype == value.dtype
                    assert got_ports[port].shape == value.shape
                    assert torch.equal(got_ports[port], value)


def test_examples_round_trip_a_single_run_per_node(tmp_path):
    samples = {
        "preprocess": [
            NodeSample(
                {"state": torch.randn(6), "velocity": torch.randn(3)},
                {"obs": torch.randn(9)},
            )
        ],
        "policy": [NodeSample({"obs": torch.randn(9)}, {"action": torch.randn(6)})],
    }
    path = tmp_path / "torch_pipeline_examples.safetensors"

    save_examples(path, samples)

    assert_same_samples(load_examples(path), samples)
    assert file_keys(path) == sorted(
        [
            "preprocess/state",
            "preprocess/velocity",
            "preprocess/obs",
            "policy/obs",
            "policy/action",
        ]
    )


def test_examples_key_each_run_when_a_node_ran_more_than_once(tmp_path):
    samples = {
        "policy": [
            NodeSample({"obs": torch.full((2,), float(i))}, {"action": torch.full((1,), -i)})
            for i in range(3)
        ]
    }
    path = tmp_path / "examples.safetensors"

    save_examples(path, samples)

    assert_same_samples(load_examples(path), samples)
    assert file_keys(path) == sorted(
        f"policy/{port}/{i}" for port in ("obs", "action") for i in range(3)
    )


def test_examples_suffix_ports_that_are_both_input_and_output(tmp_path):
    h_in, h_out = torch.zeros(4), torch.ones(4)
    samples = {"rnn": [NodeSample({"x": torch.randn(2), "h": h_in}, {"h": h_out, "y": h_in})]}
    path = tmp_path / "examples.safetensors"

    save_examples(path, samples)

    loaded = load_examples(path)
    assert_same_samples(loaded, samples)
    assert torch.equal(loaded["rnn"][0].inputs["h"], h_in)
    assert torch.equal(loaded["rnn"][0].outputs["h"], h_out)
    assert file_keys(path) == ["rnn/h_in", "rnn/h_out", "rnn/x", "rnn/y"]


def test_examples_suffix_colliding_ports_of_repeated_runs(tmp_path):
    samples = {
        "rnn": [NodeSample({"h": torch.tensor(i)}, {"h": torch.tensor(i + 1)}) for i in (0, 1)]
    }
    path = tmp_path / "examples.safetensors"

    save_examples(path, samples)

    assert_same_samples(load_examples(path), samples)
    assert file_keys(path) == ["rnn/h_in/0", "rnn/h_in/1", "rnn/h_out/0", "rnn/h_out/1"]


def test_examples_keep_ports_whose_names_look_like_suffixed_keys(tmp_path):
    samples = {
        "n": [
            NodeSample(
                {"h": torch.tensor(1.0), "h_in": torch.tensor(2.0)}, {"h": torch.tensor(3.0)}
            )
        ]
    }
    path = tmp_path / "examples.safetensors"

    save_examples(path, samples)

    assert_same_samples(load_examples(path), samples)


def test_examples_round_trip_scalars_and_non_float_dtypes(tmp_path):
    samples = {
        "n": [
            NodeSample(
                {
                    "scalar": torch.tensor(3.5),
                    "mask": torch.tensor([True, False, True]),
                    "index": torch.tensor([1, 2**40], dtype=torch.int64),
                },
                {"half": torch.tensor([0.5, -2.0], dtype=torch.float16), "count": torch.tensor(7)},
            )
        ]
    }
    path = tmp_path / "examples.safetensors"

    save_examples(path, samples)

    assert_same_samples(load_examples(path), samples)


def test_examples_store_views_and_shared_tensors_as_contiguous_copies(tmp_path):
    base = torch.arange(12.0).reshape(3, 4)
    samples = {"n": [NodeSample({"t": base.T, "row": base[1]}, {"same": base.T})]}
    path = tmp_path / "examples.safetensors"

    save_examples(path, samples)
    base.zero_()

    loaded = load_examples(path)["n"][0]
    assert torch.equal(loaded.inputs["t"], torch.arange(12.0).reshape(3, 4).T)
    assert torch.equal(loaded.inputs["row"], torch.tensor([4.0, 5.0, 6.0, 7.0]))
    assert loaded.inputs["t"].is_contiguous()


def test_examples_of_a_node_without_inputs_round_trip(tmp_path):
    samples = {"source": [NodeSample({}, {"y": torch.randn(2)})]}
    path = tmp_path / "examples.safetensors"

    save_examples(path, samples)

    assert_same_samples(load_examples(path), samples)


def test_load_examples_rejects_a_missing_file_naming_it(tmp_path):
    path = tmp_path / "gone_examples.safetensors"

    with pytest.raises(SpecError, match=re.escape(str(path))):
        load_examples(path)


def test_load_examples_rejects_a_corrupt_file_naming_it(tmp_path):
    path = tmp_path / "corrupt_examples.safetensors"
    path.write_bytes(b"\x00\x01 this is not safetensors at all")

    with pytest.raises(SpecError, match=re.escape(str(path))):
        load_examples(path)


def test_load_examples_rejects_a_safetensors_file_without_leapp_metadata(tmp_path):
    path = tmp_path / "foreign.safetensors"
    save_file({"policy/obs": torch.zeros(2)}, str(path))

    with pytest.raises(SpecError, match=re.escape(str(path)) + " is not a leapp examples file"):
        load_examples(path)


def test_load_examples_rejects_metadata_naming_absent_tensors(tmp_path):
    path = tmp_path / "examples.safetensors"
    layout = {"policy": [{"inputs": {"obs": "policy/obs"}, "outputs": {}}]}
    save_file(
        {"other": torch.zeros(1)},
        str(path),
        metadata={"format": "leapp-examples/1", "layout": json.dumps(layout)},
    )

    with pytest.raises(SpecError, match=r"expected tensors policy/obs but they are not in"):
        load_examples(path)
