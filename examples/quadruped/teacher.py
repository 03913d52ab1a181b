"""The scripted trot controller the tutorial's policy learns to imitate (the "expert").

A diagonal trot: front-left and rear-right legs swing together, then the other pair, following
the gait clock; the stride grows with the commanded forward speed and the two sides stride
differently to turn at the commanded yaw rate. The IMU closes the loop (the base's pitch and
roll, and their rates, lengthen or shorten the legs), and the joint readings stiffen the
targets against the PD controller's sag. It reads exactly what the policy reads, the
observation of :func:`deploy.observe` and the gait clock, so its targets are labels for any
state the policy visits. The gains were tuned by hand on ``quadruped.xml`` in MuJoCo.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from deploy import DEFAULT_POSITIONS

GAINS = SimpleNamespace(
    stride=0.5,  # hip swing amplitude (rad) per m/s of commanded forward speed
    turn=0.15,  # extra hip swing (rad) per rad/s of commanded yaw rate, opposite per side
    lift=0.5,  # knee flexion (rad) at the top of a swing
    pitch=0.5,  # leg extension (rad) per unit of pitch (gravity's x in the base frame) ...
    pitch_rate=0.05,  # ... and per rad/s of pitch rate
    roll=1.0,
    roll_rate=0.05,
    stiffen=0.5,  # extra target per rad of joint error
    damping=0.01,  # target offset per rad/s of joint velocity
)
# Per leg (fl, fr, rl, rr): which pair it trots in, front or rear, left or right.
_PAIR = torch.tensor([1.0, -1.0, -1.0, 1.0])
_FRONT = torch.tensor([1.0, 1.0, -1.0, -1.0])
_LEFT = torch.tensor([1.0, -1.0, 1.0, -1.0])


def scripted_targets(obs: torch.Tensor, clock: torch.Tensor) -> torch.Tensor:
    """Joint position targets for observations ``obs`` (..., 25) at gait clock ``clock``
    (..., 2), in :data:`deploy.JOINTS` order."""
    ang_vel = obs[..., 0:3] / 0.25
    gravity, command = obs[..., 3:6], obs[..., 6:9]
    joint_pos = obs[..., 9:17] + DEFAULT_POSITIONS
    joint_vel = obs[..., 17:25] / 0.05
    pitch, roll = gravity[..., :1], -gravity[..., 1:2]  # nose down, left side up: positive
    swing = clock[..., :1] * _PAIR  # per leg: +1 back, -1 forward
    lift = torch.relu(clock[..., 1:2] * _PAIR)  # per leg: in the air while positive
    stride = GAINS.stride * command[..., :1] - GAINS.turn * command[..., 2:3] * _LEFT
    pitching = GAINS.pitch * pitch + GAINS.pitch_rate * ang_vel[..., 1:2]
    rolling = GAINS.roll * roll + GAINS.roll_rate * ang_vel[..., 0:1]
    extend = _FRONT * pitching - _LEFT * rolling  # per leg, rad
    hip = DEFAULT_POSITIONS[0] + stride * swing - 0.5 * extend
    knee = DEFAULT_POSITIONS[1] - GAINS.lift * lift + extend
    desired = torch.stack([hip, knee], dim=-1).flatten(-2)
    return desired + GAINS.stiffen * (desired - joint_pos) - GAINS.damping * joint_vel
