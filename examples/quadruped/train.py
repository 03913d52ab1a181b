"""Fit the quadruped's policy by imitation of the scripted trot controller, in MuJoCo, on CPU.

This stands in for the training run you did elsewhere (Isaac Lab, legged_gym, rsl_rl): it
writes the actor's weights, which ``deploy.py`` loads and exports. It is DAgger: the teacher
(:mod:`teacher`) walks the robot first; then, each round, the policy walks it (with small
random pushes and commands), the teacher labels every state the policy visited, and the
policy is fitted again on everything gathered so far. The robot is ``quadruped.xml`` driven as
``sim_map.yaml`` says, exactly as ``leapp-ros sim`` drives it: joint PD torques at every
physics step, the IMU site's orientation and angular velocity, the JointState's positions and
velocities. Seeded, single-threaded: the same weights on every run::

    python examples/quadruped/train.py --out trained/policy.pt

It prints the imitation error and how the policy walks at the map's commanded velocity
(distance, sideways drift, the largest tilt) next to the teacher.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import deploy  # noqa: E402
from teacher import scripted_targets  # noqa: E402

from leapp_ros.sim.sim_map import load_map  # noqa: E402

ROUNDS = 5  # DAgger rounds after the teacher's own walks
WALKS = 12  # walks per round
TICKS = 150  # control ticks per walk (3 s)
EPOCHS = 60  # passes over the data per round
SPEEDS = (0.0, 0.4)  # m/s: commanded forward speeds are drawn from this range
YAW_RATES = (-0.6, 0.6)  # rad/s


@dataclass(frozen=True)
class Walk:
    """One walk: the observations and gait clocks seen, where the base went, how it tilted."""

    obs: np.ndarray
    clocks: np.ndarray
    distance: np.ndarray
    max_tilt_deg: float
    fell: bool


class Robot:
    """``quadruped.xml`` in MuJoCo, driven as ``sim_map.yaml`` says."""

    def __init__(self, mjcf: Path, map_path: Path):
        self.map = load_map(map_path)
        self.model = mujoco.MjModel.from_xml_path(str(mjcf))
        self.data = mujoco.MjData(self.model)
        joints = [self.model.joint(name) for name in deploy.JOINTS]
        self._qpos = np.array([joint.qposadr[0] for joint in joints])
        self._dofs = np.array([joint.dofadr[0] for joint in joints])
        self._base = self.model.body(self.map.base).id
        command = self.map.command
        self._kp, self._kd, self._limit = command.kp, command.kd, command.torque_limit

    def reset(self) -> None:
        mujoco.mj_resetData(self.model, self.data)
        for joint, value in self.map.initial.items():
            self.data.qpos[self.model.joint(joint).qposadr[0]] = value
        mujoco.mj_forward(self.model, self.data)

    def sensors(self, command: np.ndarray) -> tuple[torch.Tensor, ...]:
        """What the observe node gets: JointState, Imu (orientation and angular velocity of
        the IMU site, MuJoCo's framequat and gyro sensors there) and the commanded Twist."""
        data = self.data
        values = (data.qpos[self._qpos], data.qvel[self._dofs], data.sensor("imu_gyro").data,
                  data.sensor("imu_quat").data, command)  # fmt: skip
        return tuple(torch.tensor(value, dtype=torch.float32) for value in values)

    def act(self, targets: np.ndarray, push: np.ndarray) -> None:
        """One control tick: PD torques towards ``targets`` at every physics step, a force
        ``push`` on the base; then ``mj_forward``, as leapp-ros sim does."""
        data = self.data
        data.xfrc_applied[self._base, :3] = push
        for _ in range(self.map.decimation):
            q, qd = data.qpos[self._qpos], data.qvel[self._dofs]
            torque = self._kp * (targets - q) - self._kd * qd
            if self._limit is not None:
                torque = np.clip(torque, -self._limit, self._limit)
            data.qfrc_applied[self._dofs] = torque
            mujoco.mj_step(self.model, data)
        mujoco.mj_forward(self.model, data)

    def tilt_deg(self) -> float:
        return math.degrees(math.acos(min(1.0, max(-1.0, float(self.data.xmat[self._base][8])))))

    def fallen(self) -> bool:
        return self.map.fall.fallen(float(self.data.xpos[self._base][2]), self.tilt_deg())

    def walk(self, actor, command, ticks: int, rng: np.random.Generator | None = None) -> Walk:
        """Walk ``ticks`` control ticks under ``actor(obs, clock) -> targets``; with ``rng``,
        random pushes on the base (a few ticks of up to 15 N, now and then)."""
        self.reset()
        clock = deploy.start_clock()
        observations, clocks, push = [], [], np.zeros(3)
        max_tilt, fell = 0.0, False
        for _ in range(ticks):
            obs = deploy.observe(*self.sensors(command))
            observations.append(obs)
            clocks.append(clock)
            with torch.no_grad():
                targets = actor(obs, clock)
            clock = deploy.turn(clock)
            if rng is not None:
                if rng.random() < 0.03:
                    push = np.append(rng.uniform(-15.0, 15.0, 2), 0.0)
                elif rng.random() < 0.3:
                    push = np.zeros(3)
            self.act(targets.numpy().astype(np.float64), push)
            max_tilt = max(max_tilt, self.tilt_deg())
            if self.fallen():
                fell = True
                break
        base = self.data.xpos[self._base]
        return Walk(torch.stack(observations).numpy(), torch.stack(clocks).numpy(),
                    base[:2].copy(), max_tilt, fell)  # fmt: skip


def teacher(obs: torch.Tensor, clock: torch.Tensor) -> torch.Tensor:
    return scripted_targets(obs, clock)


def student(policy: deploy.Policy):
    def actor(obs: torch.Tensor, clock: torch.Tensor) -> torch.Tensor:
        return deploy.DEFAULT_POSITIONS + deploy.ACTION_SCALE * policy(obs, clock)

    return actor


def fit(policy: deploy.Policy, obs: np.ndarray, clocks: np.ndarray, epochs: int) -> float:
    """Fit ``policy`` to the teacher's targets on every state gathered; the last epoch's RMS
    target error (rad) on them."""
    inputs, clock = torch.from_numpy(obs), torch.from_numpy(clocks)
    labels = (scripted_targets(inputs, clock) - deploy.DEFAULT_POSITIONS) / deploy.ACTION_SCALE
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    batch, loss = 256, torch.tensor(0.0)
    for _ in range(epochs):
        order = torch.randperm(len(inputs))
        total = 0.0
        for start in range(0, len(inputs), batch):
            index = order[start : start + batch]
            loss = torch.mean((policy(inputs[index], clock[index]) - labels[index]) ** 2)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(index)
    return math.sqrt(total / len(inputs)) * deploy.ACTION_SCALE


def held_out_error(policy: deploy.Policy, walks: list[Walk]) -> float:
    """RMS difference (rad) between the policy's and the teacher's targets on the states of
    ``walks``, which the policy was not fitted on."""
    obs = torch.from_numpy(np.concatenate([walk.obs for walk in walks]))
    clocks = torch.from_numpy(np.concatenate([walk.clocks for walk in walks]))
    with torch.no_grad():
        difference = student(policy)(obs, clocks) - scripted_targets(obs, clocks)
    return float(difference.pow(2).mean().sqrt())


def draw_command(rng: np.random.Generator) -> np.ndarray:
    return np.array([rng.uniform(*SPEEDS), 0.0, rng.uniform(*YAW_RATES)])


def describe(name: str, walk: Walk, seconds: float) -> str:
    x, y = walk.distance
    state = "FELL" if walk.fell else "no fall"
    return (f"{name:<8} walked x {x:+.2f} m, y {y:+.2f} m in {seconds:.0f} s, largest tilt "
            f"{walk.max_tilt_deg:.1f} deg, {state}")  # fmt: skip


def train(out: Path, seed: int = 0) -> deploy.Policy:
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    robot = Robot(HERE / "quadruped.xml", HERE / "sim_map.yaml")
    policy = deploy.Policy()
    began = time.monotonic()
    walks = [robot.walk(teacher, draw_command(rng), TICKS, rng) for _ in range(WALKS)]
    for round_ in range(ROUNDS + 1):
        obs = np.concatenate([walk.obs for walk in walks])
        clocks = np.concatenate([walk.clocks for walk in walks])
        error = fit(policy, obs, clocks, EPOCHS)
        policy.eval()
        fresh = [robot.walk(student(policy), draw_command(rng), TICKS, rng) for _ in range(WALKS)]
        falls = sum(walk.fell for walk in fresh)
        print(f"round {round_}: fitted on {len(obs)} states (RMS error {error:.4f} rad); its "
              f"own walks: RMS error {held_out_error(policy, fresh):.4f} rad, {falls}/{WALKS} "
              "fell")  # fmt: skip
        policy.train()
        walks += fresh
    policy.eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(policy.state_dict(), out)
    command = np.array(robot.map.command_velocity, np.float64)
    seconds = robot.map.ticks * robot.map.decimation * robot.model.opt.timestep
    print(f"at the map's command {command.tolist()} for {robot.map.ticks} ticks:")
    for name, actor in (("teacher", teacher), ("policy", student(policy))):
        print(describe(name, robot.walk(actor, command, robot.map.ticks), seconds))
    print(f"wrote {out} ({time.monotonic() - began:.0f} s)")
    return policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("trained/policy.pt"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    train(args.out, args.seed)


if __name__ == "__main__":
    main()
