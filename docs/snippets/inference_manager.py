"""The code of docs/how-to/migrate-from-nvidia-leapp.md (the page includes the section
``manager``): NVIDIA LEAPP's ``InferenceManager`` on an export, checked against
``leapp.Pipeline`` on the same inputs.

Run from a folder holding ``exports/torch_pipeline`` (``python examples/torch_pipeline.py``
writes one): ``python docs/snippets/inference_manager.py``.
"""

import torch

import leapp

s, v = torch.randn(6), torch.randn(3)
# --8<-- [start:manager]
from leapp import InferenceManager

manager = InferenceManager("exports/torch_pipeline/torch_pipeline.yaml")
# every pipeline output
out = manager.run_policy({"preprocess/state": s, "preprocess/velocity": v})
manager.value_dict["policy"]["obs"]  # what each node input holds now; "==out==": the outputs
manager.reset()  # inputs and outputs zeros, state its initial value
# --8<-- [end:manager]
expected = leapp.Pipeline.load("exports/torch_pipeline").step(
    {"preprocess/state": s, "preprocess/velocity": v}
)
assert torch.allclose(
    torch.as_tensor(out["policy/action"]), expected["policy/action"], atol=1e-6
), (out, expected)
print("migrate-from-nvidia-leapp.md: InferenceManager answers as leapp.Pipeline does")
