"""Warp calls inside a node: what the node's graph records, and the patterns leapp refuses
(each with the user's file and line, and what to do instead)."""

from __future__ import annotations

import operator
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from support.warp import kernels, wp

import leapp
from leapp import annotate
from leapp import session as session_module
from leapp.errors import SessionError, TraceError
from leapp.trace.segments import warp_calls, warp_op

THIS_FILE = r"test_warp_trace\.py:\d+"


def calls(graph_module) -> list:
    """The call targets of a recorded graph, segments as the string "warp_segment"."""
    return [
        "warp_segment" if warp_op.is_segment(n) else n.target
        for n in graph_module.graph.nodes
        if n.op in ("call_function", "call_method")
    ]


@pytest.fixture
def session(tmp_path):
    """A recording session, discarded at the end (a refused call leaves its node open)."""
    leapp.start("warp_trace", save_path=tmp_path)
    yield
    active = session_module.active_session()
    if active is not None:
        active.discard()
    warp_calls.deactivate()


def record(tmp_path, body, inputs=None):
    """Trace ``body(traced x)`` as node "n" (no artifact); the recorded graph."""
    leapp.start("warp_trace", save_path=tmp_path)
    x = annotate.input_tensors("n", {"x": torch.randn(4) if inputs is None else inputs})
    annotate.output_tensors("n", {"out": body(x)}, export_with=None)
    leapp.stop()
    return leapp.compile_graph(validate=False).graphs["n"]


def scaled(array, scale=2.0):
    """``array * scale`` by a Warp kernel, into a new array."""
    out = wp.zeros(array.shape[0], dtype=wp.float32)
    bias = wp.zeros(array.shape[0], dtype=wp.float32)
    wp.launch(kernels.scale_add, array.shape[0], inputs=[array, scale, bias], outputs=[out])
    return out


def test_warp_calls_between_torch_operations_are_one_segment_in_the_graph(tmp_path):
    def body(x):
        y = scaled(scaled(wp.from_torch(torch.tanh(x))), 0.5)
        return torch.relu(wp.to_torch(y))

    graph = record(tmp_path, body)
    assert calls(graph) == [torch.tanh, "warp_segment", operator.getitem, torch.relu]


def test_a_torch_operation_between_warp_calls_starts_a_new_segment(tmp_path):
    def body(x):
        first = scaled(wp.from_torch(x))
        shifted = wp.from_torch(torch.sin(x))
        total = wp.zeros(4, dtype=wp.float32)
        wp.launch(kernels.scale_add, 4, inputs=[shifted, 1.0, first], outputs=[total])
        return wp.to_torch(total)

    graph = record(tmp_path, body)
    assert calls(graph) == [
        "warp_segment",
        operator.getitem,
        torch.sin,
        "warp_segment",
        operator.getitem,
    ]
    first, second = [n for n in graph.graph.nodes if warp_op.is_segment(n)]
    assert second.args[1][1].args == (first, 0)  # the second reads the first's array


def test_a_warp_write_into_a_traced_tensor_is_seen_by_torch_after_it(tmp_path):
    def body(x):
        y = x * 1.0
        wp.launch(kernels.square_in_place, 4, inputs=[wp.from_torch(y)])
        return y + 1

    graph = record(tmp_path, body)
    assert calls(graph) == [torch.mul, "warp_segment", operator.getitem, "copy_", torch.add]


def test_a_kernel_that_only_reads_a_traced_tensor_writes_nothing_back(tmp_path):
    graph = record(tmp_path, lambda x: wp.to_torch(scaled(wp.from_torch(x))))
    assert "copy_" not in calls(graph)


def test_warp_op_records_calls_on_arrays_that_hold_no_traced_value(tmp_path):
    def body(x):
        with annotate.warp_op("n"):
            table = scaled(wp.array(np.arange(4, dtype=np.float32)))
        return x + wp.to_torch(table)

    graph = record(tmp_path, body)
    assert calls(graph) == ["warp_segment", operator.getitem, torch.add]


def test_warp_op_outside_a_session_records_nothing():
    with annotate.warp_op("n"):
        out = scaled(wp.from_torch(torch.ones(4)))
    assert out.numpy().tolist() == [2.0] * 4


def test_warp_op_on_a_node_that_is_not_open_is_refused(session):
    with pytest.raises(SessionError, match=rf"warp_op\('n'\) at .*{THIS_FILE}.*input_tensors"):
        annotate.warp_op("n")


@pytest.mark.parametrize(
    "read, what",
    [
        (lambda a: a.numpy(), r"array\.numpy\(\)"),
        (lambda a: a.list(), r"array\.list\(\)"),
        (np.asarray, r"NumPy reading the array \(np\.asarray, np\.array\)"),
    ],
    ids=["numpy", "list", "np.asarray"],
)
def test_reading_a_warp_array_of_the_node_on_the_host_is_refused(session, read, what):
    x = annotate.input_tensors("n", {"x": torch.randn(4)})
    out = scaled(wp.from_torch(x))
    with pytest.raises(TraceError, match=rf"node 'n': {what} at .*{THIS_FILE}.*wp\.to_torch"):
        read(out)


def test_printing_a_warp_array_of_the_node_is_allowed(session, capsys):
    x = annotate.input_tensors("n", {"x": torch.ones(4)})
    print(scaled(wp.from_torch(x)))
    assert "[2. 2. 2. 2.]" in capsys.readouterr().out


def test_arrays_of_two_nodes_in_one_launch_are_refused(session):
    a = annotate.input_tensors("a", {"x": torch.randn(4)})
    b = annotate.input_tensors("b", {"x": torch.randn(4)})
    out = wp.zeros(4, dtype=wp.float32)
    with pytest.raises(TraceError, match=rf"scale_add.* at .*{THIS_FILE}.*nodes 'a' and 'b'"):
        wp.launch(
            kernels.scale_add, 4, inputs=[wp.from_torch(a), 1.0, wp.from_torch(b)], outputs=[out]
        )


def test_an_array_of_a_closed_node_inside_another_node_is_refused(session):
    x = annotate.input_tensors("a", {"x": torch.randn(4)})
    first = scaled(wp.from_torch(x))
    annotate.output_tensors("a", {"out": wp.to_torch(first)}, export_with=None)
    y = annotate.input_tensors("b", {"y": torch.randn(4)})
    out = wp.zeros(4, dtype=wp.float32)
    with pytest.raises(TraceError, match=r"node 'a' \(already closed\) inside node 'b'"):
        wp.launch(kernels.scale_add, 4, inputs=[wp.from_torch(y), 1.0, first], outputs=[out])


def test_struct_arrays_in_a_launch_are_refused(session):
    x = annotate.input_tensors("n", {"x": torch.randn(4)})
    gains = wp.zeros(4, dtype=kernels.Gains)
    out = wp.zeros(4, dtype=wp.float32)
    with pytest.raises(TraceError, match=rf"at .*{THIS_FILE} passes an array of @wp\.struct"):
        wp.launch(kernels.pd_with_struct_array, 4, inputs=[gains, wp.from_torch(x)], outputs=[out])


def test_a_slice_of_a_node_array_in_a_launch_is_refused(session):
    x = annotate.input_tensors("n", {"x": torch.randn(4)})
    with pytest.raises(TraceError, match=rf"at .*{THIS_FILE} passes a view \(a slice\)"):
        scaled(wp.from_torch(x)[1:])


def test_a_warp_array_copied_from_a_traced_value_is_refused(session):
    x = annotate.input_tensors("n", {"x": np.ones(4, dtype=np.float32)})
    with pytest.raises(TraceError, match=rf"wp\.array\(<traced value>\) at .*{THIS_FILE}"):
        wp.array(x, dtype=wp.float32)


def test_warp_functions_are_the_originals_again_after_stop(tmp_path):
    from warp._src import context
    from warp._src import torch as warp_torch

    leapp.start("warp_trace", save_path=tmp_path)
    assert wp.launch is not context.launch
    leapp.stop()
    assert (wp.launch, wp.from_torch, wp.to_torch) == (
        context.launch,
        warp_torch.from_torch,
        warp_torch.to_torch,
    )
    assert "numpy" in vars(wp.array) and not hasattr(wp.array.numpy, "__wrapped__")


def test_warp_imported_after_leapp_start_is_recorded_too(tmp_path):
    script = textwrap.dedent(
        f"""
        import leapp
        leapp.start("late", save_path={str(tmp_path)!r})
        import warp
        from warp._src import context
        assert warp.launch is not context.launch, "not patched"
        leapp.stop()
        assert warp.launch is context.launch, "not restored"
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
