"""Which test runs what the documentation shows: the pages run block by block, and the folder
of snippet files the pages include, so ``test/docs/test_doc_blocks.py`` can tell a block no
test runs from one a test does."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ROOT", "RUN_PAGES", "SNIPPETS", "SNIPPETS_TEST", "doc_pages"]

ROOT = Path(__file__).resolve().parents[2]

RUN_PAGES = {
    "docs/tutorial.md": "test/docs/test_tutorial.py",
    "README.md": "test/docs/test_tutorial.py",
    "docs/how-to/colcon.md": "test/tools/test_ros2_workspace.py",
    "docs/how-to/bags-and-sim.md": "test/docs/test_how_to_pages.py",
    "docs/how-to/deployments.md": "test/docs/test_how_to_pages.py",
    "docs/how-to/generated-packages.md": "test/docs/test_how_to_pages.py",
    "docs/how-to/multi-host.md": "test/docs/test_how_to_pages.py",
    "docs/how-to/nvidia-exports.md": "test/docs/test_how_to_pages.py",
    "docs/how-to/perception.md": "test/docs/test_how_to_pages.py",
    "docs/how-to/safe-operation.md": "test/docs/test_how_to_pages.py",
}
"""Page (relative to the repository's root) -> the test module that runs its steps."""

SNIPPETS = "docs/snippets"
"""The folder of files the pages include whole or in sections; every file there is run or
checked by :data:`SNIPPETS_TEST`."""
SNIPPETS_TEST = "test/docs/test_doc_snippets.py"


def doc_pages() -> list[Path]:
    """Every Markdown page of the documentation, and the README."""
    return [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
