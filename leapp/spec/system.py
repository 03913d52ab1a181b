"""The ``system information`` section: the machine and versions an export was made with."""

from __future__ import annotations

import importlib.metadata
import platform

from leapp.spec.schema import LEAPP_CONFIG_VERSION
from leapp.version import __version__

__all__ = ["system_information"]


def system_information() -> dict[str, str | None]:
    """The ``system information`` section describing this machine, keys as LEAPP writes them."""
    import torch

    try:
        warp_version: str | None = importlib.metadata.version("warp-lang")
    except importlib.metadata.PackageNotFoundError:
        warp_version = None
    return {
        "cuda version": str(torch.version.cuda),
        "leapp config version": LEAPP_CONFIG_VERSION,
        "leapp version": __version__,
        "os": _os_name(),
        "python version": platform.python_version(),
        "torch version": str(torch.__version__),
        "warp version": warp_version,
    }


def _os_name() -> str:
    """``"Debian GNU/Linux 12"`` style (os-release NAME VERSION_ID, as LEAPP writes it)."""
    try:
        release = platform.freedesktop_os_release()
    except OSError:
        return platform.platform()
    if release.get("NAME") and release.get("VERSION_ID"):
        return f"{release['NAME']} {release['VERSION_ID']}"
    return release.get("PRETTY_NAME") or platform.platform()
