"""ATen graphs: a node's recorded graph re-traced as ATen operations by ``make_fx``.

Functionalization (:mod:`leapp.graph.node_graph`) and the ONNX lowering
(:mod:`leapp.export.lowering`) both re-trace a recorded graph with ``make_fx`` on the traced
example inputs. :func:`aten_graph` runs that trace through an fx interpreter, so when ``make_fx``
fails (an operation whose kernel reads its input's values, such as ``one_hot`` without
``num_classes`` or ``repeat_interleave`` with tensor repeats) the failure names the recorded
operation, the user's source line and what to do, as an :class:`~leapp.errors.ExportError`.

    from leapp.graph.aten_graph import aten_graph

    lowered = aten_graph(module, examples, node="policy", purpose="lowering for ONNX",
                         decompositions={torch.ops.aten.sinh.default: my_sinh},
                         pre_dispatch=True)

Every recorded fx node can be described for error messages with :func:`describe_node`
(``"torch.sinh at policy.py:12"``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.fx as fx

from leapp.errors import ExportError

__all__ = ["aten_graph", "describe_node", "one_hot", "operation_name"]

logger = logging.getLogger(__name__)

# make_fx's message when a kernel asks for a Python number out of a traced tensor.
_READS_VALUES = ("_local_scalar_dense", "data-dependent", "data dependent")


def one_hot(tensor: torch.Tensor, num_classes: int = -1) -> torch.Tensor:
    """``torch.nn.functional.one_hot`` without reading values: a comparison with
    ``arange(num_classes)``. Equal to one_hot for every valid class index; an index outside
    ``[0, num_classes)`` gives a row of zeros where eager one_hot raises."""
    classes = torch.arange(num_classes, dtype=tensor.dtype, device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).to(torch.int64)


def _data_free_one_hot(args: tuple, kwargs: dict) -> bool:
    classes = kwargs.get("num_classes", args[1] if len(args) > 1 else -1)
    return isinstance(classes, int) and classes >= 0


# Recorded calls whose kernels read input values (one_hot checks the range of its indices with
# a max()), and data-free equivalents that make_fx can trace, when their arguments allow one.
_DATA_FREE: dict[Any, tuple[Callable[..., Any], Callable[[tuple, dict], bool]]] = {
    torch.nn.functional.one_hot: (one_hot, _data_free_one_hot),
    torch._C._nn.one_hot: (one_hot, _data_free_one_hot),
}


class _LocatingInterpreter(fx.Interpreter):
    """Runs the recorded graph node by node, calls the data-free equivalent of a data-reading
    kernel where one exists, and remembers the node that raised."""

    extra_traceback = False

    def __init__(self, module: fx.GraphModule):
        super().__init__(module, garbage_collect_values=True)
        self.failed: fx.Node | None = None

    def run_node(self, n: fx.Node) -> Any:
        try:
            return super().run_node(n)
        except Exception:
            if self.failed is None:
                self.failed = n
            raise

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
        replacement = _DATA_FREE.get(target) if _hashable(target) else None
        if replacement is not None and replacement[1](args, kwargs):
            return replacement[0](*args, **kwargs)
        return super().call_function(target, args, kwargs)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def aten_graph(
    module: fx.GraphModule,
    examples: Sequence[torch.Tensor],
    *,
    node: str,
    purpose: str,
    decompositions: Mapping[Any, Callable[..., Any]] | None = None,
    pre_dispatch: bool = False,
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
) -> fx.GraphModule:
    """``module`` re-traced by ``make_fx`` on ``examples`` as ATen operations.

    Args:
        module: the recorded graph (its fx nodes may carry ``leapp_location``).
        examples: one tensor per placeholder (they are not modified).
        node: the pipeline node's name, for error messages.
        purpose: what the trace is for, for error messages (``"functionalization"``).
        decompositions: ``make_fx``'s decomposition table.
        pre_dispatch: trace above autograd, keeping composite operations (``linear``,
            ``layer_norm``) whole unless ``decompositions`` lists them.
        wrap: applied to the function that runs the graph before tracing it
            (``torch.func.functionalize``).

    Raises:
        ExportError: ``make_fx`` failed; the message names the recorded operation, the user's
            source line and the next step.
    """
    from torch.fx.experimental.proxy_tensor import make_fx

    interpreter = _LocatingInterpreter(module)

    def run(*args: torch.Tensor) -> Any:
        return interpreter.run(*args)

    traced = run if wrap is None else wrap(run)
    try:
        with torch.no_grad():
            return make_fx(traced, dict(decompositions or {}), pre_dispatch=pre_dispatch)(
                *examples
            )
    except ExportError:
        raise
    except Exception as e:
        raise _trace_error(e, interpreter.failed, node, purpose) from e


def _trace_error(error: Exception, failed: fx.Node | None, node: str, purpose: str) -> ExportError:
    text = " ".join(str(error).split())
    where = describe_node(failed) if failed is not None else "an operation of the node"
    if any(marker in text for marker in _READS_VALUES):
        return ExportError(
            f"node {node!r}: {where} reads the values of its inputs while it runs (its kernel "
            f"turns a tensor into a Python number), which {purpose} cannot trace. Pass such "
            "arguments as Python numbers (one_hot's num_classes, repeat_interleave's repeats, "
            "an explicit output size), or move the operation out of the node"
        )
    summary = text[:300] + ("..." if len(text) > 300 else "")
    return ExportError(
        f"node {node!r}: {purpose} failed at {where}: {type(error).__name__}: {summary}. "
        "Rewrite that operation with other torch calls, or export the node with another backend"
    )


def operation_name(fx_node: fx.Node) -> str:
    """The recorded operation as users write it: ``torch.sinh``, ``Tensor.add_``, ``one_hot``."""
    target = fx_node.target
    if fx_node.op == "call_method":
        return f"Tensor.{target}"
    if fx_node.op == "call_module":
        return f"module {target}"
    if isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        return f"torch.ops.{target}"
    name = getattr(target, "__name__", None) or str(target)
    module = getattr(target, "__module__", "") or ""
    if module.startswith("torch._C") or not module:
        return name
    if module in ("torch", "torch.functional") or module.startswith("torch.nn.functional"):
        return f"{'torch' if module != 'torch.nn.functional' else 'F'}.{name}"
    return f"{module}.{name}"


def describe_node(fx_node: fx.Node) -> str:
    """``"<operation> at <file>:<line>"`` (or ``"<operation>"`` when the line is unknown)."""
    location = fx_node.meta.get("leapp_location")
    name = operation_name(fx_node)
    return f"{name} at {location}" if location else name
