"""Lay out an editable leapp_ros under the virtual environment's prefix, as colcon would.

``pip install -e .`` makes the Python code live, but (unlike a regular ``pip install .``) it
installs none of ``setup.py``'s ``data_files`` and it puts console scripts in ``bin/``. ROS
tools need both under the prefix:

- ``share/ament_index/resource_index/packages/leapp_ros`` and ``share/leapp_ros/package.xml``
  (found by ``ament_index_python``), launch and config files under ``share/leapp_ros/``;
- ``lib/leapp_ros/<executable>`` (where ``ros2 run`` and launch_ros look).

This script reads ``data_files`` and ``console_scripts`` from ``setup.py`` itself and creates
symbolic links for them, so edits to launch or config files are live too. It first removes what
an earlier run made, so renamed or deleted files leave nothing behind. ``pip uninstall
leapp_ros`` does not remove these links; run ``scripts/setup.sh`` or delete ``.venv``.

Usage: ``python scripts/ros_prefix.py [--prefix PREFIX]`` (default: ``sys.prefix``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import setuptools  # noqa: F401  (imported first, it provides distutils on Python 3.12)

PACKAGE_NAME = "leapp_ros"
REPO_ROOT = Path(__file__).resolve().parent.parent


def read_setup(root: Path) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """Return ``(data_files, executable names)`` declared by ``root/setup.py``."""
    from distutils.core import run_setup

    cwd = Path.cwd()
    os.chdir(root)  # setup.py globs paths relative to its own folder
    try:
        dist = run_setup("setup.py", stop_after="init")
    finally:
        os.chdir(cwd)
    scripts = (dist.entry_points or {}).get("console_scripts", [])
    names = [spec.split("=", 1)[0].strip() for spec in scripts]
    return list(dist.data_files or []), names


def clear_previous(prefix: Path) -> None:
    """Remove the package's share and lib folders and its ament index marker."""
    for folder in (prefix / "share" / PACKAGE_NAME, prefix / "lib" / PACKAGE_NAME):
        if folder.is_symlink() or folder.is_file():
            folder.unlink()
        elif folder.is_dir():
            shutil.rmtree(folder)
    marker = prefix / "share" / "ament_index" / "resource_index" / "packages" / PACKAGE_NAME
    if marker.is_symlink() or marker.exists():
        marker.unlink()


def link(target: Path, link_path: Path) -> None:
    """Create ``link_path`` pointing at ``target`` (parents created, old entry replaced)."""
    if not target.exists():
        raise SystemExit(f"ros_prefix: {target} does not exist; check setup.py")
    link_path.parent.mkdir(parents=True, exist_ok=True)
    if link_path.is_symlink() or link_path.exists():
        link_path.unlink()
    link_path.symlink_to(target)


def main(argv: list[str] | None = None) -> int:
    """Link data files and executables of the editable install into the prefix."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", type=Path, default=Path(sys.prefix))
    args = parser.parse_args(argv)
    prefix: Path = args.prefix.absolute()

    data_files, executables = read_setup(REPO_ROOT)
    clear_previous(prefix)
    for destination, sources in data_files:
        for source in sources:
            link(REPO_ROOT / source, prefix / destination / Path(source).name)
    (prefix / "lib" / PACKAGE_NAME).mkdir(parents=True, exist_ok=True)
    for name in executables:
        link(prefix / "bin" / name, prefix / "lib" / PACKAGE_NAME / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
