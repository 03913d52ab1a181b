"""The code of docs/how-to/annotate.md, each section one block of the page (the page includes
them), run here with what they need around them: weights, inputs, the session, and a check
that the export computes what the code computed eagerly.

Run from a folder of your own: ``python docs/snippets/annotate.py`` writes ``exports/``.
"""

import numpy as np
import torch

import leapp
from leapp import annotate, spec

torch.manual_seed(0)
STATE_MEAN, STATE_STD = torch.zeros(6), torch.full((6,), 0.5)
policy = torch.nn.Sequential(torch.nn.Linear(9, 6), torch.nn.Tanh()).eval()
s, v = torch.randn(6), torch.randn(3)


def close(a, b) -> None:
    assert torch.allclose(torch.as_tensor(a), torch.as_tensor(b), atol=1e-5), (a, b)


# --8<-- [start:export]
def preprocess(state, velocity):
    state, velocity = annotate.input_tensors("preprocess", {"state": state, "velocity": velocity})
    obs = torch.cat([torch.clamp((state - STATE_MEAN) / STATE_STD, -5.0, 5.0), velocity])
    annotate.output_tensors("preprocess", {"obs": obs}, export_with="jit")
    return obs


def run_policy(policy, obs):
    obs = annotate.input_tensors("policy", {"obs": obs})
    action = policy(obs.unsqueeze(0)).squeeze(0)
    annotate.output_tensors("policy", {"action": action}, export_with="onnx")
    return action


leapp.start(name="torch_pipeline", save_path="exports")
run_policy(policy, preprocess(torch.zeros(6), torch.zeros(3)))
leapp.stop()
leapp.compile_graph(graph_configs=leapp.GraphConfigs(frequency=50))

pipeline = leapp.Pipeline.load("exports/torch_pipeline")  # checksums verified
out = pipeline.step({"preprocess/state": s, "preprocess/velocity": v})  # {"policy/action": ...}
# --8<-- [end:export]
with torch.no_grad():
    close(out["policy/action"], run_policy(policy, preprocess(s, v)))

W, U, GAIN = torch.randn(4, 3), 0.5 * torch.randn(3, 3), torch.tensor(2.0)
model = torch.nn.Linear(3, 2).eval()


# --8<-- [start:method]
@annotate.method(export_with="onnx")
@torch.no_grad()
def policy_step(obs, h, gain=GAIN):  # inputs obs, h; gain left at its default is a constant
    h = torch.tanh(obs @ W + h @ U)
    action = h * gain
    return action, h  # outputs action, h


model.forward = annotate.method(node_name="model_forward", export_with="jit")(model.forward)
# --8<-- [end:method]

leapp.start(name="method", save_path="exports")
h = torch.zeros(3)
for _ in range(3):
    action, h = policy_step(torch.randn(4), h)
with torch.no_grad():
    model(torch.randn(3))
leapp.stop()
compiled = leapp.compile_graph()
method = spec.load(compiled.path)
ports = {m.name: ([p.name for p in m.inputs], [p.name for p in m.outputs]) for m in method.models}
assert ports["policy_step"] == (["obs", "h_in"], ["action", "h_out"]), ports  # ONNX: h_in/out
assert ports["model_forward"] == (["input"], ["output1"]), ports
pipeline, h = leapp.Pipeline.load("exports/method"), torch.zeros(3)
for _ in range(3):
    obs, x = torch.randn(4), torch.randn(3)
    out = pipeline.step({"policy_step/obs": obs, "model_forward/input": x})
    h = torch.tanh(obs @ W + h @ U)
    close(out["policy_step/action"], h * GAIN)
    with torch.no_grad():
        close(
            out["model_forward/output1"], torch.nn.functional.linear(x, model.weight, model.bias)
        )

q, dq = torch.randn(3), torch.randn(3)
leapp.start(name="semantics", save_path="exports")
# --8<-- [start:semantics]
from leapp import InputKindEnum, OutputKindEnum, TemporalAxis, TensorSemantics

pos, vel = annotate.input_tensors(
    "policy",
    [
        TensorSemantics(
            name="joint_pos",
            ref=q,
            kind=InputKindEnum.JOINT_POSITION,
            element_names=["hip", "knee", "ankle"],
            extra={"units": "rad"},
        ),
        TensorSemantics(name="joint_vel", ref=dq, kind="my/custom/kind"),
    ],
)
chunk = pos + 0.02 * torch.arange(1.0, 21.0)[:, None] * vel  # 20 targets, 20 ms apart
annotate.output_tensors(
    "policy",
    [
        TensorSemantics(
            name="chunk",
            ref=chunk,
            kind=OutputKindEnum.JOINT_POSITION,
            element_names=[TemporalAxis(20), ["hip", "knee", "ankle"]],
        ),
    ],
)
# spec: joint_pos: {..., kind: state/joint/position,
#                   element_names: [[hip, knee, ankle]], units: rad}
#       chunk: {..., element_names: [__temporal_axis__, [hip, knee, ankle]],
#               temporal_period_ms: 20}
# --8<-- [end:semantics]
leapp.stop()
(node,) = spec.load(leapp.compile_graph().path).models
joint_pos, joint_vel = node.inputs
assert (joint_pos.kind, joint_pos.extra) == ("state/joint/position", {"units": "rad"}), joint_pos
assert joint_vel.kind == "my/custom/kind", joint_vel
assert (node.outputs[0].name, node.outputs[0].temporal_period_ms) == ("chunk", 20), node.outputs

a, b, s = torch.randn(2), torch.randn(2), torch.tensor(3.0)
leapp.start(name="nested", save_path="exports")
# --8<-- [start:nested]
inputs = annotate.input_tensors("n", {"group": {"x": a, "y": b}})  # ports group_x, group_y
total = inputs["x"] + inputs["y"]  # a dict, as given
annotate.output_tensors("n", {"outs": [total, total * 2]})  # outputs outs_0, outs_1

# ports batch_0, batch_1, scale
batch, scale = annotate.input_tensors("m", {"batch": [a, b], "scale": s})
annotate.output_tensors("m", {"y": (batch[0] + batch[1]) * scale})
# --8<-- [end:nested]
leapp.stop()
nested = spec.load(leapp.compile_graph().path)
ports = {m.name: ([p.name for p in m.inputs], [p.name for p in m.outputs]) for m in nested.models}
assert ports["n"] == (["group_x", "group_y"], ["outs_0", "outs_1"]), ports
assert ports["m"] == (["batch_0", "batch_1", "scale"], ["y"]), ports

DEFAULT_ANGLES = np.linspace(-0.5, 0.5, 12, dtype=np.float32)
mlp = torch.nn.Sequential(torch.nn.Linear(47, 12), torch.nn.Tanh()).eval()
w, qpos, a = (np.random.default_rng(0).standard_normal(n).astype(np.float32) for n in (3, 12, 12))
leapp.start(name="buffers", save_path="exports")
with torch.no_grad():
    policy = mlp
    q = qpos
    # --8<-- [start:buffers]
    obs_buffer = np.zeros(47, np.float32)  # preallocated once, filled by slice writes every tick
    omega, qj, last = annotate.input_tensors("policy", {"omega": w, "qj": q, "last_action": a})
    obs = annotate.register_buffer("policy", {"obs": obs_buffer})  # write into what it returns
    obs[:3] = omega * 0.25
    obs[9:21] = qj - DEFAULT_ANGLES
    obs[33:45] = last
    action = policy(torch.from_numpy(obs).unsqueeze(0)).detach().numpy().squeeze()
    # --8<-- [end:buffers]
    annotate.output_tensors("policy", {"action": action}, export_with="jit")
leapp.stop()
leapp.compile_graph()
expected = np.zeros(47, np.float32)
expected[:3], expected[9:21], expected[33:45] = w * 0.25, qpos - DEFAULT_ANGLES, a
out = leapp.Pipeline.load("exports/buffers").step(
    {
        name: torch.as_tensor(x)
        for name, x in [("policy/omega", w), ("policy/qj", qpos), ("policy/last_action", a)]
    }
)
with torch.no_grad():
    close(out["policy/action"], mlp(torch.from_numpy(expected)))


class GruPolicy(torch.nn.Module):
    """A recurrent policy that keeps its hidden state in a buffer, as many deploy scripts do."""

    def __init__(self):
        super().__init__()
        self.cell = torch.nn.GRUCell(4, 3)
        self.register_buffer("h", torch.zeros(1, 3))

    def forward(self, x):
        h_new = self.cell(x, self.h)
        self.h = h_new
        return h_new


gru_policy, x = GruPolicy().eval(), torch.randn(1, 4)
leapp.start(name="module", save_path="exports")
with torch.no_grad():
    for _ in range(2):
        x = annotate.input_tensors("gru", {"x": x})
        # --8<-- [start:module]
        annotate.module("gru", gru_policy)  # after input_tensors; its forward does self.h = h_new
        # --8<-- [end:module]
        annotate.output_tensors("gru", {"y": gru_policy(x)}, export_with="jit")
        x = torch.randn(1, 4)
leapp.stop()
(gru,) = spec.load(leapp.compile_graph().path).models
assert [p.name for p in gru.inputs] == ["x", "h"], gru.inputs

torch.jit.script(torch.nn.Sequential(torch.nn.Linear(9, 6), torch.nn.Tanh())).save("policy.pt")
obs = torch.randn(9)
leapp.start(name="scripted", save_path="exports")
with torch.no_grad():
    # --8<-- [start:torchscript]
    policy = torch.jit.load("policy.pt")  # as rsl_rl / Isaac Lab export it; an LSTM actor too

    obs = annotate.input_tensors("policy", {"obs": obs})
    action = policy(obs)  # recorded as the operations the script runs
    annotate.output_tensors("policy", {"action": action}, export_with="onnx")
    # --8<-- [end:torchscript]
leapp.stop()
leapp.compile_graph()
obs = torch.randn(9)
with torch.no_grad():
    close(
        leapp.Pipeline.load("exports/scripted").step({"policy/obs": obs})["policy/action"],
        policy(obs),
    )
print("annotate.md: every block ran and its export computes what the code computed eagerly")
