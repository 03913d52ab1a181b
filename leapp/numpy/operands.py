"""NumPy values as torch operands: dtypes, constant tensors, casts and NumPy's promotion.

The helpers every part of the NumPy -> torch table shares (:mod:`leapp.numpy.functions`,
:mod:`leapp.numpy.reductions`, :mod:`leapp.numpy.shapes`, :mod:`leapp.numpy.ufuncs`) and that
the recorder of traced arrays (:mod:`leapp.trace.arrays.array`) uses to view arrays as tensors.
An entry of the table receives its arguments as torch values and calls :func:`tensor_of`,
:func:`promote` and :func:`operand` to compute with NumPy's dtypes.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from leapp.errors import TraceError

__all__ = [
    "NO_VALUE",
    "UnsupportedFormError",
    "cast",
    "constant_tensor",
    "numpy_dtype",
    "on_tensor",
    "operand",
    "promote",
    "reject",
    "shared_tensor",
    "tensor_of",
    "torch_dtype",
]


# ------------------------------------------------------------------------------ dtypes
@functools.cache
def torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype of a NumPy dtype (``float32`` -> ``torch.float32``)."""
    dtype = np.dtype(dtype)
    try:
        return torch.from_numpy(np.empty(0, dtype.newbyteorder("="))).dtype
    except TypeError as e:
        raise TraceError(
            f"NumPy dtype {dtype} has no torch equivalent, so it cannot be traced; convert the "
            "array with .astype(np.float32) (or another numeric dtype) first."
        ) from e


@functools.cache
def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The NumPy dtype of a torch dtype (``torch.float32`` -> ``float32``)."""
    try:
        return torch.empty(0, dtype=dtype).numpy().dtype
    except TypeError as e:
        raise TraceError(f"torch dtype {dtype} has no NumPy equivalent.") from e


def shared_tensor(plain: np.ndarray) -> tuple[torch.Tensor, bool]:
    """A torch tensor with ``plain``'s values, and whether it shares ``plain``'s memory."""
    torch_dtype(plain.dtype)  # unsupported dtypes raise a TraceError naming the dtype
    shared = plain.dtype.isnative and all(s >= 0 for s in plain.strides)
    source = plain if shared else np.ascontiguousarray(plain, plain.dtype.newbyteorder("="))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # read-only arrays: leapp never writes through it
        try:
            return torch.from_numpy(source), shared
        except (ValueError, TypeError):
            return torch.from_numpy(source.copy()), False


def constant_tensor(value: np.ndarray) -> torch.Tensor:
    """A copy of an untraced array as a torch tensor, frozen into the graph when used."""
    plain = np.asarray(value.view(np.ndarray) if isinstance(value, np.ndarray) else value)
    return shared_tensor(plain.copy())[0]


# ------------------------------------------------------------------------ operands
NO_VALUE = np._NoValue


class UnsupportedFormError(Exception):
    """A form or argument of a supported NumPy call that has no torch equivalent."""


def reject(**arguments: Any) -> None:
    """Raise for NumPy arguments given a value other than their no-op default."""
    for name, value in arguments.items():
        if value is not None and value is not NO_VALUE and value is not True:
            raise UnsupportedFormError(f"the argument {name}= is not supported")


def tensor_of(value: Any, dtype: Any = None) -> torch.Tensor:
    """``value`` as a tensor: tensors as they are, sequences holding tensors stacked (as NumPy
    would build the array), anything else a constant."""
    if isinstance(value, torch.Tensor):
        return value if dtype is None else cast(value, dtype)
    if isinstance(value, (list, tuple)) and any(
        isinstance(v, (torch.Tensor, list, tuple)) for v in value
    ):
        items = [tensor_of(v) for v in value]
        common = promote(*items) if dtype is None else np.dtype(dtype)
        return torch.stack([cast(item, common) for item in items])
    return constant_tensor(np.asarray(value, dtype=dtype))


def cast(x: torch.Tensor, dtype: Any) -> torch.Tensor:
    """``x`` as ``dtype`` (a NumPy dtype): a cast node only when the dtype differs."""
    if dtype is None:
        return x
    target = torch_dtype(dtype)
    return x if x.dtype == target else x.to(target)


def promote(*values: Any) -> np.dtype:
    """NumPy's result dtype for ``values`` (tensors are strong, Python scalars weak)."""

    def kind(value):
        if isinstance(value, torch.Tensor):
            return numpy_dtype(value.dtype)
        if isinstance(value, (bool, int, float, complex, np.dtype)):
            return value
        return np.asarray(value).dtype

    return np.result_type(*[kind(v) for v in values if v is not None])


def operand(value: Any, dtype: np.dtype, literal: bool = True) -> Any:
    """``value`` cast to ``dtype``: tensors by a cast node, scalars in Python."""
    if isinstance(value, torch.Tensor):
        return cast(value, dtype)
    if isinstance(value, (bool, int, float, complex)):
        scalar = np.asarray(value, dtype=dtype).item()
        return scalar if literal else torch.tensor(scalar, dtype=torch_dtype(dtype))
    return tensor_of(value, dtype)


def on_tensor(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` called on the tensor of its first argument, the rest passed as given
    (``np.copy`` is ``on_tensor(torch.clone)``)."""
    return lambda a, *args, **kwargs: function(tensor_of(a), *args, **kwargs)
