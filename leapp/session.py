"""The tracing session: ``leapp.start``, ``leapp.stop`` and the recording annotations use.

``leapp.start`` makes a new :class:`~leapp.trace.recording.Recording` the active one and installs
the NumPy/torch crossing patches; the annotations record into it; ``leapp.stop`` ends it;
``leapp.compile_graph`` takes it (:func:`take_stopped`) and turns it into an export folder.
Outside a session the annotations are pass-through no-ops, so annotated code runs untouched in
production.
"""

from __future__ import annotations

import logging
import os

from leapp.errors import SessionError
from leapp.trace import crossing
from leapp.trace.recording import Recording

logger = logging.getLogger(__name__)

__all__ = ["active_session", "start", "stop", "take_stopped"]

_active: Recording | None = None


def active_session() -> Recording | None:
    """The recording annotations write into, or None outside ``leapp.start``/``leapp.stop``."""
    return _active if _active is not None and _active.active else None


def start(name: str, save_path: str | os.PathLike = ".", *, freeze_python_values: bool = False):
    """Begin recording pipeline ``name``; the export goes to ``<save_path>/<name>/``."""
    global _active
    if _active is not None and _active.active:
        raise SessionError(
            f"leapp.start({name!r}): session {_active.name!r} is still recording; call "
            "leapp.stop() (and leapp.compile_graph()) first."
        )
    _active = Recording(name, save_path, freeze_python_values)
    crossing.activate()
    logger.info("recording pipeline %r", name)
    return _active


def stop() -> None:
    """End recording. Annotations are no-ops again afterwards."""
    if _active is None or not _active.active:
        raise SessionError("leapp.stop(): no session is recording; call leapp.start() first.")
    _active.stop()


def take_stopped() -> Recording:
    """The stopped recording, for ``compile_graph``; it is forgotten afterwards."""
    global _active
    if _active is None:
        raise SessionError(
            "leapp.compile_graph(): there is no session; call leapp.start(), run the annotated "
            "code, then leapp.stop()."
        )
    if _active.active:
        raise SessionError(
            f"leapp.compile_graph(): session {_active.name!r} is still recording; call "
            "leapp.stop() first."
        )
    recording, _active = _active, None
    return recording
