"""The code of docs/how-to/warp.md (the page includes the section ``observe``): a node whose
observation is computed by a Warp kernel, exported, and checked against the same rotation
computed in torch.

Run from a folder of your own: ``python docs/snippets/warp_node.py`` writes ``exports/``.
"""

import torch

import leapp
from leapp import annotate

torch.manual_seed(0)
q = torch.nn.functional.normalize(torch.randn(4), dim=0)  # x, y, z, w, as wp.quat
w = torch.randn(3)
leapp.start(name="warp_observe", save_path="exports")
# --8<-- [start:observe]
import warp as wp


@wp.kernel
def gravity_in_body(quat: wp.array(dtype=wp.quat), gravity: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    gravity[i] = wp.quat_rotate_inv(quat[i], wp.vec3(0.0, 0.0, -1.0))


quat, ang_vel = annotate.input_tensors("observe", {"base_quat": q, "base_ang_vel": w})
gravity = wp.empty(1, dtype=wp.vec3)
quats = wp.from_torch(quat.unsqueeze(0), dtype=wp.quat)
wp.launch(gravity_in_body, dim=1, inputs=[quats], outputs=[gravity])
obs = torch.cat([ang_vel * 0.25, wp.to_torch(gravity)[0]])  # torch -> Warp -> torch
annotate.output_tensors("observe", {"obs": obs}, export_with="jit")
# --8<-- [end:observe]
leapp.stop()
leapp.compile_graph()


def gravity_of(quat: torch.Tensor) -> torch.Tensor:
    """(0, 0, -1) rotated by the inverse of ``quat`` (x, y, z, w), in torch."""
    xyz, real = quat[:3], quat[3]
    down = torch.tensor([0.0, 0.0, -1.0])
    t = 2.0 * torch.linalg.cross(-xyz, down)
    return down + real * t + torch.linalg.cross(-xyz, t)


pipeline = leapp.Pipeline.load("exports/warp_observe")
for _ in range(3):
    q = torch.nn.functional.normalize(torch.randn(4), dim=0)
    w = torch.randn(3)
    out = pipeline.step({"observe/base_quat": q, "observe/base_ang_vel": w})["observe/obs"]
    expected = torch.cat([w * 0.25, gravity_of(q)])
    assert torch.allclose(out, expected, atol=1e-5), (out, expected)
print("warp.md: the Warp node's export computes the body-frame gravity")
