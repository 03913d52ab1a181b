"""Port names of a function recorded as one node by ``annotate.method``.

- Inputs are the arguments a call actually passes, named after their parameters. Parameters
  left at their defaults are not inputs (an untraced default tensor is frozen as a constant, as
  any tensor that never passed through an input). Non-tensor arguments (ints, floats, modules,
  ``self``) stay plain Python values. A tensor inside ``*args`` or inside a list/tuple
  argument is the input ``<parameter>_<index>`` (``*obs`` called with ``(a, 2, b)`` gives
  ``obs_0`` and ``obs_2``), a tensor inside a dict argument ``<parameter>_<key>``; a tensor
  passed through ``**kwargs`` is named after its keyword.
- Outputs are named from the function's ``return`` statements: ``return a, b`` gives ``a`` and
  ``b``; a returned value that is not a plain name is ``output<position>`` (counting from 1);
  without readable source every output is ``output<position>``. Several ``return`` statements
  must return the same number of values; a position gets a name only where every statement
  agrees on it. A returned dict names its outputs by its keys.
"""

from __future__ import annotations

import ast
import inspect
import logging
import re
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from leapp.errors import TraceError

logger = logging.getLogger(__name__)

__all__ = ["FunctionPorts", "bind_inputs", "function_ports", "output_ports"]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


@dataclass(frozen=True)
class FunctionPorts:
    """What ``annotate.method`` needs to know about the decorated function, read once."""

    node: str
    signature: inspect.Signature | None
    output_names: tuple[str, ...] | None  # from the source; None: by position at run time


@dataclass(frozen=True)
class BoundCall:
    """One call's tensor arguments as ports, and how to call the function with traced ones."""

    inputs: dict[str, Any]
    rebuild: Callable[[tuple[Any, ...]], tuple[tuple, dict]]


def function_ports(function: Callable, node_name: str | None) -> FunctionPorts:
    """Read the node name, signature and return statements of ``function`` (raises TraceError
    when its return statements disagree on the number of values)."""
    target = inspect.unwrap(function)
    name = node_name or getattr(target, "__name__", None) or type(target).__name__
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        signature = None
    return FunctionPorts(node=name, signature=signature, output_names=_return_names(target, name))


def bind_inputs(ports: FunctionPorts, args: tuple, kwargs: dict) -> BoundCall | None:
    """The tensors this call passes, by port name; None when the arguments do not bind (the
    function itself then raises Python's TypeError)."""
    if ports.signature is None:
        named = {f"arg_{i}": a for i, a in enumerate(args)} | dict(kwargs)
        inputs, slots = _tensor_slots(named)

        def rebuild_plain(traced):
            values = _replace(named, slots, traced)
            return tuple(values[f"arg_{i}"] for i in range(len(args))), {
                k: values[k] for k in kwargs
            }

        return BoundCall(inputs, rebuild_plain)
    try:
        bound = ports.signature.bind(*args, **kwargs)
    except TypeError:
        return None
    kinds = {name: p.kind for name, p in ports.signature.parameters.items()}
    inputs, slots = _tensor_slots(bound.arguments, kinds)

    def rebuild(traced):
        bound.arguments.update(_replace(bound.arguments, slots, traced))
        return bound.args, bound.kwargs

    return BoundCall(inputs, rebuild)


def output_ports(ports: FunctionPorts, result: Any) -> dict[str, Any]:
    """``{port: value}`` for the tensors (or arrays) ``result`` holds."""
    if isinstance(result, Mapping):
        values = dict(result)
    else:
        items = list(result) if isinstance(result, (tuple, list)) else [result]
        names = ports.output_names
        if names is None or len(names) != len(items):
            if names is not None:
                logger.debug(
                    "node %s: returned %d values where its source names %s; naming by position",
                    ports.node,
                    len(items),
                    list(names),
                )
            names = tuple(f"output{i + 1}" for i in range(len(items)))
        values = dict(zip(names, items, strict=True))
    tensors = {k: v for k, v in values.items() if _is_tensor(v)}
    if not tensors:
        raise TraceError(
            f"node {ports.node!r}: the function decorated with annotate.method returned "
            f"{type(result).__name__}, which holds no torch.Tensor or np.ndarray; a node must "
            "return at least one tensor."
        )
    return tensors


# ---------------------------------------------------------------------------- inputs
def _is_tensor(value: Any) -> bool:
    return isinstance(value, (torch.Tensor, np.ndarray))


def _tensor_slots(arguments: Mapping[str, Any], kinds: Mapping[str, Any] | None = None):
    """``({port: tensor}, [(port, parameter, key)])``: key None for a plain argument, an index
    into a sequence, or a keyword of ``**kwargs``."""
    inputs: dict[str, Any] = {}
    slots: list[tuple[str, str, Any]] = []
    for parameter, value in arguments.items():
        kind = kinds.get(parameter) if kinds else None
        if kind is inspect.Parameter.VAR_KEYWORD:
            entries = [(key, key, item) for key, item in value.items()]
        elif isinstance(value, Mapping):
            entries = [(f"{parameter}_{key}", key, item) for key, item in value.items()]
        elif isinstance(value, (tuple, list)) and not _is_tensor(value):
            entries = [(f"{parameter}_{i}", i, item) for i, item in enumerate(value)]
        else:
            entries = [(parameter, None, value)]
        for port, key, item in entries:
            if _is_tensor(item):
                inputs[port] = item
                slots.append((port, parameter, key))
    return inputs, slots


def _replace(arguments: Mapping[str, Any], slots, traced: tuple) -> dict[str, Any]:
    """``arguments`` with the value in every slot replaced by its traced counterpart."""
    values = dict(arguments)
    for (_, parameter, key), new in zip(slots, traced, strict=True):
        if key is None:
            values[parameter] = new
        elif isinstance(values[parameter], Mapping):
            values[parameter] = {**values[parameter], key: new}
        else:
            container = list(values[parameter])
            container[key] = new
            was = arguments[parameter]
            if isinstance(was, list):
                values[parameter] = container
            elif hasattr(was, "_fields"):  # a NamedTuple
                values[parameter] = type(was)(*container)
            else:
                values[parameter] = type(was)(container)
    return values


# ---------------------------------------------------------------------------- outputs
def _return_names(target: Any, node: str) -> tuple[str, ...] | None:
    found = _function_tree(target)
    if found is None:
        return None
    tree, where, first_line = found
    returns = [r for r in _returns(tree) if r.value is not None]
    if not returns:
        return None
    shapes = [_names_of(r.value) for r in returns]
    known = [s for s in shapes if s is not None]
    if not known:
        return None
    counts = sorted({len(s) for s in known})
    if len(counts) > 1:
        lines = ", ".join(
            f"line {first_line + r.lineno - 1}: {len(s)}"
            for r, s in zip(returns, shapes, strict=True)
            if s is not None
        )
        raise TraceError(
            f"node {node!r}: the function decorated with annotate.method in {where} returns "
            f"different numbers of values ({lines}); an exported node has one fixed set of "
            "outputs. Return the same number of tensors from every return statement."
        )
    names = []
    for position, candidates in enumerate(zip(*known, strict=True)):
        agreed = candidates[0] if len(set(candidates)) == 1 else None
        names.append(agreed if agreed and _NAME.match(agreed) else f"output{position + 1}")
    if len(set(names)) != len(names):
        return tuple(f"output{i + 1}" for i in range(len(names)))
    return tuple(names)


def _function_tree(target: Any) -> tuple[ast.AST, str, int] | None:
    """The function's syntax tree, its file and first line; None without readable source."""
    owner = target
    if not (inspect.isfunction(owner) or inspect.ismethod(owner)):
        owner = getattr(target, "forward", None)  # an nn.Module instance
    try:
        lines, first_line = inspect.getsourcelines(owner)
        module = ast.parse(textwrap.dedent("".join(lines)))
        where = inspect.getsourcefile(owner) or "<unknown file>"
    except (OSError, TypeError, SyntaxError):
        return None
    for statement in module.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return statement, where, first_line
    return None


def _returns(tree: ast.AST) -> list[ast.Return]:
    """The return statements of ``tree``'s own body (not of functions defined inside it)."""
    found = []
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.Return):
            found.append(child)
        elif not isinstance(child, _SCOPES):
            found += _returns(child)
    return found


def _names_of(value: ast.expr) -> tuple[str | None, ...] | None:
    """One entry per returned value (its name, or None); None when the count is unknown."""
    items = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
    if any(isinstance(item, ast.Starred) for item in items):
        return None
    return tuple(item.id if isinstance(item, ast.Name) else None for item in items)
