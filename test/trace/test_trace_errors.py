"""Every misuse the tracer can detect raises a LeappError that says what, where and what next."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import leapp
from leapp import annotate
from leapp.errors import ExportError, GraphError, SessionError, SpecError, TraceError

HERE = re.escape(Path(__file__).name)


def test_output_given_a_value_not_traced_by_the_node_is_rejected(tmp_path):
    leapp.start("p", save_path=tmp_path)
    annotate.input_tensors("a", {"x": torch.ones(3)})
    with pytest.raises(
        TraceError, match=rf"node 'a': output 'y' at .*{HERE}:\d+ was not computed"
    ):
        annotate.output_tensors("a", {"y": torch.ones(3)})


def test_output_traced_by_another_node_is_rejected(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(3)})
    annotate.input_tensors("b", {"z": torch.ones(3)})
    with pytest.raises(TraceError, match=r"output 'y' .* was traced by node 'a', not by 'b'"):
        annotate.output_tensors("b", {"y": x * 2})


def test_values_of_two_open_nodes_cannot_be_mixed(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(3)})
    z = annotate.input_tensors("b", {"z": torch.ones(3)})
    with pytest.raises(TraceError, match=rf"at .*{HERE}:\d+ mixes values of the open nodes 'a'"):
        x + z


def test_value_of_a_closed_node_must_enter_through_input_tensors(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(3)})
    y = annotate.output_tensors("a", {"y": x * 2})
    z = annotate.input_tensors("b", {"z": torch.ones(3)})
    with pytest.raises(TraceError, match=r"uses a value of node 'a' \(already closed\)"):
        y + z


def test_duplicate_input_names_are_rejected(tmp_path):
    leapp.start("p", save_path=tmp_path)
    annotate.input_tensors("a", {"x": torch.ones(3)})
    with pytest.raises(GraphError, match=r"node 'a': input 'x' is declared twice"):
        annotate.input_tensors("a", {"x": torch.ones(3)})


def test_duplicate_output_names_are_rejected(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(3)})
    with pytest.raises(GraphError, match=r"node 'a': output 'y' is declared twice"):
        annotate.output_tensors("a", {"y": x * 2}, static_outputs={"y": torch.ones(1)})


def test_two_different_nodes_with_one_name_are_rejected(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(3)})
    annotate.output_tensors("a", {"y": x * 2})
    x = annotate.input_tensors("a", {"x": torch.ones(3)})
    with pytest.raises(GraphError, match=r"node 'a' ran again at .* recorded a different graph"):
        annotate.output_tensors("a", {"y": x + 2})


def test_invalid_node_name_is_rejected_with_a_suggestion(tmp_path):
    leapp.start("p", save_path=tmp_path)
    with pytest.raises(GraphError, match=r"name 'my node' is not valid.*'my_node'"):
        annotate.input_tensors("my node", {"x": torch.ones(3)})


def test_if_on_a_traced_value_raises_at_trace_time(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(3)})
    with pytest.raises(TraceError, match=rf"bool\(\)/if/while .* at .*{HERE}:\d+.*torch\.where"):
        if x.sum() > 0:
            pass


def test_while_on_a_traced_value_raises_at_trace_time(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(3)})
    with pytest.raises(TraceError, match=r"bool\(\)/if/while on a traced tensor"):
        while x.max() > 10:
            x = x / 2


def test_bool_of_a_traced_value_raises(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(1)})
    with pytest.raises(TraceError, match=r"node 'a': bool\(\)"):
        bool(x)


@pytest.mark.parametrize(
    ("convert", "what"),
    [
        (lambda x: x[0].item(), r"\.item\(\)"),
        (lambda x: x.tolist(), r"\.tolist\(\)"),
        (lambda x: float(x[0]), r"float\(\)"),
        (lambda x: int(x[0]), r"int\(\)"),
    ],
)
def test_python_values_from_traced_data_raise(tmp_path, convert, what):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(3)})
    with pytest.raises(TraceError, match=rf"{what} at .*{HERE}:\d+ turns a traced tensor"):
        convert(x)


def test_python_values_freeze_with_a_warning_when_allowed(tmp_path):
    leapp.start("p", save_path=tmp_path, freeze_python_values=True)
    x = annotate.input_tensors("a", {"x": torch.full((3,), 2.0)})
    with pytest.warns(leapp.FrozenValueWarning, match=r"froze a traced value as the constant 2"):
        scale = x[0].item()
    annotate.output_tensors("a", {"y": x * scale})
    leapp.stop()
    compiled = leapp.compile_graph()
    assert "mul" in leapp.format_graph(compiled.graphs["a"])


def test_compile_before_stop_is_rejected(tmp_path):
    leapp.start("p", save_path=tmp_path)
    with pytest.raises(SessionError, match=r"still recording; call leapp.stop\(\) first"):
        leapp.compile_graph()


def test_compile_without_a_session_is_rejected():
    with pytest.raises(SessionError, match=r"there is no session; call leapp.start\(\)"):
        leapp.compile_graph()


def test_node_opened_and_never_closed_is_reported_at_stop(tmp_path):
    leapp.start("p", save_path=tmp_path)
    annotate.input_tensors("a", {"x": torch.ones(3)})
    with pytest.raises(SessionError, match=rf"node\(s\) 'a' \(opened at .*{HERE}:\d+\) never"):
        leapp.stop()


def test_unknown_export_with_is_rejected(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(3)})
    with pytest.raises(ExportError, match=r"export_with='tflite' is neither a backend"):
        annotate.output_tensors("a", {"y": x * 2}, export_with="tflite")


def test_missing_spec_file_is_reported_with_its_path(tmp_path):
    with pytest.raises(SpecError, match=re.escape(str(tmp_path / "nothing"))):
        leapp.Pipeline.load(tmp_path / "nothing")


def test_malformed_spec_file_is_reported(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [\n")
    with pytest.raises(SpecError, match=r"bad\.yaml"):
        leapp.Pipeline.load(bad)


def test_checksum_mismatch_is_reported_with_the_file(tmp_path):
    leapp.start("p", save_path=tmp_path)
    x = annotate.input_tensors("a", {"x": torch.ones(3)})
    annotate.output_tensors("a", {"y": x * 2}, export_with="jit")
    leapp.stop()
    compiled = leapp.compile_graph()
    artifact = compiled.path.parent / "a.pt"
    artifact.write_bytes(artifact.read_bytes() + b"tampered")
    with pytest.raises(SpecError, match=r"a\.pt \(node 'a'\) to have sha256sum"):
        leapp.Pipeline.load(compiled.path)
