"""The traced array's dispatch table: where :class:`~leapp.trace.arrays.array.TracedArray`
hands NumPy's protocols (``__array_ufunc__``, ``__array_function__``) and its own methods.

The recorders set the entries when they are imported: calls by
:mod:`leapp.trace.arrays.numpy_recorder`, writes by :mod:`leapp.trace.arrays.writes` (see
there for each one's arguments). Importing :mod:`leapp.trace.arrays` imports both, so every
entry is set before a traced array exists; an entry nobody set raises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ARRAY_CALLS", "ArrayCalls"]


def _no_recorder(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError(
        "a NumPy call on a TracedArray: no recorder is registered. Import "
        "leapp.trace.arrays.numpy_recorder and leapp.trace.arrays.writes (importing "
        "leapp.trace.arrays does) before tracing."
    )


@dataclass
class ArrayCalls:
    """The functions a TracedArray hands its calls to (see the module documentation)."""

    ufunc: Callable[..., Any] = _no_recorder  # __array_ufunc__ without out=
    function: Callable[..., Any] = _no_recorder  # __array_function__
    getitem: Callable[..., Any] = _no_recorder
    astype: Callable[..., Any] = _no_recorder
    set_shape: Callable[..., None] = _no_recorder
    python_value: Callable[..., Any] = _no_recorder  # bool(a), a.item()...: refused or frozen
    refuse: Callable[..., None] = _no_recorder  # an in-place method leapp does not trace
    ufunc_out: Callable[..., Any] = _no_recorder  # __array_ufunc__ with out= (a += 1)
    copyto: Callable[..., None] = _no_recorder
    assign: Callable[..., None] = _no_recorder  # a[key] = value, a.fill(value)


ARRAY_CALLS = ArrayCalls()
