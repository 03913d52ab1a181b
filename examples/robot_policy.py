"""A seed-like locomotion policy whose ports say what they mean, so its ROS graph speaks the
robot's own messages: ``sensor_msgs/JointState`` and ``Imu`` and ``geometry_msgs/Twist`` in,
``std_msgs/Float64MultiArray`` joint targets out (docs: how-to, robot messages). Its weights are
seeded at random: it shows the messages, and the tests use it for them; the tutorial's
``examples/quadruped/`` has a policy fitted to walk a simulated robot.

Two nodes: ``preprocess`` (TorchScript) builds the observation from joint positions and
velocities, the base angular velocity and orientation (projected gravity) and the velocity
command; ``policy`` (ONNX) maps it to joint position targets. Run it as is to export
``./robot_policy/``::

    python examples/robot_policy.py

then run it against the robot's topics with ROS remap rules (``--remap FROM:=TO``, the
``-r FROM:=TO`` of ``--ros-args``, applied to every node), e.g.::

    leapp-ros run robot_policy \\
        --remap preprocess/joint_states:=/joint_states --remap preprocess/imu:=/imu/data \\
        --remap preprocess/cmd_vel:=/cmd_vel --remap policy/joint_targets:=/leg_controller/commands
"""

import torch

import leapp
from leapp import InputKindEnum, OutputKindEnum, TensorSemantics, annotate

JOINTS = ["hip_l", "knee_l", "ankle_l", "hip_r", "knee_r", "ankle_r"]
DEFAULT_POSITIONS = torch.tensor([0.1, -0.6, 0.3, -0.1, -0.6, 0.3])
ACTION_SCALE = 0.25
GRAVITY = torch.tensor([0.0, 0.0, -1.0])


class Policy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(21, 32), torch.nn.ELU(), torch.nn.Linear(32, 6)
        )

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(obs))


def projected_gravity(quat_wxyz: torch.Tensor) -> torch.Tensor:
    """Gravity in the base frame: the world's -z rotated by the inverse of the base rotation
    (a zero quaternion, as some drivers send before they know, gives NaN)."""
    q = quat_wxyz / quat_wxyz.norm()
    w, xyz = q[0], q[1:]
    t = 2.0 * torch.linalg.cross(-xyz, GRAVITY)
    return GRAVITY + w * t + torch.linalg.cross(-xyz, t)


def preprocess(joint_pos, joint_vel, base_ang_vel, base_quat, command):
    joint_pos, joint_vel, base_ang_vel, base_quat, command = annotate.input_tensors(
        "preprocess",
        [
            TensorSemantics(
                name="joint_pos",
                ref=joint_pos,
                kind=InputKindEnum.JOINT_POSITION,
                element_names=JOINTS,
            ),
            TensorSemantics(
                name="joint_vel",
                ref=joint_vel,
                kind=InputKindEnum.JOINT_VELOCITY,
                element_names=JOINTS,
            ),
            TensorSemantics(
                name="base_ang_vel", ref=base_ang_vel, kind=InputKindEnum.BODY_ANGULAR_VELOCITY
            ),
            TensorSemantics(
                name="base_quat",
                ref=base_quat,
                kind=InputKindEnum.BODY_ROTATION,
                element_names=["w", "x", "y", "z"],
            ),
            TensorSemantics(
                name="command",
                ref=command,
                kind=InputKindEnum.COMMAND_BODY_VELOCITY,
                element_names=["lin_vel_x", "lin_vel_y", "ang_vel_z"],
            ),
        ],
    )
    obs = torch.cat(
        [
            base_ang_vel * 0.25,
            projected_gravity(base_quat),
            command,
            joint_pos - DEFAULT_POSITIONS,
            joint_vel * 0.05,
        ]
    )
    annotate.output_tensors("preprocess", {"obs": obs}, export_with="jit")
    return obs


def run_policy(policy, obs):
    obs = annotate.input_tensors("policy", {"obs": obs})
    targets = DEFAULT_POSITIONS + ACTION_SCALE * policy(obs)
    annotate.output_tensors(
        "policy",
        [
            TensorSemantics(
                name="joint_targets",
                ref=targets,
                kind=OutputKindEnum.JOINT_POSITION,
                element_names=JOINTS,
            )
        ],
        export_with="onnx",
    )
    return targets


def example_inputs():
    """Zeros, a level base and no command: what the trace runs on."""
    return (
        torch.zeros(6),
        torch.zeros(6),
        torch.zeros(3),
        torch.tensor([1.0, 0, 0, 0]),
        torch.zeros(3),
    )


def main():
    torch.manual_seed(0)
    policy = Policy().eval()
    leapp.start(name="robot_policy")
    with torch.no_grad():
        run_policy(policy, preprocess(*example_inputs()))
    leapp.stop()
    leapp.compile_graph(graph_configs=leapp.GraphConfigs(frequency=50))


if __name__ == "__main__":
    main()
