"""What a torch call is, for the recorder: its torch name, whether it mutates or reads data.

``describe`` classifies each callable that reaches ``TracedTensor.__torch_function__``:

- torch functions and ``torch.nn.functional`` calls are recorded as themselves;
- Python operators arrive as Tensor methods (``a - b`` as ``Tensor.sub``) and are recorded as the
  torch function of the same name (``torch.sub``), which is how the seed listing shows them;
- reflected operators (``2 / x``) are recorded as the equivalent call with the operands in order;
- other Tensor methods stay ``call_method`` under their own name (``x.unsqueeze(0)``);
- shape and dtype queries are metadata: run, never recorded;
- ``bool()``, ``.item()``, ``.tolist()``... turn traced data into Python values and are refused;
- ``tensor.numpy()`` crosses to NumPy (``to_numpy``): a TracedArray on the same graph node.

A TorchScript method (:func:`is_script_call`) reaches the recorder as one opaque callable; it is
recorded as the ATen operations it runs (:mod:`leapp.trace.scripts`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "NUMBER_HINT",
    "Operation",
    "describe",
    "is_script_call",
    "qualified_name",
    "script_name",
]


@dataclass(frozen=True)
class Operation:
    kind: str  # call_function | call_method | metadata | python_value | unsupported | to_numpy
    target: Any
    name: str
    mutates: bool = False
    rewrite_args: Callable[[tuple], tuple] | None = None
    hint: str = ""


# Tensor methods that are Python operators (or their twins) and are recorded as torch functions.
_OPERATORS = {
    name: name
    for name in (
        "add sub mul div true_divide floor_divide remainder fmod pow matmul eq ne lt le gt ge "
        "neg positive abs bitwise_and bitwise_or bitwise_xor bitwise_not logical_not"
    ).split()
}
_OPERATORS.update(
    {
        "__add__": "add", "__radd__": "add", "__sub__": "sub", "__mul__": "mul",
        "__rmul__": "mul", "__truediv__": "div", "__div__": "div", "__matmul__": "matmul",
        "__mod__": "remainder", "__pow__": "pow", "__neg__": "neg", "__abs__": "abs",
        "__pos__": "positive", "__and__": "bitwise_and", "__rand__": "bitwise_and",
        "__or__": "bitwise_or", "__ror__": "bitwise_or", "__xor__": "bitwise_xor",
        "__rxor__": "bitwise_xor", "__invert__": "bitwise_not", "__eq__": "eq", "__ne__": "ne",
        "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge",
        "__floordiv__": "floor_divide",
    }
)  # fmt: skip

_SWAP = lambda args: (args[1], args[0], *args[2:])  # noqa: E731
# Reflected operators: (kind, target, args rewrite). ``2 / x`` arrives as ``x.__rdiv__(2)``.
_REFLECTED = {
    "__rsub__": ("call_function", torch.rsub, None),
    "__rdiv__": ("call_function", operator.truediv, _SWAP),
    "__rtruediv__": ("call_function", operator.truediv, _SWAP),
    "__rpow__": ("call_function", torch.pow, _SWAP),
    "__rmod__": ("call_function", torch.remainder, _SWAP),
    "__rfloordiv__": ("call_function", operator.floordiv, _SWAP),
    "__rmatmul__": ("call_function", torch.matmul, _SWAP),
}

_IN_PLACE_DUNDERS = {
    "__iadd__": "add_", "__isub__": "sub_", "__imul__": "mul_", "__itruediv__": "div_",
    "__idiv__": "div_", "__ifloordiv__": "floor_divide_", "__imod__": "remainder_",
    "__ipow__": "pow_", "__iand__": "bitwise_and_", "__ior__": "bitwise_or_",
    "__ixor__": "bitwise_xor_", "__imatmul__": "matmul_",
}  # fmt: skip

# Queries about a tensor's structure, not its values: run them, record nothing.
_METADATA = set(
    (
        "dim ndimension size numel nelement stride is_contiguous is_floating_point is_complex "
        "is_signed element_size data_ptr storage_offset get_device is_pinned is_shared "
        "is_inference has_names untyped_storage storage dim_order _is_view is_set_to "
        "__len__ __repr__ __str__ __format__ __hash__ __reduce_ex__ __deepcopy__ __dir__ "
        "__sizeof__ is_tensor __get__ requires_grad_ retain_grad register_hook"
    ).split()
)
_METADATA_ATTRIBUTES = set(
    (
        "shape dtype device ndim layout requires_grad is_leaf grad_fn grad names is_cuda is_cpu "
        "is_meta is_mps is_xpu is_sparse is_quantized is_nested itemsize nbytes output_nr "
        "_version _base is_mkldnn is_vulkan"
    ).split()
)

_BRANCH_HINT = (
    "Express the choice with tensor operations instead, e.g. torch.where(cond, a, b), "
    "torch.clamp, or masks."
)
NUMBER_HINT = "Keep the value a tensor (x[0] rather than x[0].item()) and compute with torch."
_PYTHON_VALUES = {
    "__bool__": ("bool()/if/while on a traced tensor", _BRANCH_HINT),
    "__nonzero__": ("bool()/if/while on a traced tensor", _BRANCH_HINT),
    "is_nonzero": ("is_nonzero()", _BRANCH_HINT),
    "__contains__": ("'in' on a traced tensor", _BRANCH_HINT),
    "equal": ("torch.equal()", _BRANCH_HINT),
    "allclose": ("torch.allclose()", _BRANCH_HINT),
    "__int__": ("int()", NUMBER_HINT),
    "__float__": ("float()", NUMBER_HINT),
    "__complex__": ("complex()", NUMBER_HINT),
    "__index__": ("using a traced tensor as a Python index", NUMBER_HINT),
    "item": (".item()", NUMBER_HINT),
    "tolist": (".tolist()", NUMBER_HINT),
    "__array__": (
        "NumPy reading a traced tensor",
        "Convert it with tensor.numpy() or np.asarray(tensor), which keep the trace, or keep "
        "computing with torch operations.",
    ),
}


def describe(func: Any, args: tuple, kwargs: dict) -> Operation:
    """Classify ``func`` as called with ``args``/``kwargs`` on at least one TracedTensor."""
    name = getattr(func, "__name__", None) or repr(func)
    if name == "__get__":
        return _attribute(getattr(func.__self__, "__name__", "?"), args)
    if name == "numpy":
        return Operation("to_numpy", func, "Tensor.numpy()")
    if name in _PYTHON_VALUES:
        what, hint = _PYTHON_VALUES[name]
        return Operation("python_value", func, what, hint=hint)
    if name in _METADATA or (name == "type" and len(args) == 1 and not kwargs):
        return Operation("metadata", func, name)
    if kwargs.get("out") is not None:
        return Operation(
            "unsupported", func, f"{name}(out=...)", hint="assign the result instead of out=."
        )
    if isinstance(func, torch._ops.OpOverload):  # an ATen operation (torch.export, TorchScript)
        return Operation("call_function", func, f"torch.ops.{func}", mutates=_writes(func))
    if not _is_tensor_method(func):
        mutates = (name.endswith("_") and not name.endswith("__")) or kwargs.get("inplace") is True
        return Operation("call_function", func, qualified_name(func), mutates=mutates)
    if name == "__getitem__":
        return Operation("call_function", operator.getitem, "indexing")
    if name == "__setitem__":
        return Operation("call_function", operator.setitem, "item assignment", mutates=True)
    if name in _REFLECTED:
        kind, target, rewrite = _REFLECTED[name]
        return Operation(kind, target, name, rewrite_args=rewrite)
    if name in _IN_PLACE_DUNDERS:
        return Operation("call_method", _IN_PLACE_DUNDERS[name], name, mutates=True)
    if name in _OPERATORS:
        return Operation("call_function", getattr(torch, _OPERATORS[name]), f"torch.{name}")
    if name.startswith("__"):
        return Operation("unsupported", func, name, hint="this Python protocol is not traced.")
    return Operation("call_method", name, f"Tensor.{name}", mutates=name.endswith("_"))


def _attribute(attr: str, args: tuple) -> Operation:
    """Tensor properties: metadata, or the operation a value-carrying property stands for."""
    if attr in _METADATA_ATTRIBUTES:
        return Operation("metadata", None, attr)
    ndim = args[0].dim() if args and isinstance(args[0], torch.Tensor) else 0
    if attr in ("T", "H"):
        dims = tuple(reversed(range(ndim)))
        return Operation(
            "call_function", torch.permute, f"Tensor.{attr}", rewrite_args=lambda a: (a[0], dims)
        )
    if attr in ("mT", "mH"):
        return Operation(
            "call_function",
            torch.transpose,
            f"Tensor.{attr}",
            rewrite_args=lambda a: (a[0], -2, -1),
        )
    if attr == "data":
        return Operation("call_method", "detach", "Tensor.data")
    if attr == "real":
        return Operation("call_function", torch.real, "Tensor.real")
    return Operation(
        "unsupported", None, f"Tensor.{attr}", hint="this tensor attribute is not traced."
    )


def _writes(op: torch._ops.OpOverload) -> bool:
    """Whether ATen operation ``op`` writes into one of its arguments (``aten.copy_``)."""
    return any(a.alias_info is not None and a.alias_info.is_write for a in op._schema.arguments)


def _is_tensor_method(func: Any) -> bool:
    owner = getattr(func, "__objclass__", None)
    if owner is not None:
        return owner is torch._C.TensorBase or owner is torch.Tensor
    return getattr(func, "__module__", None) == "torch._tensor"


def qualified_name(func: Any) -> str:
    """How a recorded callable is named in listings: ``torch.sub``, ``operator.getitem``..."""
    name = getattr(func, "__name__", repr(func))
    if getattr(torch, name, None) is func:
        return f"torch.{name}"
    if getattr(torch.nn.functional, name, None) is func:
        return f"torch.nn.functional.{name}"
    if getattr(operator, name, None) is func:
        return f"operator.{name}"
    return f"{getattr(func, '__module__', None) or '?'}.{name}"


def is_script_call(func: Any) -> bool:
    """Whether ``func`` (handed to ``__torch_function__``) is a TorchScript method."""
    return isinstance(func, torch._C.ScriptMethod)


def script_name(func: Any) -> str:
    """``module Actor (forward)`` or ``function squash``, for messages."""
    owner = getattr(func, "owner", None)
    if owner is not None:
        return f"module {owner._type().name()} ({func.name})"
    return f"function {getattr(func, 'name', None) or getattr(func, 'qualified_name', '?')}"
