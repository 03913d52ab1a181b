"""Pipeline pictures drawn from the examples' code: each example is traced and exported with
``leapp.compile_graph(visualize=True)`` into a temporary folder, which draws its picture from
the spec (:mod:`leapp.spec.picture`).

The docs build draws them into the site (``hooks.py``). The README, which GitHub shows without
a build, uses a copy of the seed's picture kept in ``docs/``; redraw it with::

    python docs/hooks/pictures.py
"""

from __future__ import annotations

import runpy
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _seed() -> None:
    import torch

    seed = runpy.run_path(str(EXAMPLES / "torch_pipeline.py"))  # without running its main()
    seed["run_policy"](seed["Policy"]().eval(), seed["preprocess"](torch.zeros(6), torch.zeros(3)))


def _quadruped() -> None:
    import torch

    sys.path.insert(0, str(EXAMPLES / "quadruped"))
    try:
        import deploy
    finally:
        sys.path.remove(str(EXAMPLES / "quadruped"))
    with torch.no_grad():  # the picture shows the structure: any weights draw the same
        deploy.act(deploy.Policy(), deploy.observe(*deploy.standing_inputs()),
                   deploy.start_clock())  # fmt: skip


def _rover() -> None:
    import torch

    sys.path.insert(0, str(EXAMPLES / "perception"))
    try:
        import rover_policy as rover
    finally:
        sys.path.remove(str(EXAMPLES / "perception"))
    with torch.no_grad():  # the picture shows the structure: any weights draw the same
        latent = rover.encode(rover.Encoder(), torch.full(rover.DEPTH, rover.MAX_RANGE))
        rover.act(rover.Policy(), latent, torch.zeros(2), torch.zeros(3), rover.start_state())


#: pipeline name -> the code that runs one tick of it inside a leapp session
EXAMPLE_PIPELINES: dict[str, Callable[[], None]] = {
    "torch_pipeline": _seed,
    "quadruped": _quadruped,
    "rover": _rover,
}


def draw(name: str, folder: Path) -> list[Path]:
    """Trace and export example ``name`` into a temporary folder; its picture's PNG and SVG
    copied into ``folder``."""
    import torch

    import leapp

    torch.manual_seed(0)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        leapp.start(name=name, save_path=scratch)
        EXAMPLE_PIPELINES[name]()
        leapp.stop()
        compiled = leapp.compile_graph(visualize=True)
        written = []
        for suffix in (".png", ".svg"):
            drawn = compiled.path.with_suffix(suffix)
            written.append(Path(shutil.copyfile(drawn, folder / drawn.name)))
    return written


if __name__ == "__main__":
    for path in draw("torch_pipeline", ROOT / "docs"):
        print(f"wrote {path}")
