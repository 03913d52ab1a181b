"""Pipelines written the way NVIDIA LEAPP's examples are (its getting-started pipeline, a GRU
policy whose hidden state is a module buffer, a feedback loop between two nodes, semantics on
joint ports), only with LEAPP's public API, run with our ``leapp``.

Each export is run over several ticks of fresh random inputs (through ``leapp.Pipeline`` or
LEAPP's ``InferenceManager``) and compared with the same code run eagerly.
"""

from __future__ import annotations

import torch
import yaml

import leapp
from leapp import InputKindEnum, OutputKindEnum, TemporalAxis, TensorSemantics, annotate

TICKS = 12


def _close(got: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------- getting started
_SCALE = torch.linspace(0.5, 1.5, 4)
_WEIGHT = torch.randn(11, 4, generator=torch.Generator().manual_seed(3)) * 0.2


def _gravity(quat):
    w, x, y, z = quat[0], quat[1], quat[2], quat[3]
    return torch.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)])


def _features(pos, vel, quat, cmd):
    return torch.cat([pos / _SCALE, vel * 0.25, _gravity(quat)])[:11] + cmd.sum()


def _targets(features):
    return torch.clamp(features @ _WEIGHT * 0.5, -0.8, 0.8)


def _observe(pos, vel):  # one of two input_tensors calls of the same node, as LEAPP's guide does
    return annotate.input_tensors("observe", {"joint_pos": pos, "joint_vel": vel})


def test_a_getting_started_pipeline_with_two_input_calls_matches_eager(tmp_path):
    leapp.start(name="sample", save_path=tmp_path)
    pos, vel = _observe(torch.randn(4), torch.randn(4))
    quat, cmd = annotate.input_tensors(
        "observe", {"orientation": torch.tensor([1.0, 0, 0, 0]), "cmd": torch.randn(3)}
    )
    features = _features(pos, vel, quat, cmd)
    annotate.output_tensors("observe", {"features": features}, export_with="jit")
    feat = annotate.input_tensors("act", {"features": features})
    annotate.output_tensors("act", {"targets": _targets(feat)}, export_with="onnx")
    leapp.stop()
    result = leapp.compile_graph(visualize=True)
    assert all(result.values()) and (result.path.parent / "sample.png").is_file()

    pipeline = leapp.Pipeline.load(result.path)
    for _ in range(TICKS):
        quat = torch.nn.functional.normalize(torch.randn(4), dim=0)
        fresh = {"joint_pos": torch.randn(4), "joint_vel": torch.randn(4), "cmd": torch.randn(3)}
        out = pipeline.step(
            {**{f"observe/{k}": v for k, v in fresh.items()}, "observe/orientation": quat}
        )
        expected = _features(fresh["joint_pos"], fresh["joint_vel"], quat, fresh["cmd"])
        _close(out["act/targets"], _targets(expected))


# ------------------------------------------------------------------- GRU state in a buffer
class _GruPolicy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRU(6, 8)
        self.head = torch.nn.Sequential(
            torch.nn.Linear(8, 8), torch.nn.ELU(), torch.nn.Linear(8, 3)
        )
        self.register_buffer("h_state", torch.zeros(1, 1, 8))

    def forward(self, obs):
        out, h = self.gru(obs.unsqueeze(0), self.h_state)
        self.h_state = h  # reassigned every step: annotate.module makes it a state
        return self.head(out.squeeze(0))


def test_a_gru_policy_tracked_with_annotate_module_matches_eager_over_ticks(tmp_path):
    torch.manual_seed(0)
    model = _GruPolicy().eval()
    reference = _GruPolicy().eval()
    reference.load_state_dict(model.state_dict())
    with torch.no_grad():
        leapp.start("gru", save_path=tmp_path)
        obs = annotate.input_tensors("policy", {"obs": torch.randn(1, 6)})
        annotate.module("policy", model)
        annotate.output_tensors("policy", {"action": model(obs)}, export_with="onnx-torchscript")
        leapp.stop()
        compiled = leapp.compile_graph()
        spec = compiled.spec.model("policy")
        assert [p.name for p in spec.inputs] == ["obs", "h_state_in"]  # LEAPP's ONNX name
        manager = leapp.InferenceManager(str(compiled.path))
        reference.h_state.zero_()
        for _ in range(TICKS):
            fresh = torch.randn(1, 6)
            got = manager.run_policy({"policy/obs": fresh})["policy/action"]
            _close(got, reference(fresh))


# ------------------------------------------------------------------ feedback between nodes
def _mix(data, memory):
    return torch.tanh(data - 0.5 + 0.25 * memory)


def _blend(context, memory):
    return 0.8 * memory + 0.2 * context


def test_a_feedback_loop_found_over_two_ticks_matches_eager(tmp_path):
    leapp.start(name="loop", save_path=tmp_path)
    memory = torch.zeros(2)
    for tick in range(2):  # the second tick shows that memory comes back from 'update'
        obs, mem = annotate.input_tensors(
            "step", {"obs": torch.full((2,), 1.0 + tick), "memory_in": memory}
        )
        context = _mix(obs, mem)
        annotate.output_tensors(
            "step", {"context": context, "action": torch.clamp(2 * context, -1, 1)}
        )
        ctx, previous = annotate.input_tensors("update", {"context": context, "previous": memory})
        memory = _blend(ctx, previous)
        annotate.output_tensors("update", {"memory_out": memory})
    leapp.stop()
    compiled = leapp.compile_graph(visualize=True)
    with open(compiled.path) as f:
        flows = yaml.safe_load(f)["pipeline"]
    assert flows["feedback_flow"] == {"update/memory_out": ["step/memory_in", "update/previous"]}

    pipeline = leapp.Pipeline.load(compiled.path)
    memory = torch.zeros(2)
    for _ in range(TICKS):
        fresh = torch.randn(2)
        out = pipeline.step({"step/obs": fresh})
        context = _mix(fresh, memory)
        _close(out["step/action"], torch.clamp(2 * context, -1, 1))
        memory = _blend(context, memory)
        _close(out["update/memory_out"], memory)


# ----------------------------------------------------------------- semantics on joint ports
JOINTS = ["hip", "knee", "ankle"]


def _chunk(pos, vel, cmd):
    target = cmd - 0.05 * vel
    return torch.stack([pos + (target - pos) * f for f in (0.25, 0.5, 0.75, 1.0)])


def test_joint_semantics_are_written_and_the_export_matches_eager(tmp_path):
    leapp.start(name="joints", save_path=tmp_path)
    pos, vel, cmd = annotate.input_tensors(
        "controller",
        [
            TensorSemantics(
                "joint_pos",
                torch.randn(3),
                kind=InputKindEnum.JOINT_POSITION,
                element_names=JOINTS,
            ),
            TensorSemantics(
                "joint_vel",
                torch.randn(3),
                kind=InputKindEnum.JOINT_VELOCITY,
                element_names=JOINTS,
            ),
            TensorSemantics(
                "joint_cmd",
                torch.randn(3),
                kind=InputKindEnum.COMMAND_JOINT_POSITION,
                element_names=JOINTS,
            ),
        ],
    )
    annotate.output_tensors(
        "controller",
        TensorSemantics(
            "actions",
            _chunk(pos, vel, cmd),
            kind=OutputKindEnum.JOINT_POSITION,
            element_names=[TemporalAxis(period_ms=20), JOINTS],
        ),
        export_with="jit",
    )
    leapp.stop()
    compiled = leapp.compile_graph(graph_configs=leapp.GraphConfigs(frequency=50))
    with open(compiled.path) as f:
        model = yaml.safe_load(f)["models"]["controller"]
    assert model["inputs"][0]["kind"] == "state/joint/position"
    assert model["inputs"][0]["element_names"] == [JOINTS]
    assert model["outputs"][0]["kind"] == "target/joint/position"
    assert model["outputs"][0]["temporal_period_ms"] == 20

    manager = leapp.InferenceManager(str(compiled.path))
    for _ in range(TICKS):
        inputs = manager.get_mock_input()
        fresh = {k: torch.randn_like(v) for k, v in inputs.items()}
        got = manager.run_policy(fresh)["controller/actions"]
        expected = _chunk(
            *(fresh[f"controller/{n}"] for n in ("joint_pos", "joint_vel", "joint_cmd"))
        )
        _close(got, expected)
