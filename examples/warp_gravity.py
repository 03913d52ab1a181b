"""A legged-robot policy pipeline with Warp kernels: observation, policy, joint targets.

- ``observe`` (Warp between torch operations, exported with ``jit``): the gravity direction in
  the body frame from the base orientation quaternion, and the joint positions and velocities
  relative to the default pose and scaled, computed by Warp kernels; the base angular velocity
  scaled by torch; all concatenated (torch) into the observation.
- ``policy`` (torch, exported with ``onnx``): a small MLP from observation to action.
- ``targets`` (Warp, exported with ``pt2``): joint position targets from the action (default
  pose + scaled action, clamped to the joint limits) by a Warp kernel.

Run it as is to export ``./warp_gravity/`` (needs ``pip install warp-lang``)::

    python examples/warp_gravity.py

and run the export as a ROS 2 graph with ``leapp-ros run warp_gravity/warp_gravity.yaml``.
"""

import torch
import warp as wp

import leapp
from leapp import annotate

JOINTS = 12
DEFAULT_POSE = [0.1, 0.8, -1.5] * 4  # hip, thigh, calf of four legs (rad)
LIMITS = (-2.5, 2.5)
ANG_VEL_SCALE = 0.25
POS_SCALE = 1.0
VEL_SCALE = 0.05
ACTION_SCALE = 0.25


@wp.kernel
def gravity_in_body(quat: wp.array(dtype=wp.quat), gravity: wp.array(dtype=wp.vec3)):
    """The world's downward unit vector expressed in the base frame (quat is x, y, z, w)."""
    i = wp.tid()
    gravity[i] = wp.quat_rotate_inv(quat[i], wp.vec3(0.0, 0.0, -1.0))


@wp.kernel
def joint_state(
    pos: wp.array(dtype=wp.float32),
    vel: wp.array(dtype=wp.float32),
    default_pose: wp.array(dtype=wp.float32),
    pos_scale: float,
    vel_scale: float,
    pos_out: wp.array(dtype=wp.float32),
    vel_out: wp.array(dtype=wp.float32),
):
    """Joint positions relative to the default pose and joint velocities, scaled."""
    i = wp.tid()
    pos_out[i] = (pos[i] - default_pose[i]) * pos_scale
    vel_out[i] = vel[i] * vel_scale


@wp.kernel
def joint_targets(
    action: wp.array(dtype=wp.float32),
    default_pose: wp.array(dtype=wp.float32),
    scale: float,
    low: float,
    high: float,
    target: wp.array(dtype=wp.float32),
):
    """Position targets: the default pose plus the scaled action, within the joint limits."""
    i = wp.tid()
    target[i] = wp.clamp(default_pose[i] + action[i] * scale, low, high)


class Policy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(6 + 2 * JOINTS, 64), torch.nn.ELU(), torch.nn.Linear(64, JOINTS)
        )

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(obs))


def observe(base_quat, base_ang_vel, joint_pos, joint_vel):
    base_quat, base_ang_vel, joint_pos, joint_vel = annotate.input_tensors(
        "observe",
        {
            "base_quat": base_quat,
            "base_ang_vel": base_ang_vel,
            "joint_pos": joint_pos,
            "joint_vel": joint_vel,
        },
    )
    ang_vel = base_ang_vel * ANG_VEL_SCALE  # torch

    quat = wp.from_torch(base_quat.unsqueeze(0), dtype=wp.quat)  # Warp
    gravity = wp.empty(1, dtype=wp.vec3)
    wp.launch(gravity_in_body, dim=1, inputs=[quat], outputs=[gravity])
    pos, vel = wp.from_torch(joint_pos), wp.from_torch(joint_vel)
    default = wp.array(DEFAULT_POSE, dtype=wp.float32)
    pos_rel, vel_scaled = wp.empty(JOINTS), wp.empty(JOINTS)
    wp.launch(
        joint_state,
        dim=JOINTS,
        inputs=[pos, vel, default, POS_SCALE, VEL_SCALE],
        outputs=[pos_rel, vel_scaled],
    )

    obs = torch.cat(  # torch again
        [ang_vel, wp.to_torch(gravity)[0], wp.to_torch(pos_rel), wp.to_torch(vel_scaled)]
    )
    annotate.output_tensors("observe", {"obs": obs}, export_with="jit")
    return obs


def act(policy, obs):
    obs = annotate.input_tensors("policy", {"obs": obs})
    action = policy(obs)
    annotate.output_tensors("policy", {"action": action}, export_with="onnx")
    return action


def targets(action):
    action = annotate.input_tensors("targets", {"action": action})
    default = wp.array(DEFAULT_POSE, dtype=wp.float32)
    target = wp.empty(JOINTS, dtype=wp.float32)
    wp.launch(
        joint_targets,
        dim=JOINTS,
        inputs=[wp.from_torch(action), default, ACTION_SCALE, *LIMITS],
        outputs=[target],
    )
    joint_target = wp.to_torch(target)
    annotate.output_tensors("targets", {"joint_target": joint_target}, export_with="pt2")
    return joint_target


def step(policy, base_quat, base_ang_vel, joint_pos, joint_vel):
    """One control tick: the joint position targets for the robot's state."""
    obs = observe(base_quat, base_ang_vel, joint_pos, joint_vel)
    return targets(act(policy, obs))


def random_state(generator=None):
    """A plausible robot state: a unit quaternion, angular velocity, joint positions, speeds."""
    quat = torch.randn(4, generator=generator)
    return (
        quat / quat.norm(),
        torch.randn(3, generator=generator),
        torch.tensor(DEFAULT_POSE) + 0.3 * torch.randn(JOINTS, generator=generator),
        2.0 * torch.randn(JOINTS, generator=generator),
    )


def main(save_path=".", ticks=5):
    wp.init()
    torch.manual_seed(0)
    policy = Policy().eval()
    leapp.start(name="warp_gravity", save_path=save_path)
    with torch.no_grad():
        for _ in range(ticks):
            step(policy, *random_state())
    leapp.stop()
    return leapp.compile_graph()


if __name__ == "__main__":
    main()
