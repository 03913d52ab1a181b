"""Each export backend writes an artifact that reproduces eager PyTorch on fresh inputs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import torch.fx
from support.eager import export_module

from leapp.errors import ExportError
from leapp.export import BACKENDS, Artifact, export_node

SAMPLES = 50

pytestmark = pytest.mark.filterwarnings("ignore:.*torch.jit.load. is deprecated")


class Mlp(torch.nn.Module):
    """Linear + LayerNorm + several activations."""

    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(9, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.second = torch.nn.Linear(16, 6)

    def forward(self, obs):
        hidden = torch.nn.functional.elu(self.norm(self.first(obs)))
        hidden = torch.relu(hidden) + torch.sigmoid(hidden) * torch.nn.functional.gelu(hidden)
        return torch.tanh(self.second(hidden))


class Mixed(torch.nn.Module):
    """Several outputs: float, 0-d float, 0-d int64, bool, a constant and a passthrough."""

    def __init__(self):
        super().__init__()
        self.register_buffer("gain", torch.linspace(0.5, 1.5, 4))

    def forward(self, x, count):
        scaled = x * self.gain
        return scaled, scaled.sum(), torch.argmax(x) + count, x > 0, self.gain * 1.0, count


def _loader(backend, path):
    """The artifact's own runtime (not leapp's), called positionally, returning a tuple."""
    if backend == "jit":
        module = torch.jit.load(str(path))
        return lambda *args: _as_tuple(module(*args))
    if backend == "pt2":
        module = torch.export.load(str(path)).module()
        return lambda *args: _as_tuple(module(*args))
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def run(*args):
        feed = {name: arg.numpy() for name, arg in zip(names, args, strict=True)}
        return tuple(torch.from_numpy(value) for value in session.run(None, feed))

    return run


def _as_tuple(value):
    return (value,) if isinstance(value, torch.Tensor) else tuple(value)


def _assert_same(actual, expected):
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        if want.dtype.is_floating_point:
            torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
        else:
            assert torch.equal(got, want)


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_mlp_artifact_matches_eager_on_fresh_inputs(backend, tmp_path):
    torch.manual_seed(0)
    eager, artifact = export_module(
        Mlp(), (torch.zeros(9),), backend, tmp_path, ["obs"], ["action"]
    )
    run = _loader(backend, tmp_path / artifact.model_path)
    for _ in range(SAMPLES):
        obs = torch.randn(9)
        _assert_same(run(obs), (eager(obs),))


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_multi_output_artifact_matches_eager_with_scalar_int_and_bool_outputs(backend, tmp_path):
    names = ["scaled", "total", "index", "positive", "gain", "count"]
    examples = (torch.zeros(4), torch.tensor(0))
    eager, artifact = export_module(Mixed(), examples, backend, tmp_path, ["x", "count"], names)
    run = _loader(backend, tmp_path / artifact.model_path)
    for step in range(SAMPLES):
        args = (torch.randn(4), torch.tensor(step))
        _assert_same(run(*args), eager(*args))


def test_jit_artifact_loads_without_leapp(tmp_path):
    eager, artifact = export_module(Mlp(), (torch.zeros(9),), "jit", tmp_path, ["obs"], ["action"])
    obs = torch.randn(SAMPLES, 9)
    torch.save({"obs": obs, "action": torch.stack([eager(o) for o in obs])}, tmp_path / "io.pt")
    code = textwrap.dedent(
        f"""
        import sys, torch
        module = torch.jit.load({artifact.model_path!r})
        data = torch.load("io.pt")
        for obs, action in zip(data["obs"], data["action"]):
            torch.testing.assert_close(module(obs), action, rtol=0, atol=1e-5)
        print(module.forward.schema)
        assert not any(name.startswith("leapp") for name in sys.modules), "leapp was imported"
        """
    )
    result = _run_isolated(code, tmp_path)
    assert "obs" in result.stdout


def test_onnx_artifact_runs_in_onnxruntime_without_torch(tmp_path):
    eager, artifact = export_module(
        Mlp(), (torch.zeros(9),), "onnx", tmp_path, ["obs"], ["action"]
    )
    obs = torch.randn(SAMPLES, 9)
    np.save(tmp_path / "obs.npy", obs.numpy())
    np.save(tmp_path / "action.npy", torch.stack([eager(o) for o in obs]).detach().numpy())
    code = textwrap.dedent(
        f"""
        import sys, numpy, onnxruntime
        session = onnxruntime.InferenceSession({artifact.model_path!r})
        for obs, action in zip(numpy.load("obs.npy"), numpy.load("action.npy")):
            (got,) = session.run(["action"], {{"obs": obs}})
            assert numpy.abs(got - action).max() <= 1e-5, numpy.abs(got - action).max()
        assert "torch" not in sys.modules, "torch was imported"
        """
    )
    _run_isolated(code, tmp_path)


def _run_isolated(code, directory):
    """Run ``code`` with ``python -I`` in ``directory``: the repository is not on sys.path."""
    result = subprocess.run(
        [sys.executable, "-I", "-c", code],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result


def test_onnx_names_inputs_and_outputs_after_ports_and_records_opset(tmp_path):
    import onnxruntime

    _, artifact = export_module(
        Mixed(),
        (torch.zeros(4), torch.tensor(0)),
        "onnx",
        tmp_path,
        ["x", "count"],
        ["a", "b", "c", "d", "e", "f"],
    )
    session = onnxruntime.InferenceSession(str(tmp_path / artifact.model_path))
    assert [i.name for i in session.get_inputs()] == ["x", "count"]
    assert [o.name for o in session.get_outputs()] == ["a", "b", "c", "d", "e", "f"]
    assert artifact == Artifact("node.onnx", "onnx", opset_version=20, torch_version=None)


def test_onnx_port_that_is_input_and_output_is_named_in_and_out(tmp_path):
    import onnxruntime

    module = torch.nn.Sequential(torch.nn.Tanh())
    _, artifact = export_module(module, (torch.zeros(3),), "onnx", tmp_path, ["h"], ["h"])
    session = onnxruntime.InferenceSession(str(tmp_path / artifact.model_path))
    assert [i.name for i in session.get_inputs()] == ["h_in"]
    assert [o.name for o in session.get_outputs()] == ["h_out"]


def test_jit_forward_arguments_are_the_port_names(tmp_path):
    _, artifact = export_module(
        Mixed(),
        (torch.zeros(4), torch.tensor(0)),
        "jit",
        tmp_path,
        ["joint_pos", "ticks"],
        ["a", "b", "c", "d", "e", "f"],
    )
    module = torch.jit.load(str(tmp_path / artifact.model_path))
    names = [argument.name for argument in module.forward.schema.arguments]
    assert names == ["self", "joint_pos", "ticks"]


def test_jit_renames_ports_that_cannot_be_python_arguments(tmp_path):
    graph = torch.fx.Graph()
    ports = ["joint-pos", "class", "self", "torch"]
    total = graph.placeholder("a")
    for name in ("b", "c", "d"):
        total = graph.call_function(torch.add, (total, graph.placeholder(name)))
    graph.output(total)
    graph_module = torch.fx.GraphModule(torch.nn.Module(), graph)
    artifact = export_node(
        graph_module,
        [torch.zeros(2)] * 4,
        node="n",
        input_names=ports,
        output_names=["sum"],
        backend="jit",
        directory=tmp_path,
    )
    module = torch.jit.load(str(tmp_path / artifact.model_path))
    names = [argument.name for argument in module.forward.schema.arguments][1:]
    assert all(name.isidentifier() for name in names) and "self" not in names
    assert names[0] == "joint_pos"
    args = [torch.full((2,), float(i)) for i in range(4)]
    assert torch.equal(module(*args), torch.full((2,), 6.0))
    targets = [n.target for n in graph_module.graph.nodes if n.op == "placeholder"]
    assert targets == ["a", "b", "c", "d"]  # the caller's graph is left as it was


def test_jit_traces_graphs_that_torchscript_cannot_script(tmp_path):
    def frobenius(x):
        return torch.norm(x, p="fro", dim=1)  # no TorchScript overload takes p="fro"

    graph_module = torch.fx.symbolic_trace(frobenius)
    artifact = export_node(
        graph_module,
        [torch.zeros(4, 3)],
        node="n",
        input_names=["x"],
        output_names=["norm"],
        backend="jit",
        directory=tmp_path,
    )
    run = _loader("jit", tmp_path / artifact.model_path)
    for _ in range(SAMPLES):
        x = torch.randn(4, 3)
        _assert_same(run(x), (frobenius(x),))


def test_export_drops_tensor_subclasses_from_constants(tmp_path):
    class Tagged(torch.Tensor):
        pass

    graph = torch.fx.Graph()
    graph.output(graph.call_function(torch.add, (graph.placeholder("x"), graph.get_attr("c"))))
    root = torch.nn.Module()
    root.c = torch.ones(3).as_subclass(Tagged)
    graph_module = torch.fx.GraphModule(root, graph)
    for backend in ("jit", "onnx"):
        artifact = export_node(
            graph_module,
            [torch.zeros(3)],
            node=f"n_{backend}",
            input_names=["x"],
            output_names=["y"],
            backend=backend,
            directory=tmp_path,
        )
        run = _loader(backend, tmp_path / artifact.model_path)
        assert torch.equal(run(torch.ones(3))[0], torch.full((3,), 2.0))


def test_pt2_records_the_torch_version(tmp_path):
    _, artifact = export_module(torch.nn.Tanh(), (torch.zeros(3),), "pt2", tmp_path, ["x"], ["y"])
    assert artifact == Artifact(
        "node.pt2", "pt2", opset_version=None, torch_version=torch.__version__
    )


def test_backend_none_writes_no_file(tmp_path):
    _, artifact = export_module(torch.nn.Tanh(), (torch.zeros(3),), None, tmp_path, ["x"], ["y"])
    assert artifact == Artifact(model_path=None, backend=None)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("backend", ["tensorrt", "ONNX", "", 3])
def test_unknown_backend_error_names_node_value_and_choices(backend, tmp_path):
    pattern = rf"node 'policy'.*unknown backend {backend!r}.*'jit', 'onnx', 'pt2', None"
    with pytest.raises(ExportError, match=pattern):
        export_module(
            torch.nn.Tanh(), (torch.zeros(3),), backend, tmp_path, ["x"], ["y"], "policy"
        )


def test_port_counts_must_match_the_graph(tmp_path):
    with pytest.raises(ExportError, match=r"node 'node'.*1 inputs.*2 input ports"):
        export_module(torch.nn.Tanh(), (torch.zeros(3),), "jit", tmp_path, ["x", "y"], ["z"])
    with pytest.raises(ExportError, match=r"node 'node'.*returns 1 values.*2 output ports"):
        export_module(torch.nn.Tanh(), (torch.zeros(3),), "jit", tmp_path, ["x"], ["y", "z"])


@pytest.mark.parametrize(
    ("backend", "suffix"), [("jit", ".pt"), ("onnx", ".onnx"), ("pt2", ".pt2")]
)
def test_custom_artifact_is_copied_and_its_backend_inferred(backend, suffix, tmp_path):
    made = tmp_path / "made"
    eager, source = export_module(
        Mlp(), (torch.zeros(9),), backend, made, ["obs"], ["action"], "mine"
    )
    user_file = made / source.model_path
    assert user_file.suffix == suffix
    out = tmp_path / "export"
    artifact = export_node(
        eager,
        (torch.zeros(9),),
        node="policy",
        input_names=["obs"],
        output_names=["action"],
        backend=str(user_file),
        directory=out,
    )
    assert artifact.model_path == f"policy{suffix}" and artifact.backend == backend
    assert (out / artifact.model_path).read_bytes() == user_file.read_bytes()
    assert artifact.opset_version == (20 if backend == "onnx" else None)


def test_custom_artifact_that_does_not_exist_is_an_error(tmp_path):
    with pytest.raises(ExportError, match=r"node 'policy'.*missing\.onnx.*does not exist"):
        export_module(
            torch.nn.Tanh(),
            (torch.zeros(3),),
            str(tmp_path / "missing.onnx"),
            tmp_path,
            ["x"],
            ["y"],
            "policy",
        )


def test_custom_artifact_of_unknown_kind_is_an_error(tmp_path):
    model = tmp_path / "policy.tflite"
    model.write_bytes(b"\0")
    with pytest.raises(ExportError, match=r"node 'policy'.*unknown kind '\.tflite'.*\.onnx"):
        export_module(torch.nn.Tanh(), (torch.zeros(3),), model, tmp_path, ["x"], ["y"], "policy")


def test_custom_pt_written_by_torch_save_is_rejected(tmp_path):
    model = tmp_path / "weights.pt"
    torch.save({"weight": torch.zeros(3)}, model)
    with pytest.raises(ExportError, match=r"not a TorchScript archive.*torch\.jit\.save"):
        export_module(torch.nn.Tanh(), (torch.zeros(3),), model, tmp_path, ["x"], ["y"], "policy")


def test_export_logs_its_time_at_debug(tmp_path, caplog):
    with caplog.at_level("DEBUG", logger="leapp.export"):
        export_module(torch.nn.Tanh(), (torch.zeros(3),), "onnx", tmp_path, ["x"], ["y"])
    messages = [record.getMessage() for record in caplog.records]
    assert any("exported as onnx in" in message for message in messages)
    assert json.dumps(messages)  # every message is plain text
