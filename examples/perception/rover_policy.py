"""The rover's deploy code, annotated for leapp: a depth encoder and a recurrent policy.

``encode`` (ONNX) turns the front camera's depth frame (``sensor_msgs/Image``, ``32FC1``,
metres, :data:`DEPTH` pixels) into a latent of :data:`LATENT` values with a small CNN. ``act``
(TorchScript) runs a GRU on the latent, the rover's position (``sensor_msgs/JointState`` of
its two slide joints) and its velocity (``nav_msgs/Odometry``, body frame), keeps the GRU's
hidden state as the node's state, and publishes position targets for the joints' PD servos:
the position now plus :data:`LOOKAHEAD` seconds of the velocity the network asks for, which
the servos (``kd = LOOKAHEAD * kp``) turn into that velocity. Holding the last target stops
the rover, so ``hold`` is its safe action.

A covered lens gives a frame with no pixel beyond :data:`MIN_RANGE`: ``encode`` answers it
with a NaN latent, which the node drops (``on_nonfinite: drop``, the default) instead of
publishing, so ``act`` gets no latent and its watchdog (``input_timeout_ms``) publishes the
safe action, as it does when the camera stops.

Outside a leapp session every annotation hands back its arguments: ``train.py`` runs these
functions as plain PyTorch. Export trained weights with::

    python examples/perception/rover_policy.py --weights trained/rover.pt --out exports

which writes ``exports/rover/`` (spec, ``encoder.onnx``, ``policy.pt``, the examples).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import leapp
from leapp import InputKindEnum, OutputKindEnum, TensorSemantics, annotate

DEPTH = (24, 32)  # the depth frame: rows x columns
LATENT = 16  # the encoder's output
HIDDEN = 32  # the GRU's hidden state
JOINTS = ["base_x", "base_y"]  # the rover's slide joints: forward, left (m)
GOAL = (3.0, 0.0)  # where the rover must go, in joint coordinates (m)
MAX_SPEED = 0.5  # m/s along each joint
LOOKAHEAD = 0.5  # s: the targets lead the position by this much of the velocity
MAX_RANGE = 2.0  # m: the encoder sees depth up to this far
MIN_RANGE = 0.02  # m: a frame with no pixel beyond this is a covered lens


# --8<-- [start:networks]
class Encoder(torch.nn.Module):
    """Depth frame (metres) in, latent out."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Sequential(
            torch.nn.Conv2d(1, 8, 4, stride=4),  # 6 x 8 patches
            torch.nn.ELU(),
            torch.nn.Conv2d(8, 16, 3, stride=2, padding=1),  # 3 x 4
            torch.nn.ELU(),
        )
        self.head = torch.nn.Linear(16 * 3 * 4, LATENT)

    def forward(self, depth: torch.Tensor) -> torch.Tensor:
        """``depth`` ``[..., H, W]`` -> ``[..., LATENT]``."""
        batch = depth.shape[:-2]
        x = depth.clamp(0.0, MAX_RANGE).reshape(-1, 1, *DEPTH) / MAX_RANGE
        return torch.tanh(self.head(self.conv(x).flatten(1))).reshape(*batch, LATENT)


class Policy(torch.nn.Module):
    """Latent, position and velocity in, a velocity (m/s per joint) and the next hidden
    state out."""

    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRUCell(LATENT + 4, HIDDEN)
        self.head = torch.nn.Sequential(
            torch.nn.Linear(HIDDEN, 32), torch.nn.ELU(), torch.nn.Linear(32, 2)
        )

    def forward(self, latent, position, velocity, h):
        """Batched: ``[B, LATENT]``, ``[B, 2]``, ``[B, 2]``, ``[B, HIDDEN]``."""
        to_goal = (torch.tensor(GOAL) - position) / GOAL[0]
        obs = torch.cat([latent, to_goal, velocity / MAX_SPEED], dim=-1)
        h = self.gru(obs, h)
        return MAX_SPEED * torch.tanh(self.head(h)), h


# --8<-- [end:networks]
# --8<-- [start:nodes]
def encode(encoder: Encoder, depth: torch.Tensor) -> torch.Tensor:
    """The ``encoder`` node: the latent of one depth frame (NaN for a covered lens)."""
    depth = annotate.input_tensors(
        "encoder",
        [TensorSemantics(name="depth", ref=depth, kind="state/camera/depth")],
    )
    latent = encoder(depth)
    seen = depth.amax() > MIN_RANGE
    latent = torch.where(seen, latent, torch.full_like(latent, float("nan")))
    annotate.output_tensors("encoder", {"latent": latent}, export_with="onnx")
    return latent


def act(policy: Policy, latent, position, velocity, h):
    """The ``policy`` node: joint position targets and the next hidden state."""
    latent, position, velocity = annotate.input_tensors(
        "policy",
        [
            TensorSemantics(name="latent", ref=latent),
            TensorSemantics(name="position", ref=position,
                            kind=InputKindEnum.JOINT_POSITION, element_names=JOINTS),
            TensorSemantics(name="velocity", ref=velocity,
                            kind=InputKindEnum.BODY_LINEAR_VELOCITY),
        ],
    )  # fmt: skip
    h = annotate.state_tensors("policy", {"h": h})
    speed, h_next = policy(latent.unsqueeze(0), position.unsqueeze(0),
                           velocity[:2].unsqueeze(0), h.unsqueeze(0))  # fmt: skip
    targets = position + LOOKAHEAD * speed.squeeze(0)
    h_next = annotate.update_state("policy", {"h": h_next.squeeze(0)})
    annotate.output_tensors(
        "policy",
        [TensorSemantics(name="targets", ref=targets,
                         kind=OutputKindEnum.JOINT_POSITION, element_names=JOINTS)],
        export_with="jit",
    )  # fmt: skip
    return targets, h_next


# --8<-- [end:nodes]
def start_state() -> torch.Tensor:
    """The GRU's hidden state on the first tick."""
    return torch.zeros(HIDDEN)


def load(weights: str | Path) -> tuple[Encoder, Policy]:
    """The trained networks from the file ``train.py`` writes."""
    saved = torch.load(weights, weights_only=True)
    encoder, policy = Encoder(), Policy()
    encoder.load_state_dict(saved["encoder"])
    policy.load_state_dict(saved["policy"])
    return encoder.eval(), policy.eval()


# --8<-- [start:export]
def export(weights: str | Path, save_path: str | Path) -> Path:
    """Trace one tick of the deploy code with the trained weights and export it; the
    export folder."""
    encoder, policy = load(weights)
    leapp.start(name="rover", save_path=save_path)
    with torch.no_grad():
        latent = encode(encoder, torch.full(DEPTH, MAX_RANGE))
        act(policy, latent, torch.zeros(2), torch.zeros(3), start_state())
    leapp.stop()
    return leapp.compile_graph().path.parent


# --8<-- [end:export]
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--weights", required=True, help="the file train.py wrote")
    parser.add_argument("--out", required=True, help="folder to export into")
    arguments = parser.parse_args()
    print(export(arguments.weights, arguments.out))


if __name__ == "__main__":
    main()
