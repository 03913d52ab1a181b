"""Fit the rover's encoder and policy by imitation of a scripted controller, in MuJoCo, on CPU.

The teacher (:func:`teacher`) knows where the obstacle is and steers around it on the side
away from its centre, then back to the line and on to the goal; the student
(``rover_policy.py``'s networks) sees the obstacle only in the front camera's depth frame.
It is DAgger: the teacher drives the first walks; then, each round, the student drives (its
GRU carried tick to tick), the teacher labels every state it visited with the velocity it
would have asked for, and both networks are fitted again, through the GRU over whole walks,
on everything gathered so far. Each walk moves the obstacle sideways (left or right of the
straight line, so the camera decides the side) and the start a little. The rover is
``rover.xml`` driven as ``sim_map.yaml`` says, exactly as ``leapp-ros sim`` drives it: the
joints' PD torques at every physics step, the depth frame MuJoCo's renderer gives, the
velocity in the rover's frame. Seeded, single-threaded: the same weights on every run of one
machine::

    python examples/perception/train.py --out trained/rover.pt

It prints the imitation error and, for a few obstacle placements, how far from the goal the
student ended and how close it came to the obstacle.

Where the environment variable ``LEAPP_FIT_CACHE`` names a folder, :func:`train` keeps the
weights it fitted there, named by a hash of everything the fit depends on (this file,
``rover_policy.py``, the MJCF, the map, the seed, torch's and MuJoCo's versions), and loads
them from there instead of fitting again when that hash was fitted before. The test suite
sets it to a folder of its run (CI to one its two lanes share), so the run fits the rover once
for the tests and the page that need it.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import rover_policy as deploy  # noqa: E402

from leapp_ros.sim.mujoco_robot import require_mujoco  # noqa: E402
from leapp_ros.sim.sim_map import load_map  # noqa: E402

OBSTACLE_X = 1.5  # the obstacle's centre along x (m); its y changes from walk to walk
OBSTACLE_HALF = (0.15, 0.25)  # its half length (x) and half width (y)
ROVER_RADIUS = 0.12
CLEARANCE = 0.25  # how far the teacher passes from the obstacle's side
OFFSETS = (0.08, 0.35)  # |obstacle y| of the training walks (m)
ROUNDS = 3  # DAgger rounds after the teacher's own walks
WALKS = 16  # walks per round
TICKS = 90  # control ticks per walk
STEPS = 100  # optimizer steps per round
BATCH = 12  # walks per optimizer step


def teacher(position: np.ndarray, obstacle_y: float) -> np.ndarray:
    """The velocity (m/s along x, y) the scripted controller asks for at ``position``."""
    x, y = float(position[0]), float(position[1])
    side = 1.0 if obstacle_y <= 0.0 else -1.0
    passing = obstacle_y + side * (OBSTACLE_HALF[1] + ROVER_RADIUS + CLEARANCE)
    front, back = OBSTACLE_X - OBSTACLE_HALF[0], OBSTACLE_X + OBSTACLE_HALF[0]
    wanted_y = passing if front - 1.1 < x < back + 0.25 else deploy.GOAL[1]
    vx = 3.0 * (deploy.GOAL[0] - x)
    if front - 0.6 < x < back and abs(wanted_y - y) > 0.08:
        vx = min(vx, 0.1)  # not alongside yet: creep
    velocity = np.array([vx, 2.0 * (wanted_y - y)])
    return np.clip(velocity, -deploy.MAX_SPEED, deploy.MAX_SPEED)


def clearance(position: np.ndarray, obstacle_y: float) -> float:
    """The gap between the rover's rim and the obstacle's box (m; < 0: they touch)."""
    dx = max(abs(float(position[0]) - OBSTACLE_X) - OBSTACLE_HALF[0], 0.0)
    dy = max(abs(float(position[1]) - obstacle_y) - OBSTACLE_HALF[1], 0.0)
    return math.hypot(dx, dy) - ROVER_RADIUS


@dataclass(frozen=True)
class Walk:
    """One walk: per tick the depth frame, position, velocity and the teacher's label."""

    depth: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    label: np.ndarray
    obstacle_y: float

    def outcome(self) -> tuple[float, float]:
        """The final distance to the goal and the smallest clearance."""
        end = self.position[-1]
        gap = min(clearance(p, self.obstacle_y) for p in self.position)
        return float(np.hypot(*(end - np.asarray(deploy.GOAL)))), gap


class Rover:
    """``rover.xml`` in MuJoCo, driven as ``sim_map.yaml`` says."""

    def __init__(self, mjcf: Path, map_path: Path):
        self.mujoco = mujoco = require_mujoco()
        self.map = load_map(map_path)
        self.model = mujoco.MjModel.from_xml_path(str(mjcf))
        self.data = mujoco.MjData(self.model)
        self.obstacle = self.model.geom("obstacle").id
        self.body = self.model.body(self.map.base).id
        self.renderer = mujoco.Renderer(self.model, *deploy.DEPTH)
        self.renderer.enable_depth_rendering()
        self.camera = self.model.camera("front").id

    def reset(self, start_y: float, obstacle_y: float) -> None:
        self.mujoco.mj_resetData(self.model, self.data)
        self.model.geom_pos[self.obstacle][1] = obstacle_y
        self.data.qpos[:2] = (0.0, start_y)
        self.mujoco.mj_forward(self.model, self.data)

    def sense(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The depth frame, the joint positions, the velocity in the rover's frame."""
        self.renderer.update_scene(self.data, camera=self.camera)
        velocity = np.zeros(6)
        self.mujoco.mj_objectVelocity(self.model, self.data, self.mujoco.mjtObj.mjOBJ_XBODY,
                                      self.body, velocity, 1)  # fmt: skip
        return self.renderer.render().copy(), self.data.qpos[:2].copy(), velocity[3:5]

    def act(self, targets: np.ndarray) -> None:
        command = self.map.command
        for _ in range(self.map.decimation):
            q, qd = self.data.qpos[:2], self.data.qvel[:2]
            self.data.qfrc_applied[:2] = command.kp * (targets - q) - command.kd * qd
            self.mujoco.mj_step(self.model, self.data)
        self.mujoco.mj_forward(self.model, self.data)

    def close(self) -> None:
        self.renderer.close()


def walk(rover: Rover, nets, start_y: float, obstacle_y: float, teacher_drives: bool) -> Walk:
    """One walk; the student drives unless ``teacher_drives``."""
    rover.reset(start_y, obstacle_y)
    frames, positions, velocities, labels = [], [], [], []
    h = deploy.start_state()
    for _ in range(TICKS):
        depth, position, velocity = rover.sense()
        label = teacher(position, obstacle_y)
        speed = label
        if not teacher_drives:
            with torch.no_grad():
                latent = nets[0](torch.from_numpy(depth))[None]
                here = torch.tensor(position[None], dtype=torch.float32)
                moving = torch.tensor(velocity[None], dtype=torch.float32)
                out, h = nets[1](latent, here, moving, h[None])
                speed, h = out[0].double().numpy(), h[0]
        frames.append(depth)
        positions.append(position)
        velocities.append(velocity)
        labels.append(label)
        rover.act(position + deploy.LOOKAHEAD * speed)
    stack = [np.asarray(v, np.float32) for v in (frames, positions, velocities, labels)]
    return Walk(*stack, obstacle_y=obstacle_y)


def fit(nets, walks: list[Walk], optimizer, generator: torch.Generator) -> float:
    """``STEPS`` optimizer steps on batches of whole walks; the last loss."""
    data = [torch.from_numpy(np.stack([getattr(w, field) for w in walks]))
            for field in ("depth", "position", "velocity", "label")]  # fmt: skip
    loss = torch.tensor(0.0)
    for _ in range(STEPS):
        pick = torch.randperm(len(walks), generator=generator)[:BATCH]
        depth, position, velocity, label = (d[pick] for d in data)
        latent = nets[0](depth)
        h = torch.zeros(len(pick), deploy.HIDDEN)
        speeds = []
        for t in range(TICKS):
            speed, h = nets[1](latent[:, t], position[:, t], velocity[:, t], h)
            speeds.append(speed)
        loss = torch.mean((torch.stack(speeds, 1) - label) ** 2)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return float(loss.detach())


def placements(rng: np.random.Generator, count: int) -> list[tuple[float, float]]:
    """``(start y, obstacle y)`` of ``count`` walks, obstacles left and right in turn."""
    sides = np.resize([1.0, -1.0], count)
    return [(float(rng.uniform(-0.1, 0.1)), float(side * rng.uniform(*OFFSETS)))
            for side in sides]  # fmt: skip


def train(mjcf: Path, map_path: Path, seed: int = 0, log=print):
    """The fitted ``(encoder, policy)``; from ``LEAPP_FIT_CACHE`` where that folder holds
    the weights of this fit (see the module's documentation), else fitted and kept there."""
    kept = kept_weights(mjcf, map_path, seed)
    if kept is not None and kept.is_file():
        log(f"the weights of this fit, from {kept} (LEAPP_FIT_CACHE)")
        return deploy.load(kept)
    nets = fitted(mjcf, map_path, seed, log)
    if kept is not None:
        partial = kept.with_name(f"{kept.name}.{os.getpid()}.partial")
        torch.save({"encoder": nets[0].state_dict(), "policy": nets[1].state_dict()}, partial)
        partial.replace(kept)  # whole or absent, for a reader in another process
    return nets


def kept_weights(mjcf: Path, map_path: Path, seed: int) -> Path | None:
    """Where ``LEAPP_FIT_CACHE`` keeps the weights of this fit; None where it is not set."""
    folder = os.environ.get("LEAPP_FIT_CACHE")
    if not folder:
        return None
    mujoco = require_mujoco()
    digest = hashlib.sha256()
    for path in (Path(__file__), HERE / "rover_policy.py", Path(mjcf), Path(map_path)):
        digest.update(Path(path).read_bytes())
    digest.update(f"{seed} {torch.__version__} {mujoco.__version__}".encode())
    Path(folder).mkdir(parents=True, exist_ok=True)
    return Path(folder) / f"rover-{digest.hexdigest()[:16]}.pt"


def fitted(mjcf: Path, map_path: Path, seed: int, log):
    """The ``(encoder, policy)`` fitted by DAgger, as the module's documentation says."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    generator = torch.Generator().manual_seed(seed)
    nets = (deploy.Encoder(), deploy.Policy())
    optimizer = torch.optim.Adam([p for n in nets for p in n.parameters()], lr=3e-3)
    rover = Rover(mjcf, map_path)
    try:
        walks = [walk(rover, nets, y0, oy, True) for y0, oy in placements(rng, WALKS)]
        for round_ in range(ROUNDS + 1):
            started = time.perf_counter()
            loss = fit(nets, walks, optimizer, generator)
            log(f"round {round_}: {len(walks)} walks, imitation loss {loss:.5f} "
                f"({time.perf_counter() - started:.1f} s)")  # fmt: skip
            if round_ < ROUNDS:
                for n in nets:
                    n.eval()
                walks += [walk(rover, nets, y0, oy, False) for y0, oy in placements(rng, WALKS)]
                for n in nets:
                    n.train()
    finally:
        rover.close()
    return nets[0].eval(), nets[1].eval()


def evaluate(
    nets, mjcf: Path, map_path: Path, obstacles=(-0.3, -0.2, -0.1, 0.1, 0.2, 0.3)
) -> list:
    """``(obstacle y, distance to the goal at the end, smallest clearance)`` of student
    walks from the start."""
    rover = Rover(mjcf, map_path)
    try:
        return [(oy, *walk(rover, nets, 0.0, oy, False).outcome()) for oy in obstacles]
    finally:
        rover.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", required=True, help="weights file to write")
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    mjcf, map_path = HERE / "rover.xml", HERE / "sim_map.yaml"
    started = time.perf_counter()
    encoder, policy = train(mjcf, map_path, arguments.seed)
    print(f"fitted in {time.perf_counter() - started:.1f} s")
    for oy, distance, gap in evaluate((encoder, policy), mjcf, map_path):
        print(
            f"obstacle y {oy:+.2f} m: {distance:.3f} m from the goal at the end, "
            f"closest {gap:.3f} m to the obstacle"
        )
    out = Path(arguments.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"encoder": encoder.state_dict(), "policy": policy.state_dict()}, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
