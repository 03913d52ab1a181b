"""The scope of one call of torch's TorchScript-based ONNX exporter: what leapp changes of its
process-wide state for the duration of that call, and puts back after it.

:func:`onnx_exporter_scope` does two things:

- the exporter's own log (it prints the whole TorchScript graph to stderr when it refuses one,
  and its log switch is stuck on in torch 2.13) goes to the debug log of the caller;
- the exporter's last step, which parses the written model with the ``onnx`` package to insert
  the ONNX functions of custom-domain operations registered with onnxscript functions
  (``onnx_proto_utils._add_onnxscript_fn``), runs only when such a registration exists. Without
  one there is nothing to insert and the step returns the bytes unchanged, but importing
  ``onnx`` (which imports ``ml_dtypes`` and registers its NumPy loops) can cost more than the
  rest of ``compile_graph`` for a small pipeline (figures: docs, explanation, performance).
  Where ``onnx`` is imported already, where a
  custom-domain function is registered, or where this torch lacks the step, torch's own step
  runs as it is.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["onnx_exporter_scope"]

# Domains whose nodes the exporter's step never looks up (torch's jit_utils.is_aten/prim/onnx).
_OFFICIAL_DOMAINS = frozenset({"aten", "prim", "onnx"})


@contextlib.contextmanager
def onnx_exporter_scope(logger: logging.Logger) -> Iterator[None]:
    """For one ``torch.onnx.export(..., dynamo=False)`` call: its log to ``logger.debug``, and
    no ``onnx`` import where nothing needs it (see the module docstring)."""
    import torch
    from torch.onnx._internal.torchscript_exporter import onnx_proto_utils

    original_log = torch._C._jit_onnx_log
    original_step = getattr(onnx_proto_utils, "_add_onnxscript_fn", None)

    def to_debug(*parts: object) -> None:
        logger.debug("torch.onnx: %s", " ".join(str(part) for part in parts))

    def add_functions(model_bytes: bytes, custom_opsets: Any) -> bytes:
        if "onnx" in sys.modules or _custom_functions_registered():
            return original_step(model_bytes, custom_opsets)
        return model_bytes  # what torch's step returns when it finds no function to insert

    torch._C._jit_onnx_log = to_debug
    if original_step is not None:
        onnx_proto_utils._add_onnxscript_fn = add_functions
    try:
        yield
    finally:
        torch._C._jit_onnx_log = original_log
        if original_step is not None:
            onnx_proto_utils._add_onnxscript_fn = original_step


def _custom_functions_registered() -> bool:
    """Whether the exporter's registry holds a function that its step could insert: one of a
    domain other than aten/prim/onnx that is an onnxscript function (``to_function_proto``).
    True also when the registry cannot be read (this torch keeps it otherwise)."""
    try:
        from torch.onnx._internal.torchscript_exporter import registration

        registry = registration.registry
        for name in registry.all_functions():
            if name.split("::", 1)[0] in _OFFICIAL_DOMAINS:
                continue
            functions = registry.get_function_group(name)._functions
            if any(hasattr(functions[version], "to_function_proto") for version in functions):
                return True
    except Exception:  # a torch whose registry looks otherwise: let torch's step decide
        return True
    return False
