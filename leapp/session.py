"""The tracing session: ``leapp.start``, ``leapp.stop`` and the recording annotations use.

``leapp.start`` makes a new :class:`~leapp.trace.pipeline.recording.Recording` the active one and
installs the NumPy/torch crossing patches; the annotations record into it; ``leapp.stop`` ends it;
``leapp.compile_graph`` takes it (:func:`take_stopped`) and turns it into an export folder. Outside
a session the annotations are pass-through no-ops, so annotated code runs untouched in production.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

from leapp.errors import SessionError
from leapp.trace.arrays import crossing
from leapp.trace.pipeline.dry_run import DryRecording
from leapp.trace.pipeline.recording import Recording
from leapp.trace.ports import listed_names
from leapp.trace.segments import warp_calls

logger = logging.getLogger(__name__)

__all__ = ["active_session", "start", "stop", "take_stopped"]

_active: Recording | DryRecording | None = None


def active_session() -> Recording | DryRecording | None:
    """The recording annotations write into, or None outside ``leapp.start``/``leapp.stop``."""
    return _active if _active is not None and _active.active else None


def start(
    name: str,
    save_path: str | os.PathLike = ".",
    *,
    freeze_python_values: bool = False,
    verbose: bool = False,
    max_cached_io: int | None = None,
    dry_run: bool = False,
    non_traced: str | Iterable[str] | None = None,
    global_patching: bool = True,
    patching: Any = None,
):
    """Begin recording pipeline ``name``; the export goes to ``<save_path>/<name>/``.

    Keywords NVIDIA LEAPP code passes are accepted with these meanings:

    - ``verbose=True`` logs every recorded node run (its inputs, outputs and number of
      operations) at INFO level on the ``leapp`` loggers.
    - ``max_cached_io=N`` keeps the input/output examples of the first ``N`` runs of each node
      (all runs when None); only those go to the examples file and are validated by
      ``compile_graph``. Edges are still found from every run.
    - ``global_patching=False`` turns the NumPy crossing off, as in LEAPP:
      ``tensor.numpy()``, ``np.asarray(tensor)`` and ``np.array(tensor)`` on traced values
      give plain arrays and NumPy code is not recorded (a node output computed that way is
      refused as not traced). By default the crossings (and ``torch.from_numpy`` /
      ``torch.as_tensor`` of traced arrays) keep the trace. ``patching`` changes nothing:
      leapp records torch through ``__torch_function__`` and needs no patches (a value is
      logged at debug level).
    - ``dry_run=True`` traces nothing and exports nothing, as in LEAPP
      (:mod:`leapp.trace.pipeline.dry_run`): every annotation hands back the caller's own
      objects, the code runs as in production, and ``compile_graph`` writes the spec of the
      nodes, ports and edges found (every ``model_path`` and ``backend`` null) and, with
      ``visualize=True``, its picture.
    - ``non_traced=[node, ...]`` (a name or a list of names): those nodes are recorded as
      usual (their ports and edges are in the spec) but get no artifact, as if they were
      closed with ``export_with=None`` (LEAPP forces their backend to None the same way).

    Starting while a session is still recording (code that raised in the middle of a traced
    run, say) logs a warning and discards that session: its open runs are released (adopted
    tensors and module buffers handed back) and the NumPy/torch crossing patches removed
    before the new session installs them again.
    """
    global _active
    if max_cached_io is not None and (
        isinstance(max_cached_io, bool) or not isinstance(max_cached_io, int) or max_cached_io < 1
    ):
        raise SessionError(
            f"leapp.start({name!r}, max_cached_io={max_cached_io!r}): pass a whole number >= 1 "
            "(the runs per node whose examples are kept), or None to keep all."
        )
    non_traced = _node_names(name, non_traced)
    if _active is not None and _active.active:
        logger.warning(
            "leapp.start(%r): session %r was still recording; it is discarded (open nodes %s) "
            "and the new session starts",
            name,
            _active.name,
            list(_active.open),
        )
        _active.discard()
    if patching is not None:
        logger.debug(
            "leapp.start: patching=%r ignored: leapp records torch through __torch_function__ "
            "and needs no patches",
            patching,
        )
    if dry_run:
        _active = DryRecording(
            name, save_path, verbose=verbose, max_cached_io=max_cached_io, non_traced=non_traced
        )
        logger.info("dry run of pipeline %r: nothing is traced or exported", name)
        return _active
    _active = Recording(
        name,
        save_path,
        freeze_python_values,
        verbose=verbose,
        max_cached_io=max_cached_io,
        non_traced=non_traced,
        numpy_crossing=global_patching is not False,
    )
    if _active.numpy_crossing:
        crossing.activate()
    warp_calls.activate()  # Warp calls in nodes become Warp segments (when warp is imported)
    logger.info("recording pipeline %r", name)
    return _active


def _node_names(name: str, non_traced: Any) -> tuple[str, ...]:
    names = listed_names(non_traced)
    if names is None:
        raise SessionError(
            f"leapp.start({name!r}, non_traced={non_traced!r}): pass a node name or a list of "
            "node names."
        )
    return names


def stop() -> None:
    """End recording. Annotations are no-ops again afterwards."""
    if _active is None or not _active.active:
        raise SessionError("leapp.stop(): no session is recording; call leapp.start() first.")
    try:
        _active.stop()
    finally:
        warp_calls.deactivate()


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
