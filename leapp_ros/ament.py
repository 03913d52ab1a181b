"""Make ``ament_index_python`` find ``leapp_ros`` when it was installed with pip.

``colcon build`` plus ``source install/setup.bash`` puts the install prefix on
``AMENT_PREFIX_PATH``. A pip install into a virtual environment has no such step, yet the data
files (``share/leapp_ros/package.xml``, the ament index marker, launch files) land under
``sys.prefix``. :func:`register_prefix` appends that prefix to ``AMENT_PREFIX_PATH`` of this
process (and so of every process it starts), which is all ``ament_index_python`` and launch
need. Importing :mod:`leapp_ros` calls it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["register_prefix"]

PACKAGE_NAME = "leapp_ros"
VARIABLE = "AMENT_PREFIX_PATH"


def register_prefix(prefix: str | None = None) -> bool:
    """Append ``prefix`` (default ``sys.prefix``) to ``AMENT_PREFIX_PATH`` if leapp_ros is there.

    Nothing changes when ``<prefix>/share/leapp_ros/package.xml`` does not exist (for example
    on a colcon install, where the sourced setup script already did the job) or when the prefix
    is already listed. Entries already present keep their order and precedence.

    Returns:
        True when the variable was changed.
    """
    prefix = sys.prefix if prefix is None else prefix
    if not (Path(prefix) / "share" / PACKAGE_NAME / "package.xml").is_file():
        return False
    entries = [entry for entry in os.environ.get(VARIABLE, "").split(os.pathsep) if entry]
    if any(os.path.realpath(entry) == os.path.realpath(prefix) for entry in entries):
        return False
    os.environ[VARIABLE] = os.pathsep.join([*entries, prefix])
    return True
