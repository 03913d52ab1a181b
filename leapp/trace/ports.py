"""Port names: nested containers flattened into named ports, and ``annotate.method``'s ports.

- A container of tensors is one port per tensor, named by its path (NVIDIA LEAPP's rule,
  :func:`flatten`): a list/tuple item is ``<name>_<index>``, a dict item ``<name>_<key>``,
  recursively, so ``{"group": {"x": a, "y": b}}`` is ``group_x``, ``group_y`` and
  ``{"batch": [a, b]}`` is ``batch_0``, ``batch_1``. :func:`rebuild` puts traced values back
  into the same structure (a list stays a list, a tuple a tuple, a dict a dict).
- ``annotate.method`` inputs are the arguments a call actually passes, named after their
  parameters. Parameters left at their defaults are not inputs (an untraced default tensor is
  frozen as a constant, as any tensor that never passed through an input). Non-tensor
  arguments (ints, floats, modules, ``self``) stay plain Python values. Tensors inside a
  list/tuple/dict argument (or ``*args``) are flattened as above (``*obs`` called with
  ``(a, 2, b)`` gives ``obs_0`` and ``obs_2``); a tensor passed through ``**kwargs`` is named
  after its keyword.
- ``annotate.method`` outputs are named from the function's ``return`` statements: ``return
  a, b`` gives ``a`` and ``b``; a returned value that is not a plain name is
  ``output<position>`` (counting from 1); without readable source every output is
  ``output<position>``. Several ``return`` statements must return the same number of values;
  a position gets a name only where every statement agrees on it. A returned container is
  flattened under its name (``return parts`` with a list gives ``parts_0``, ``parts_1``; a
  returned dict literal gives ``output1_<key>``), as NVIDIA LEAPP names them.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import logging
import re
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from leapp.errors import PortNameError, TraceError

logger = logging.getLogger(__name__)

__all__ = [
    "FunctionPorts",
    "Leaf",
    "bind_inputs",
    "check_constants",
    "constant_names",
    "flatten",
    "function_ports",
    "is_container",
    "listed_names",
    "output_ports",
    "rebuild",
]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


@dataclass(frozen=True)
class Leaf:
    """One value inside a (possibly nested) container, and the port it becomes."""

    port: str  # "<name>_<key or index>_..."
    path: tuple[Any, ...]  # the keys and indices leading to it from the top-level value
    value: Any

    def where(self, name: str) -> str:
        """The path as Python would write it: ``group['x']``, ``batch[0]``."""
        return name + "".join(f"[{key!r}]" for key in self.path)


def is_container(value: Any) -> bool:
    """Whether ``value`` is flattened into several ports: a dict, list or tuple."""
    return isinstance(value, (Mapping, list, tuple))


def flatten(value: Any, name: str) -> list[Leaf]:
    """The leaves of ``value`` (anything but a dict, list or tuple), named by their paths.

    An empty container has no leaves.
    """
    leaves: list[Leaf] = []

    def visit(item: Any, port: str, path: tuple[Any, ...]) -> None:
        if isinstance(item, Mapping):
            for key, child in item.items():
                visit(child, f"{port}_{key}", (*path, key))
        elif isinstance(item, (list, tuple)):
            for index, child in enumerate(item):
                visit(child, f"{port}_{index}", (*path, index))
        else:
            leaves.append(Leaf(port, path, item))

    visit(value, name, ())
    return leaves


def rebuild(value: Any, replacements: Mapping[tuple[Any, ...], Any]) -> Any:
    """``value`` with the leaf at every path of ``replacements`` replaced; containers are
    rebuilt with their own type (a named tuple stays one)."""

    def visit(item: Any, path: tuple[Any, ...]) -> Any:
        if isinstance(item, Mapping):
            pairs = [(key, visit(child, (*path, key))) for key, child in item.items()]
            return _same_type(item, pairs, dict)
        if isinstance(item, (list, tuple)):
            children = [visit(child, (*path, i)) for i, child in enumerate(item)]
            if hasattr(item, "_fields"):  # a NamedTuple
                return type(item)(*children)
            return _same_type(item, children, list if isinstance(item, list) else tuple)
        return replacements.get(path, item)

    return visit(value, ())


def _same_type(original: Any, contents: list, fallback: type) -> Any:
    try:
        return type(original)(contents)
    except TypeError:  # a container type that cannot be built from its contents
        return fallback(contents)


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


def listed_names(names: Any) -> tuple[str, ...] | None:
    """A keyword that takes a name or a list of names, as a tuple (``()`` for None); None when
    it is neither."""
    if names is None:
        return ()
    listed = (names,) if isinstance(names, str) else names
    try:
        listed = tuple(listed)
    except TypeError:
        return None
    return listed if all(isinstance(n, str) for n in listed) else None


def constant_names(names: Any) -> tuple[str, ...]:
    """``annotate.method(environment_constants=...)`` checked: a name or a list of names."""
    listed = listed_names(names)
    if listed is None or not all(n.isidentifier() for n in listed):
        raise TraceError(
            f"annotate.method: environment_constants={names!r}; pass the names (strings) of "
            "the module-level objects the function uses, e.g. ['policy_model']."
        )
    return listed


def check_constants(function: Callable, names: tuple[str, ...]) -> None:
    """Each of ``names`` must be a name ``function`` can see: a global of its module, a
    variable it closes over, or a builtin (else a TraceError names the missing ones)."""
    target = inspect.unwrap(function)
    code = getattr(target, "__code__", None)
    scope = set(dir(builtins)) | set(getattr(target, "__globals__", {}))
    if code is not None:
        scope |= set(code.co_freevars)
    missing = [name for name in names if name not in scope]
    if missing:
        name = getattr(target, "__name__", repr(target))
        where = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
        raise TraceError(
            f"annotate.method(environment_constants={list(names)}): {missing} are not names "
            f"{name}{where} can see (a module-level object, a variable it closes over); define "
            "them before calling it, or drop them from environment_constants."
        )


def bind_inputs(ports: FunctionPorts, args: tuple, kwargs: dict) -> BoundCall | None:
    """The tensors this call passes, by port name; None when the arguments do not bind (the
    function itself then raises Python's TypeError)."""
    if ports.signature is None:
        named = {f"arg_{i}": a for i, a in enumerate(args)} | dict(kwargs)
        inputs, slots = _tensor_slots(ports.node, named)

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
    inputs, slots = _tensor_slots(ports.node, bound.arguments, kinds)

    def rebuild(traced):
        bound.arguments.update(_replace(bound.arguments, slots, traced))
        return bound.args, bound.kwargs

    return BoundCall(inputs, rebuild)


def output_ports(ports: FunctionPorts, result: Any) -> dict[str, Any]:
    """``{port: value}`` for the tensors (or arrays) ``result`` holds, containers flattened."""
    names = ports.output_names
    several = isinstance(result, tuple) or (
        isinstance(result, list) and (names is None or len(names) > 1)
    )
    if several and names is not None and len(names) == len(result):
        named = list(zip(names, result, strict=True))
    elif several and names is not None and len(names) == 1:
        named = [(names[0], result)]  # ``return pair``: one value that is a tuple
    elif several:
        if names is not None:
            logger.debug(
                "node %s: returned %d values where its source names %s; naming by position",
                ports.node,
                len(result),
                list(names),
            )
        named = [(f"output{i + 1}", item) for i, item in enumerate(result)]
    else:
        named = [(names[0] if names is not None and len(names) == 1 else "output1", result)]
    found = [(leaf.where(name), leaf, None) for name, v in named for leaf in flatten(v, name)]
    tensors = _unique_ports(ports.node, "returned value", found)
    if not tensors:
        raise TraceError(
            f"node {ports.node!r}: the function decorated with annotate.method returned "
            f"{type(result).__name__}, which holds no torch.Tensor or np.ndarray; a node must "
            "return at least one tensor."
        )
    return {port: leaf.value for port, (leaf, _) in tensors.items()}


# ---------------------------------------------------------------------------- inputs
def _is_tensor(value: Any) -> bool:
    return isinstance(value, (torch.Tensor, np.ndarray))


def _tensor_slots(node: str, arguments: Mapping[str, Any], kinds: Mapping[str, Any] | None = None):
    """``({port: tensor}, [(parameter, path)])``: where each tensor sits in the arguments."""
    found: list[tuple[str, Leaf, str]] = []
    for parameter, value in arguments.items():
        kind = kinds.get(parameter) if kinds else None
        if kind is inspect.Parameter.VAR_KEYWORD:  # named after the keyword, not "kwargs"
            leaves = [
                Leaf(leaf.port, (key, *leaf.path), leaf.value)
                for key, item in value.items()
                for leaf in flatten(item, key)
            ]
        else:
            leaves = flatten(value, parameter)
        found += [(leaf.where(parameter), leaf, parameter) for leaf in leaves]
    slots = _unique_ports(node, "argument", found)
    inputs = {port: leaf.value for port, (leaf, _) in slots.items()}
    return inputs, [(parameter, leaf.path) for leaf, parameter in slots.values()]


def _unique_ports(node: str, role: str, found: list[tuple[str, Leaf, Any]]) -> dict[str, Any]:
    """``{port: (leaf, tag)}`` for the tensors among ``found`` (``(where, leaf, tag)``
    entries); two tensors that would share a port name are refused."""
    ports: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for where, leaf, tag in found:
        if not _is_tensor(leaf.value):
            continue
        if leaf.port in ports:
            raise PortNameError(
                f"node {node!r}: the {role}s {seen[leaf.port]} and {where} of the function "
                f"decorated with annotate.method both become the port {leaf.port!r} "
                "(containers are flattened to <name>_<key or index>); rename one of them."
            )
        ports[leaf.port] = (leaf, tag)
        seen[leaf.port] = where
    return ports


def _replace(arguments: Mapping[str, Any], slots, traced: tuple) -> dict[str, Any]:
    """``arguments`` with the value in every slot replaced by its traced counterpart."""
    replacements: dict[str, dict[tuple[Any, ...], Any]] = {}
    for (parameter, path), new in zip(slots, traced, strict=True):
        replacements.setdefault(parameter, {})[path] = new
    values = dict(arguments)
    for parameter, paths in replacements.items():
        values[parameter] = rebuild(arguments[parameter], paths)
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
