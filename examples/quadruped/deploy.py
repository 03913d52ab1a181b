"""The quadruped's deploy code, annotated for leapp: what runs on the robot, in two nodes.

``observe`` (TorchScript) turns the robot's sensors into the policy's observation: joint
positions and velocities (``sensor_msgs/JointState``), the base's angular velocity and
orientation (``sensor_msgs/Imu``, orientation as gravity in the base frame) and the velocity
command (``geometry_msgs/Twist``). ``policy`` (ONNX) runs the trained network on it and a gait
clock it keeps as state, and publishes joint position targets for the joints' PD controller.
The ports say what they mean (``TensorSemantics``), so the ROS graph speaks those messages.

Outside a leapp session every annotation hands back its arguments: ``train.py`` runs these
functions as plain PyTorch. Export a trained policy with::

    python examples/quadruped/deploy.py --weights trained/policy.pt --out exports

which writes ``exports/quadruped/`` (spec, ``observe.pt``, ``policy.onnx``, the examples).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

import leapp
from leapp import InputKindEnum, OutputKindEnum, TensorSemantics, annotate

JOINTS = ["fl_hip", "fl_knee", "fr_hip", "fr_knee", "rl_hip", "rl_knee", "rr_hip", "rr_knee"]
DEFAULT_POSITIONS = torch.tensor([0.6, -1.2] * 4)  # rad: standing, feet under the hips
ACTION_SCALE = 0.25  # rad per unit of the network's output
CONTROL_HZ = 50.0
GAIT_HZ = 2.5  # gait cycles per second: the clock turns by 2 pi GAIT_HZ / CONTROL_HZ a tick
OBSERVATION = 25  # angular velocity 3, gravity 3, command 3, joint positions 8, velocities 8
_DOWN = torch.tensor([0.0, 0.0, -1.0])
# --8<-- [start:policy]


class Policy(torch.nn.Module):
    """The actor: observation and gait clock (cos, sin) in, joint position offsets out."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(OBSERVATION + 2, 64),
            torch.nn.ELU(),
            torch.nn.Linear(64, 64),
            torch.nn.ELU(),
            torch.nn.Linear(64, len(JOINTS)),
        )

    def forward(self, obs: torch.Tensor, clock: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, clock], dim=-1))


# --8<-- [end:policy]


def projected_gravity(quat_wxyz: torch.Tensor) -> torch.Tensor:
    """The world's down direction in the base frame, from the base's orientation (w, x, y, z)."""
    q = quat_wxyz / quat_wxyz.norm(dim=-1, keepdim=True)
    w, axis = q[..., :1], -q[..., 1:]  # the inverse rotation
    down = _DOWN.expand_as(axis)
    twice = 2.0 * torch.linalg.cross(axis, down)
    return down + w * twice + torch.linalg.cross(axis, twice)


def turn(clock: torch.Tensor) -> torch.Tensor:
    """The gait clock one control tick later."""
    angle = 2.0 * math.pi * GAIT_HZ / CONTROL_HZ
    cos, sin = math.cos(angle), math.sin(angle)
    return torch.stack([clock[..., 0] * cos - clock[..., 1] * sin,
                        clock[..., 1] * cos + clock[..., 0] * sin], dim=-1)  # fmt: skip


# --8<-- [start:observe]
def observe(joint_pos, joint_vel, ang_vel, quat, command):
    """The observation (25 values) from the robot's sensors and the velocity command."""
    joint_pos, joint_vel, ang_vel, quat, command = annotate.input_tensors(
        "observe",
        [
            TensorSemantics(name="joint_pos", ref=joint_pos,
                            kind=InputKindEnum.JOINT_POSITION, element_names=JOINTS),
            TensorSemantics(name="joint_vel", ref=joint_vel,
                            kind=InputKindEnum.JOINT_VELOCITY, element_names=JOINTS),
            TensorSemantics(name="ang_vel", ref=ang_vel,
                            kind=InputKindEnum.BODY_ANGULAR_VELOCITY),
            TensorSemantics(name="quat", ref=quat, kind=InputKindEnum.BODY_ROTATION,
                            element_names=["w", "x", "y", "z"]),
            TensorSemantics(name="command", ref=command,
                            kind=InputKindEnum.COMMAND_BODY_VELOCITY,
                            element_names=["lin_vel_x", "lin_vel_y", "ang_vel_z"]),
        ],
    )  # fmt: skip
    obs = torch.cat([ang_vel * 0.25, projected_gravity(quat), command,
                     joint_pos - DEFAULT_POSITIONS, joint_vel * 0.05])  # fmt: skip
    annotate.output_tensors("observe", {"obs": obs}, export_with="jit")
    return obs


def act(policy, obs, clock):
    """Joint position targets, and the gait clock of the next tick (state of the node)."""
    obs = annotate.input_tensors("policy", {"obs": obs})
    clock = annotate.state_tensors("policy", {"clock": clock})
    targets = DEFAULT_POSITIONS + ACTION_SCALE * policy(obs, clock)
    next_clock = annotate.update_state("policy", {"clock": turn(clock)})
    annotate.output_tensors(
        "policy",
        [TensorSemantics(name="joint_targets", ref=targets,
                         kind=OutputKindEnum.JOINT_POSITION, element_names=JOINTS)],
        export_with="onnx",
    )  # fmt: skip
    return targets, next_clock


# --8<-- [end:observe]
def standing_inputs() -> tuple[torch.Tensor, ...]:
    """The robot standing still and level, commanded to walk: what the trace runs on."""
    return (DEFAULT_POSITIONS.clone(), torch.zeros(8), torch.zeros(3),
            torch.tensor([1.0, 0.0, 0.0, 0.0]), torch.tensor([0.3, 0.0, 0.0]))  # fmt: skip


def start_clock() -> torch.Tensor:
    """The gait clock's first value: phase 0."""
    return torch.tensor([1.0, 0.0])


def load_policy(weights: str | Path) -> Policy:
    """The trained actor from a ``state_dict`` file written by ``train.py``."""
    policy = Policy()
    policy.load_state_dict(torch.load(weights, weights_only=True))
    return policy.eval()


# --8<-- [start:export]
def export(weights: str | Path, save_path: str | Path) -> Path:
    """Trace one tick of the deploy code with the trained weights and export it; the spec."""
    policy = load_policy(weights)
    leapp.start(name="quadruped", save_path=save_path)
    with torch.no_grad():
        act(policy, observe(*standing_inputs()), start_clock())
    leapp.stop()
    compiled = leapp.compile_graph(graph_configs=leapp.GraphConfigs(frequency=CONTROL_HZ))
    return compiled.path


# --8<-- [end:export]
def main() -> None:
    parser = argparse.ArgumentParser(description="Export the quadruped's deploy code.")
    parser.add_argument("--weights", type=Path, required=True, help="from train.py")
    parser.add_argument("--out", type=Path, default=Path("exports"), help="default: exports")
    args = parser.parse_args()
    print(f"exported {export(args.weights, args.out)}")


if __name__ == "__main__":
    main()
