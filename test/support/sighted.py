"""A robot that sees, for the simulator's camera, odometry and height scan tests: its MJCF
(written here), a policy exported with leapp that takes what it sees, and the map.

The world: a floor plane and a red step (a box 0.2 m high, from x = 0.25 m to 0.75 m, across
y = -1..1 m), a camera ``overhead`` fixed 1.5 m above the floor looking straight down, and a
free base (a 0.4 x 0.2 x 0.1 m box) whose principal inertia axes are rotated from its frame,
with an arm on a hinge (``arm``) and a camera ``belly`` under it looking down. The MJCF adds the
sensors the tests compare with: a ``velocimeter`` and a ``gyro`` at the base's origin (site
``base_origin``), its ``framepos`` and ``framequat``.

The policy: ``see`` (TorchScript) takes the arm's position (JointState), the belly camera's
depth (``32FC1``, :data:`DEPTH`), the base's twist (Odometry, ``state/body/velocity``: linear
then angular) and the height samples (PointCloud2, a :data:`GRID`), and makes the arm's
position target; ``look`` (ONNX) takes the overhead camera's colour frame (``rgb8``,
:data:`COLOUR`) and gives its mean colour. :func:`see` and :func:`look` are eager PyTorch
outside a leapp session.
"""

from __future__ import annotations

from pathlib import Path

import torch

import leapp
from leapp import InputKindEnum, OutputKindEnum, TensorSemantics, annotate

__all__ = [
    "COLOUR",
    "DEPTH",
    "GRID",
    "MAP",
    "STEP",
    "export_sighted_policy",
    "look",
    "see",
    "write_sighted_model",
]

DEPTH = (64, 96)  # the belly camera's depth frame, rows x columns
COLOUR = (48, 64)  # the overhead camera's colour frame
GRID = (5, 7)  # height samples: rows (ahead) x columns (left)
STEP = {"x": (0.25, 0.75), "top": 0.2}  # the step's extent along x and its height (m)
OVERHEAD_M = 1.5  # the overhead camera's height

MJCF = """<mujoco model="sighted">
  <option timestep="0.002"/>
  <worldbody>
    <light pos="0 0 3" dir="0 0 -1" directional="true"/>
    <geom name="floor" type="plane" size="3 3 0.1" rgba="0.5 0.5 0.5 1"/>
    <geom name="step" type="box" pos="0.5 0 0.1" size="0.25 1 0.1" rgba="0.9 0.1 0.1 1"/>
    <camera name="overhead" pos="0.3 0 1.5" xyaxes="1 0 0 0 1 0"/>
    <body name="base" pos="0 0 0.6">
      <freejoint name="root"/>
      <inertial pos="0 0 0" mass="2" diaginertia="0.01 0.02 0.03" quat="0 0.7071068 0.7071068 0"/>
      <geom name="base_box" type="box" size="0.2 0.1 0.05" rgba="0.2 0.2 0.8 1"/>
      <site name="base_origin"/>
      <camera name="belly" pos="0.05 0 -0.06" xyaxes="1 0 0 0 1 0"/>
      <body name="arm" pos="0.2 0 0">
        <joint name="arm" type="hinge" axis="0 1 0" damping="0.01"/>
        <geom type="capsule" fromto="0 0 0 0.15 0 0" size="0.02" mass="0.2"/>
      </body>
    </body>
  </worldbody>
  <sensor>
    <velocimeter name="base_velocity" site="base_origin"/>
    <gyro name="base_gyro" site="base_origin"/>
    <framepos name="base_pos" objtype="xbody" objname="base"/>
    <framequat name="base_quat" objtype="xbody" objname="base"/>
  </sensor>
</mujoco>
"""

MAP = {
    "decimation": 5,
    "base": "base",
    "ticks": 12,
    "cameras": {
        "belly": {"depth": "see/depth"},
        "overhead": {"colour": "look/rgb", "every": 3},
    },
    "height_scan": {"topic": "see/heights", "grid": list(GRID), "spacing": [0.1, 0.1]},
    "command": {"mode": "position", "kp": 2.0, "kd": 0.1},
}


def write_sighted_model(folder: Path) -> Path:
    """The MJCF in ``folder``; its path."""
    path = folder / "sighted.xml"
    path.write_text(MJCF, encoding="utf-8")
    return path


def see(arm, depth, velocity, heights):
    """The arm's target from what the base sees and how it moves (the ``see`` node)."""
    arm, depth, velocity, heights = annotate.input_tensors(
        "see",
        [
            TensorSemantics(
                name="arm", ref=arm, kind=InputKindEnum.JOINT_POSITION, element_names=["arm"]
            ),
            TensorSemantics(name="depth", ref=depth, kind="state/camera/depth"),
            TensorSemantics(name="velocity", ref=velocity, kind=InputKindEnum.BODY_VEL),
            TensorSemantics(name="heights", ref=heights, kind="state/terrain/height"),
        ],
    )
    near = depth[::8, ::8].reshape(-1).min()
    signal = near + 0.1 * velocity.sum() + heights.mean() + 0.5 * arm
    target = 0.3 * torch.tanh(signal)
    annotate.output_tensors(
        "see",
        [
            TensorSemantics(
                name="target",
                ref=target,
                kind=OutputKindEnum.JOINT_POSITION,
                element_names=["arm"],
            )
        ],
        export_with="jit",
    )
    return target


def look(rgb):
    """The overhead frame's mean colour, 0..1 (the ``look`` node)."""
    rgb = annotate.input_tensors(
        "look", [TensorSemantics(name="rgb", ref=rgb, kind="state/camera/image")]
    )
    mean = rgb.float().mean(dim=(0, 1)) / 255.0
    annotate.output_tensors("look", {"mean": mean}, export_with="onnx")
    return mean


def export_sighted_policy(save_path: Path) -> Path:
    """``see`` and ``look`` exported as the pipeline ``sighted``; the export folder."""
    leapp.start(name="sighted", save_path=save_path)
    with torch.no_grad():
        see(torch.zeros(1), torch.ones(DEPTH), torch.zeros(6), torch.zeros(GRID))
        look(torch.zeros((*COLOUR, 3), dtype=torch.uint8))
    leapp.stop()
    return leapp.compile_graph().path.parent
