"""``wp.launch`` while a session records: a launch on a node's arrays joins its Warp segment.

The wrapper :func:`make_launch` builds runs the kernel eagerly and records it into the node's
current segment (:mod:`leapp.trace.segments.warp_region`), with every array argument as a buffer of
the segment. Traced tensors and NumPy arrays passed straight to ``wp.launch`` count as
``wp.from_torch`` / ``wp.from_numpy`` of them. Which arguments the kernel writes comes from Warp's
own code analysis (the one behind ``verify_autograd_array_access``); where that is not available
(generic kernels), every array argument counts as written, which is always correct.

Refused with a :class:`~leapp.errors.TraceError` naming the node, the user's line and what to do:
arrays of two nodes in one launch (:meth:`~leapp.trace.segments.warp_region.WarpTracker.owner`),
``@wp.struct`` arrays and struct arguments that hold arrays, views (slices) of a node's arrays, and
the adjoint / ``record_cmd`` forms of ``wp.launch``.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

import numpy as np

from leapp.errors import TraceError
from leapp.trace.arrays.array import TracedArray, is_live
from leapp.trace.location import user_location
from leapp.trace.segments.warp_region import WarpTracker, recording, unchecked
from leapp.trace.segments.warp_segment import Launch, Ref
from leapp.trace.tensors.tensor import TracedTensor

__all__ = ["is_array", "make_launch", "snapshot", "states_of", "tensor_view"]

_NO_STRUCT = (
    "Use arrays of scalars, vectors, quaternions or matrices (one array per struct field, made "
    "with wp.from_torch), which a segment takes as inputs and gives as outputs."
)


def make_launch(original: Any):
    """The recording ``wp.launch`` around Warp's ``original``."""
    signature = inspect.signature(original)

    def launch(*args, **kwargs):
        tracker = recording()
        if tracker is None:
            return original(*args, **kwargs)
        call = signature.bind(*args, **kwargs)
        call.apply_defaults()
        given = call.arguments
        kernel = given["kernel"]
        inputs = [_as_array(v, kernel, i) for i, v in enumerate(given["inputs"])]
        outputs = [_as_array(v, kernel, len(inputs) + i) for i, v in enumerate(given["outputs"])]
        arrays = [v for v in (*inputs, *outputs) if is_array(v)]
        trace = tracker.owner(f"wp.launch({kernel.key})", states_of(arrays))
        if trace is None:
            return original(*args, **kwargs)
        where = user_location()
        _check(tracker, trace, kernel, given, inputs + outputs, where)
        segment = tracker.segment(trace, str(_device(given["device"], arrays)))
        index = {id(a): segment.use(tracker.state_for(a), tensor_view, snapshot) for a in arrays}
        options = {k: given[k] for k in ("max_blocks", "block_dim") if given[k]}
        with unchecked():
            result = original(
                kernel,
                given["dim"],
                inputs=inputs,
                outputs=outputs,
                device=given["device"],
                stream=given["stream"],
                **options,
            )

        def argument(value: Any) -> Any:
            return Ref(index[id(value)]) if is_array(value) else value

        segment.record.calls.append(
            Launch(
                kernel,
                given["dim"],
                tuple(map(argument, inputs)),
                tuple(map(argument, outputs)),
                options,
                where,
            )
        )
        written = _written(kernel)
        for position, value in enumerate(inputs + outputs):
            writes = written is None or position in written or position >= len(inputs)
            if writes and is_array(value):
                tracker.wrote(segment, tracker.state_for(value))
        return result

    return launch


def is_array(value: Any) -> bool:
    return isinstance(value, sys.modules["warp"].array)


def states_of(arrays: list) -> list:
    """The tracker's states of those ``arrays`` it knows, or of the arrays they view."""
    tracker = recording()
    found = []
    for array in arrays:
        while array is not None and tracker.state(array) is None:
            array = getattr(array, "_ref", None)
        if array is not None:
            found.append(tracker.state(array))
    return found


def tensor_view(array: Any) -> Any:
    """How torch sees ``array`` (the same memory)."""
    with unchecked():
        return sys.modules["warp"].to_torch(array, requires_grad=False)


def snapshot(array: Any) -> np.ndarray:
    """A copy of ``array``'s contents now."""
    with unchecked():
        return array.numpy().copy()


def _as_array(value: Any, kernel: Any, position: int) -> Any:
    """A traced tensor or array passed straight to ``wp.launch`` as the Warp array it is."""
    if not (isinstance(value, (TracedTensor, TracedArray)) and is_live(value)):
        return value
    wp = sys.modules["warp"]
    parameters = kernel.adj.args
    dtype = (
        getattr(parameters[position].type, "dtype", None) if position < len(parameters) else None
    )
    if isinstance(value, TracedTensor):
        return wp.from_torch(value, dtype=dtype)
    return wp.from_numpy(value, dtype=dtype)


def _check(tracker: WarpTracker, trace: Any, kernel: Any, given: dict, values: list, where: str):
    wp = sys.modules["warp"]
    node, name = trace.node, f"wp.launch({kernel.key}, ...)"
    if given["adjoint"] or given["adj_inputs"] or given["adj_outputs"] or given["record_cmd"]:
        raise TraceError(
            f"node {node!r}: {name} at {where} uses adjoint=, adj_inputs=, adj_outputs= or "
            "record_cmd=, which a Warp segment does not record; launch the forward kernel "
            "plainly inside a node."
        )
    for value in values:
        if is_array(value) and wp.types.type_is_struct(value.dtype):
            raise TraceError(
                f"node {node!r}: {name} at {where} passes an array of @wp.struct values "
                f"({value.dtype.key}), which leapp cannot export. {_NO_STRUCT}"
            )
        struct = getattr(value, "_cls", None)
        if struct is not None and any(wp.types.is_array(v.type) for v in struct.vars.values()):
            raise TraceError(
                f"node {node!r}: {name} at {where} passes a @wp.struct ({struct.key}) that holds "
                f"arrays, which leapp cannot export. {_NO_STRUCT}"
            )
        if is_array(value) and tracker.state(value) is None and _views_node_array(tracker, value):
            raise TraceError(
                f"node {node!r}: {name} at {where} passes a view (a slice) of a Warp array that "
                "holds the node's values. Slice the torch tensor before wp.from_torch, or index "
                "inside the kernel."
            )


def _views_node_array(tracker: WarpTracker, array: Any) -> bool:
    base = getattr(array, "_ref", None)
    while base is not None:
        state = tracker.state(base)
        if state is not None and state.trace is not None:
            return True
        base = getattr(base, "_ref", None)
    return False


def _device(device: Any, arrays: list) -> Any:
    wp = sys.modules["warp"]
    if device is not None:
        return wp.get_device(device)
    return arrays[0].device if arrays else wp.get_device()


_written_cache: dict[int, tuple[Any, frozenset[int] | None]] = {}


def _written(kernel: Any) -> frozenset[int] | None:
    """Positions of the arguments ``kernel`` writes (Warp's code analysis), or None when unknown
    (then every array argument counts as written)."""
    cached = _written_cache.get(id(kernel))
    if cached is not None and cached[0] is kernel:
        return cached[1]
    written: frozenset[int] | None = None
    if not getattr(kernel, "is_generic", False):
        try:
            from warp._src import context

            module = kernel.module
            block_dim = module.options["block_dim"]
            options = module.resolve_options(sys.modules["warp"].config, block_dim=block_dim)
            options |= {
                "output_arch": None,
                "block_dim": block_dim,
                "verify_autograd_array_access": True,
            }
            config = sys.modules["warp"].config
            level = config.log_level
            config.log_level = max(level, 40)  # the analysis's own gradient warnings: not ours
            try:
                with context._codegen_lock:
                    context.ModuleBuilder(module, options)
            finally:
                config.log_level = level
            written = frozenset(i for i, a in enumerate(kernel.adj.args) if a.is_write)
        except Exception:  # Warp changed its analysis: count every array as written
            written = None
    _written_cache[id(kernel)] = (kernel, written)
    return written
