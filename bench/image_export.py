"""The camera pipeline of bench/image_latency.py: a CNN encoder (ONNX) on one camera frame, a
policy (TorchScript) on its latent and the joint state, exported for a bench.

Two frames (:data:`FRAMES`): a 480x640 ``32FC1`` depth frame (metres, a ``[H, W]`` float32
port of kind ``state/camera/depth``) and a 1280x720 ``rgb8`` colour frame (a ``[H, W, 3]``
uint8 port of kind ``state/camera/image``, cast to float inside the encoder). ``encoder``
turns the frame into :data:`LATENT` values; ``policy`` takes them with the positions and
velocities of :data:`JOINTS` (one ``sensor_msgs/JointState``) and publishes joint position
targets (``std_msgs/Float64MultiArray``). The weights are seeded, not trained: the bench times
the graph, the commands are checked against eager PyTorch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LATENT = 32
JOINTS = tuple(f"joint_{index}" for index in range(12))


@dataclass(frozen=True)
class Frame:
    """A camera frame: its name, ``sensor_msgs/Image`` encoding, the port's shape and dtype."""

    name: str
    encoding: str
    shape: tuple[int, ...]
    dtype: str
    kind: str

    @property
    def height(self) -> int:
        return self.shape[0]

    @property
    def width(self) -> int:
        return self.shape[1]

    @property
    def channels(self) -> int:
        return self.shape[2] if len(self.shape) == 3 else 1


FRAMES = {
    "depth": Frame("depth", "32FC1", (480, 640), "float32", "state/camera/depth"),
    "rgb": Frame("rgb", "rgb8", (720, 1280, 3), "uint8", "state/camera/image"),
}


@dataclass(frozen=True)
class ImageExport:
    """``spec_path``: the export's spec; ``eager(frame, position, velocity)``: the targets
    PyTorch computes with the exported weights (NumPy in, NumPy out)."""

    spec_path: Path
    frame: Frame
    eager: Callable[[Any, Any, Any], Any]


def networks(frame: Frame) -> tuple[Any, Any]:
    """The encoder and the policy (``torch.nn.Module``\\ s, seeded) for ``frame``."""
    import torch

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Sequential(
                torch.nn.Conv2d(frame.channels, 8, 8, stride=8),
                torch.nn.ELU(),
                torch.nn.Conv2d(8, 16, 4, stride=4),
                torch.nn.ELU(),
            )
            self.head = torch.nn.Linear(16, LATENT)

        def forward(self, pixels: torch.Tensor) -> torch.Tensor:
            x = pixels.float()
            x = x.permute(2, 0, 1) / 255.0 if frame.channels == 3 else x[None] / 10.0
            return torch.tanh(self.head(self.conv(x[None]).mean(dim=(-2, -1))))[0]

    class Policy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(
                torch.nn.Linear(LATENT + 2 * len(JOINTS), 64),
                torch.nn.ELU(),
                torch.nn.Linear(64, len(JOINTS)),
            )

        def forward(self, latent, position, velocity):
            return position + 0.1 * torch.tanh(self.net(torch.cat([latent, position, velocity])))

    torch.manual_seed(0)
    return Encoder().eval(), Policy().eval()


def run(encoder: Any, policy: Any, frame: Frame, pixels: Any, position: Any, velocity: Any):
    """One tick of the annotated pipeline (eager outside a leapp session)."""
    from leapp import InputKindEnum, OutputKindEnum, TensorSemantics, annotate

    pixels = annotate.input_tensors(
        "encoder", [TensorSemantics(name=frame.name, ref=pixels, kind=frame.kind)]
    )
    latent = encoder(pixels)
    annotate.output_tensors("encoder", {"latent": latent}, export_with="onnx")
    latent, position, velocity = annotate.input_tensors(
        "policy",
        [
            TensorSemantics(name="latent", ref=latent),
            TensorSemantics(
                name="position",
                ref=position,
                kind=InputKindEnum.JOINT_POSITION,
                element_names=list(JOINTS),
            ),
            TensorSemantics(
                name="velocity",
                ref=velocity,
                kind=InputKindEnum.JOINT_VELOCITY,
                element_names=list(JOINTS),
            ),
        ],
    )
    targets = policy(latent, position, velocity)
    annotate.output_tensors(
        "policy",
        [
            TensorSemantics(
                name="targets",
                ref=targets,
                kind=OutputKindEnum.JOINT_POSITION,
                element_names=list(JOINTS),
            )
        ],
        export_with="jit",
    )
    return targets


def export_image_pipeline(folder: Path, frame: Frame) -> ImageExport:
    """Export the camera pipeline of ``frame`` into ``folder``."""
    import torch

    import leapp

    encoder, policy = networks(frame)
    dtype = getattr(torch, frame.dtype)
    pixels, joints = torch.zeros(frame.shape, dtype=dtype), torch.zeros(2, len(JOINTS))
    leapp.start(name=f"camera_{frame.name}", save_path=folder)
    with torch.no_grad():
        run(encoder, policy, frame, pixels, joints[0].clone(), joints[1].clone())
    leapp.stop()

    def eager(pixels: Any, position: Any, velocity: Any) -> Any:
        with torch.no_grad():
            return run(
                encoder,
                policy,
                frame,
                torch.from_numpy(pixels),
                torch.as_tensor(position, dtype=torch.float32),
                torch.as_tensor(velocity, dtype=torch.float32),
            ).numpy()

    return ImageExport(leapp.compile_graph().path, frame, eager)
