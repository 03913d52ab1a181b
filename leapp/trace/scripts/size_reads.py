"""Size reads in a TorchScript call's dry run, as the constants they are.

A script made with ``torch.jit.trace`` reads sizes through tensors: ``B = obs.size(0)`` is
``prim::NumToTensor(aten::size(obs, 0))``, a 0-d tensor; arithmetic on it follows
(``floor_divide``, ``mul``, ``add``), and ``int(...)`` (``aten::Int``) turns the result back into
the Python int a slice, ``view`` or ``range`` takes (``obs[:, i * n:(i + 1) * n]`` for the frames
of an observation history). The interpreter makes NumToTensor's tensor itself, outside the
dispatcher, so ``make_fx`` sees a plain tensor, records the arithmetic on it as operations on a
frozen constant, and then refuses the ``int()``: it cannot tell a size from a number read out of
the data.

Shapes are fixed per port (the spec lists them, and every runtime checks its inputs against
them), so a value computed from sizes and constants alone is a constant of the export, the same
for every valid input. :func:`constant_sizes` tells ``make_fx`` so for one dry run: the result
of an operation whose tensor arguments are all plain (never traced by the dry run) or already
such constants, and are not tensors the module holds (a buffer may change from tick to tick),
is tracked as a constant when it has at most one element, as ``make_fx`` tracks
``torch.tensor(3)``. ``int()`` / ``.item()`` of it then gives its value and records nothing.
A number read from a traced input, or from a module buffer, is refused as before.

The patch replaces ``torch.fx.experimental.proxy_tensor.proxy_call`` (what ``make_fx``'s
dispatch mode calls for every operation) while the dry run runs and puts it back afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch.utils import _pytree as pytree

__all__ = ["constant_sizes"]

_LIMIT = 1  # elements: a size, or a number computed from sizes (make_fx's own limit)


@contextlib.contextmanager
def constant_sizes(module_tensors: Iterable[torch.Tensor]) -> Iterator[None]:
    """While the block runs ``make_fx``, small values computed from plain tensors only (sizes,
    the script's constants) are constants of the trace; ``module_tensors`` never are."""
    from torch.fx.experimental import proxy_tensor

    held = {id(tensor) for tensor in module_tensors}
    original = proxy_tensor.proxy_call

    def proxy_call(proxy_mode: Any, func: Any, pre_dispatch: bool, args: Any, kwargs: Any):
        out = original(proxy_mode, func, pre_dispatch, args, kwargs)
        if isinstance(out, torch.Tensor) and _computed_from_constants(func, args, kwargs):
            _track_as_constant(proxy_mode.tracer, out, held, args, kwargs)
        return out

    proxy_tensor.proxy_call = proxy_call
    try:
        yield
    finally:
        proxy_tensor.proxy_call = original


def _computed_from_constants(func: Any, args: Any, kwargs: Any) -> bool:
    tags = getattr(func, "tags", ())
    name = getattr(getattr(func, "overloadpacket", None), "__name__", "")
    return torch.Tag.nondeterministic_seeded not in tags and not name.startswith(
        ("empty", "new_empty")  # uninitialized memory is no constant
    )


def _track_as_constant(tracer: Any, out: torch.Tensor, held: set[int], args, kwargs) -> None:
    from torch.fx.experimental import proxy_tensor

    if out.numel() > _LIMIT:
        return
    tracker = tracer.tensor_tracker
    for tensor in pytree.tree_leaves((args, kwargs)):
        if not isinstance(tensor, torch.Tensor):
            continue
        if id(tensor) in held:
            return  # a module tensor: its value may change between ticks
        slot = tracker.get(tensor)
        if slot is not None and slot.constant is None:
            return  # traced by the dry run: read from the data
    slot = tracker.get(out)
    if slot is not None and slot.constant is None:
        with torch._C.DisableTorchFunctionSubclass():
            constant = out.detach().clone()
        tracker[out] = proxy_tensor._ProxyTensor(slot.proxy, constant)
