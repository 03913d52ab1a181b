"""The Warp API while a session records: calls on a node's values are recorded as segments.

:func:`activate` (``leapp.start``) replaces these ``warp`` functions and ``wp.array`` methods
with wrappers; :func:`deactivate` (``leapp.stop``) puts the originals back:

- ``wp.from_torch`` / ``wp.from_numpy`` of a traced value: the array holds the node's value;
- ``wp.launch`` (:mod:`leapp.trace.segments.warp_launch`), ``wp.copy``, ``wp.clone``,
  ``array.zero_()`` / ``fill_()`` / ``assign()`` touching such arrays: recorded into the node's
  current Warp segment (:mod:`leapp.trace.segments.warp_region`), and run;
- ``wp.to_torch`` of such an array: a traced tensor on the segment's output;
- reading one on the host (``array.numpy()``, ``list()``, ``np.asarray(array)``) inside its
  node is refused with a :class:`~leapp.errors.TraceError` (printing it is fine);
  ``wp.array(<traced value>)`` too (it copies memory leapp cannot follow).

Calls that touch no node's value run untouched. Warp is never imported here: the wrappers are
installed when ``warp`` is already imported, or as soon as it is (an import hook). Code that
bound the functions before the session (``from warp import launch``) is not covered: call
them through the module (``wp.launch``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from leapp.errors import SessionError, TraceError
from leapp.trace.arrays.array import TracedArray, is_live, port_tensor
from leapp.trace.location import user_location
from leapp.trace.segments import warp_region
from leapp.trace.segments.warp_launch import (
    is_array,
    make_launch,
    snapshot,
    states_of,
    tensor_view,
)
from leapp.trace.segments.warp_region import recording, unchecked
from leapp.trace.segments.warp_segment import Copy, Fill
from leapp.trace.tensors.tensor import TracedTensor, wrap

__all__ = ["activate", "deactivate", "explicit_segment"]

_originals: dict[tuple[Any, str], Any] = {}


def activate() -> None:
    """Start recording Warp calls for a new session."""
    warp_region.start_tracking()
    warp = sys.modules.get("warp")
    if warp is not None and hasattr(warp, "launch"):
        _install(warp)
    elif not any(isinstance(f, _ImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _ImportHook())


def deactivate() -> None:
    """Stop recording: the original Warp functions are back."""
    warp_region.stop_tracking()
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _ImportHook)]
    for (owner, name), original in _originals.items():
        setattr(owner, name, original)
    _originals.clear()


@contextlib.contextmanager
def explicit_segment(trace: Any) -> Iterator[None]:
    """``annotate.warp_op``: the block's Warp calls are one segment (or more, split by torch
    operations) of ``trace``, also calls that touch none of its arrays."""
    tracker = warp_region.tracking()
    if tracker is None:
        raise SessionError(f"annotate.warp_op({trace.node!r}): no session is recording.")
    import warp

    _install(warp)
    tracker.seal(trace)
    tracker.explicit.append(trace)
    try:
        yield
    finally:
        tracker.explicit.pop()
        tracker.seal(trace)


class _ImportHook(importlib.abc.MetaPathFinder):
    """Installs the wrappers right after ``import warp`` runs during a session."""

    def find_spec(self, name, path, target=None):
        if name != "warp":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            if warp_region.tracking() is not None:
                _install(module)

        spec.loader.exec_module = exec_module
        return spec


def _install(warp: Any) -> None:
    if _originals:
        return
    array = warp.array
    patches = [
        (warp, "from_torch", _from_torch),
        (warp, "from_numpy", _from_numpy),
        (warp, "to_torch", _to_torch),
        (warp, "launch", make_launch),
        (warp, "copy", _copy),
        (warp, "clone", _clone),
        (array, "zero_", lambda original: _fill(original, zero=True)),
        (array, "fill_", lambda original: _fill(original, zero=False)),
        (array, "assign", _assign),
        (array, "__init__", _init),
        (array, "numpy", lambda original: _host_read(original, "array.numpy()")),
        (array, "list", lambda original: _host_read(original, "array.list()")),
        (array, "__str__", _printed),
    ]
    for owner, name, make in patches:
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        _originals[(owner, name)] = original
        setattr(owner, name, functools.wraps(original)(make(original)))
    interface = array.__dict__["__array_interface__"]
    _originals[(array, "__array_interface__")] = interface
    array.__array_interface__ = property(
        _host_read(interface.fget, "NumPy reading the array (np.asarray, np.array)")
    )


# ------------------------------------------------------------------------- conversions
def _from_torch(original: Any):
    def from_torch(t, *args, **kwargs):
        tracker = recording()
        if tracker is None or not (isinstance(t, TracedTensor) and is_live(t)):
            return original(t, *args, **kwargs)
        if kwargs.get("return_ctype") or (len(args) >= 4 and args[3]):
            raise TraceError(
                f"node {t._leapp_trace.node!r}: wp.from_torch(..., return_ctype=True) at "
                f"{user_location()} gives a raw descriptor leapp cannot follow; pass the array."
            )
        with unchecked():
            array = original(t.tensor, *args, **kwargs)
        tracker.add(array, t._leapp_trace, alias=t)
        return array

    return from_torch


def _from_numpy(original: Any):
    def from_numpy(arr, *args, **kwargs):
        tracker = recording()
        if tracker is None or not (isinstance(arr, TracedArray) and is_live(arr)):
            return original(arr, *args, **kwargs)
        tensor = port_tensor(arr)  # the traced value it copies, now
        with unchecked():
            array = original(arr.view(np.ndarray), *args, **kwargs)
        tracker.add(array, tensor._leapp_trace, source=tensor._leapp_node)
        return array

    return from_numpy


def _to_torch(original: Any):
    def to_torch(a, *args, **kwargs):
        tracker = recording()
        state = tracker.state(a) if tracker is not None else None
        if state is not None:
            tracker.forget_earlier_runs([state])
        if state is None or state.trace is None:
            return original(a, *args, **kwargs)
        trace = state.trace
        if trace.closed and trace.recording.open:
            raise TraceError(
                f"wp.to_torch at {user_location()} converts a Warp array of node {trace.node!r} "
                f"(already closed) while node(s) {list(trace.recording.open)} are open. Publish "
                f"the value with annotate.output_tensors({trace.node!r}, ...) and pass it to "
                "annotate.input_tensors of the node that uses it."
            )
        with unchecked():
            tensor = original(a, *args, **kwargs)
        if trace.closed or not trace.recording.active:
            return tensor  # a closed node's array, used outside any node
        node = state.value()
        if node is None:
            node = trace.constant(tensor)
        return wrap(tensor, trace, node)

    return to_torch


def _init(original: Any):
    def init(self, data=None, *args, **kwargs):
        if recording() is not None and is_live(data):
            node = data._leapp_trace.node
            raise TraceError(
                f"node {node!r}: wp.array(<traced value>) at {user_location()} copies the "
                "value's memory, which leapp cannot follow. Use wp.from_torch(tensor) (or "
                "wp.from_numpy(array)) instead."
            )
        return original(self, data, *args, **kwargs)

    return init


# ----------------------------------------------------------------------- recorded calls
def _copy(original: Any):
    def copy(dest, src, dest_offset=0, src_offset=0, count=0, stream=None):
        tracker = recording()
        trace = None if tracker is None else tracker.owner("wp.copy", states_of([dest, src]))
        if trace is None:
            return original(dest, src, dest_offset, src_offset, count, stream)
        states = [tracker.state_for(dest), tracker.state_for(src)]
        segment = tracker.segment(trace, str(dest.device))
        to, source = (segment.use(s, tensor_view, snapshot) for s in states)
        with unchecked():
            original(dest, src, dest_offset, src_offset, count, stream)
        segment.record.calls.append(Copy(to, source, dest_offset, src_offset, count))
        tracker.wrote(segment, states[0])

    return copy


def _clone(original: Any):
    def clone(src, *args, **kwargs):
        with unchecked():
            result = original(src, *args, **kwargs)
        tracker = recording()
        if tracker is not None and tracker.state(src) is not None:
            wp = sys.modules["warp"]
            wp.copy(result, src)  # recorded when src holds a node's values
        return result

    return clone


def _fill(original: Any, zero: bool):
    def fill(self, *args):
        tracker = recording()
        state = tracker.state(self) if tracker is not None else None
        trace = tracker.owner("array.fill_", [state]) if state is not None else None
        if trace is None:
            return original(self, *args)
        segment = tracker.segment(trace, str(self.device))
        index = segment.use(state, tensor_view, snapshot)
        with unchecked():
            original(self, *args)
        segment.record.calls.append(Fill(index, None if zero else args[0]))
        tracker.wrote(segment, state)

    return fill


def _assign(original: Any):
    def assign(self, src):
        tracker = recording()
        state = tracker.state(self) if tracker is not None else None
        if state is None or state.trace is None:
            return original(self, src)
        if not is_array(src):
            wp = sys.modules["warp"]
            with unchecked():
                src = wp.array(src, dtype=self.dtype, shape=self.shape, device=self.device)
        sys.modules["warp"].copy(self, src)

    return assign


# ---------------------------------------------------------------------- host reads
def _host_read(original: Any, what: str):
    def read(self, *args, **kwargs):
        tracker = recording()
        state = tracker.state(self) if tracker is not None else None
        trace = state.trace if state is not None else None
        if trace is not None and trace.recording.active and not trace.closed:
            raise TraceError(
                f"node {trace.node!r}: {what} at {user_location()} reads a Warp array that holds "
                "the node's traced values on the host; the exported graph cannot follow values "
                "that leave it. Keep computing in Warp kernels, or convert it with "
                "wp.to_torch(array) and continue with torch operations."
            )
        return original(self, *args, **kwargs)

    return read


def _printed(original: Any):
    def printed(self):
        with unchecked():  # printing a value changes nothing
            return original(self)

    return printed
