"""A two-node pipeline exported with NVIDIA's leapp 0.7.2 into exports/nv_pipeline: the code of
docs/how-to/nvidia-exports.md. Run it with the Python of an environment that has NVIDIA's leapp
(``bash scripts/nvidia_leapp.sh`` prints one); this repository's leapp runs it unchanged."""

import torch

import leapp
from leapp import annotate

torch.manual_seed(0)
policy = torch.nn.Sequential(torch.nn.Linear(9, 16), torch.nn.ELU(), torch.nn.Linear(16, 6))
leapp.start(name="nv_pipeline", save_path="exports")
with torch.no_grad():
    state, velocity = annotate.input_tensors(
        "preprocess", {"state": torch.randn(6), "velocity": torch.randn(3)}
    )
    obs = torch.cat([torch.clamp(state * 2.0, -5.0, 5.0), velocity])
    annotate.output_tensors("preprocess", {"obs": obs}, export_with="jit")
    obs = annotate.input_tensors("policy", {"obs": obs})
    annotate.output_tensors("policy", {"action": torch.tanh(policy(obs))}, export_with="onnx")
leapp.stop()
leapp.compile_graph()
print("exported exports/nv_pipeline with leapp", leapp.__version__, "from", leapp.__file__)
