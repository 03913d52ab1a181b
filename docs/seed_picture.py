"""Draw the seed example's pipeline picture into ``docs/`` (the README shows it)::

    python docs/seed_picture.py

Traces ``examples/torch_pipeline.py`` (its two nodes, as its ``main()`` does) into a temporary
folder, exports it with ``leapp.compile_graph(visualize=True)`` and copies the picture it drew,
``torch_pipeline.png`` and ``torch_pipeline.svg``, next to this script. Needs Pillow
(``pip install 'leapp_ros[picture]'``; the development environment has it).
"""

from __future__ import annotations

import runpy
import shutil
import tempfile
from pathlib import Path

import torch

import leapp

HERE = Path(__file__).resolve().parent
SEED = HERE.parent / "examples" / "torch_pipeline.py"


def main() -> None:
    seed = runpy.run_path(str(SEED))  # its functions, without running its main()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        leapp.start(name="torch_pipeline", save_path=folder)
        obs = seed["preprocess"](torch.zeros(6), torch.zeros(3))
        seed["run_policy"](seed["Policy"]().eval(), obs)
        leapp.stop()
        compiled = leapp.compile_graph(visualize=True)
        for suffix in (".png", ".svg"):
            drawn = compiled.path.with_suffix(suffix)
            shutil.copyfile(drawn, HERE / drawn.name)
            print(f"wrote {HERE / drawn.name}")


if __name__ == "__main__":
    main()
