"""Replaying a TorchScript call's ATen graph on traced values, with its writes made pure.

:func:`replay` walks the graph that :mod:`leapp.trace.scripts.script_calls` got from its dry run
and calls each operation on the traced values: the recorder records it and it runs eagerly. Writes
into a tensor the script did not receive as an argument (a module buffer, a local it filled) are
recorded as the pure computation of that tensor's next value, so the node's graph stays free of
in-place operations and every backend exports it whole (an ``aten.lstm`` stays one operation for
ONNX):

- ``root`` is the tensor written into; the written view is ``root`` seen through a chain of
  view operations (``self.hidden_state[:]`` is ``aten.slice`` of the buffer);
- the view's next value is the operation's out-of-place form (``copy_`` -> the source cast and
  broadcast to the view, ``add_`` -> ``aten.add``...);
- it goes back into ``root`` where the chain points: the chain applied to ``arange(numel)``
  (plain, eagerly) gives those positions, and ``root.reshape(-1).scatter(0, positions, new)``
  the next value of ``root``, or simply ``new`` when the view covers ``root`` in order;
- views of ``root`` taken before the write are taken again from its next value when used.

Writes into the script's own arguments are replayed as the in-place operations they are (the
caller's tensor changes; the node's export functionalizes them).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx

from leapp.errors import TraceError

if TYPE_CHECKING:
    from leapp.trace.tensors.node_trace import NodeTrace

__all__ = ["replay"]

aten = torch.ops.aten

# ATen operations that read a tensor's structure, not its values: run on plain tensors.
_METADATA = set(
    "size sym_size stride sym_stride dim numel sym_numel storage_offset sym_storage_offset "
    "is_contiguous is_floating_point is_complex is_same_size".split()
)


@dataclass(frozen=True)
class _View:
    """A value that is ``root`` seen through ``chain``, as of ``root``'s ``generation``."""

    root: fx.Node
    chain: tuple[tuple[Any, tuple, dict], ...]  # (view operation or getitem, args, kwargs)
    generation: int


def replay(trace: NodeTrace, graph: fx.GraphModule, inputs: list, known: dict[int, Any]) -> Any:
    """Call every operation of ``graph`` on ``inputs`` (one per placeholder) and return what
    its output holds. ``known`` maps ``id`` of a module tensor to the traced value standing for
    it (a state of the node); other module tensors are read as constants."""
    return _Replay(trace, graph, known).run(inputs)


class _Replay:
    def __init__(self, trace: NodeTrace, graph: fx.GraphModule, known: dict[int, Any]):
        self.trace = trace
        self.module = graph
        self.known = known
        self.env: dict[fx.Node, Any] = {}
        self.views: dict[fx.Node, _View] = {}
        self.generation: dict[fx.Node, int] = {}  # writes into each root so far
        self.attributes: dict[int, fx.Node] = {}  # id(module tensor) -> its first get_attr

    def run(self, inputs: list) -> Any:
        arguments = iter(inputs)
        for node in self.module.graph.nodes:
            if node.op == "placeholder":
                self.env[node] = next(arguments)
                self.generation[node] = 0
            elif node.op == "get_attr":
                self._read_attribute(node)
            elif node.op == "call_function":
                self._call(node)
            elif node.op == "output":
                return fx.node.map_arg(node.args[0], self._value)
            else:  # make_fx graphs hold only the opcodes above
                raise TraceError(f"unexpected {node.op} {node.target} in the script's graph.")
        raise TraceError("the script's graph has no output.")

    def _read_attribute(self, node: fx.Node) -> None:
        """A module tensor: one root per tensor, however many times the graph reads it."""
        value = _attribute(self.module, node)
        first = self.attributes.setdefault(id(value), node)
        if first is node:
            self.env[node] = self.known.get(id(value), value)
            self.generation[node] = 0
        else:  # read again: the same root, as written so far
            self.views[node] = _View(first, (), -1)
            self._value(node)

    # ------------------------------------------------------------------------ one operation
    def _call(self, node: fx.Node) -> None:
        target = node.target
        args, kwargs = fx.node.map_arg((node.args, node.kwargs), self._value)
        written = _written_argument(target)
        if written is not None and isinstance(_at(node.args, written), fx.Node):
            view = self._view_of(node.args[written])
            if view.root.op != "placeholder":
                self._write(node, view, args, kwargs)
                return
        self.env[node] = _run(target, args, kwargs)
        self._track_view(node, target, args, kwargs)

    def _track_view(self, node: fx.Node, target: Any, args: tuple, kwargs: dict) -> None:
        """Note ``node`` as a view of its argument's root when ``target`` returns a view."""
        source = node.args[0] if node.args else None
        if not isinstance(source, fx.Node):
            return
        if target is operator.getitem and source in self.views:
            step = (operator.getitem, args[1:], {})
        elif _returns_view(target):
            step = (target, args[1:], kwargs)
        else:
            return
        base = self._view_of(source)
        self.views[node] = _View(base.root, (*base.chain, step), base.generation)

    def _view_of(self, node: fx.Node) -> _View:
        view = self.views.get(node)
        if view is not None:
            return view
        return _View(node, (), self.generation.setdefault(node, 0))

    def _value(self, node: fx.Node) -> Any:
        """The value of ``node``; a view of a root written since it was taken is taken again."""
        view = self.views.get(node)
        if view is not None and view.generation != self.generation[view.root]:
            value = self.env[view.root]
            for step, args, kwargs in view.chain:
                value = _run(step, (value, *args), kwargs)
            self.env[node] = value
            self.views[node] = _View(view.root, view.chain, self.generation[view.root])
        return self.env[node]

    # ------------------------------------------------------------------------- a write
    def _write(self, node: fx.Node, view: _View, args: tuple, kwargs: dict) -> None:
        """Record in-place ``node`` on ``view`` as the pure next value of its root."""
        if view.root.op == "get_attr" and id(_attribute(self.module, view.root)) not in self.known:
            raise TraceError(
                f"the script writes with torch.ops.{node.target} into a tensor it holds outside "
                "its buffers and tensor attributes (in a list or dict attribute?), which leapp "
                "cannot carry from one tick to the next. Keep it in a registered buffer."
            )
        root = self._value(view.root)
        current = args[_written_argument(node.target)]
        new = _out_of_place(node, current, args, kwargs)
        positions = torch.arange(root.numel()).reshape(root.shape)
        for step, step_args, step_kwargs in view.chain:
            positions = _plain_call(step, (positions, *step_args), step_kwargs)
        if not isinstance(new, torch.Tensor) or tuple(new.shape) != tuple(current.shape):
            new = torch.as_tensor(new, dtype=current.dtype).expand(current.shape)
        if positions.numel() == root.numel() and torch.equal(
            positions.reshape(-1), torch.arange(root.numel())
        ):
            updated = new.reshape(root.shape)
        else:
            flat = new.reshape(-1).to(root.dtype)
            updated = root.reshape(-1).scatter(0, positions.reshape(-1), flat).reshape(root.shape)
        self.env[view.root] = updated
        self.generation[view.root] += 1
        # The in-place operation returns the view it wrote: the same view of the new root.
        self.views[node] = _View(view.root, view.chain, -1)
        self.env[node] = None
        self._value(node)


def _at(args: tuple, index: int) -> Any:
    return args[index] if index < len(args) else None


def _attribute(module: fx.GraphModule, node: fx.Node) -> Any:
    return getattr(module, node.target)


def _out_of_place(node: fx.Node, current: Any, args: tuple, kwargs: dict) -> Any:
    """The value the written view holds after in-place ``node`` (recorded, not in place)."""
    target = node.target
    name = target._schema.name.split("::")[-1]
    if name == "copy_":
        source = args[1]
        if isinstance(source, torch.Tensor):
            return source.to(current.dtype).expand(current.shape)
        return source
    if name == "zero_":
        return torch.zeros_like(current)
    if name == "fill_":
        value = args[1]
        if isinstance(value, torch.Tensor):
            return value.to(current.dtype).expand(current.shape)
        return torch.full_like(current, value)
    packet = getattr(aten, name.rstrip("_"), None)
    pure = getattr(packet, target._overloadname, None) if packet is not None else None
    if pure is None:
        raise TraceError(
            f"the script writes into a tensor with torch.ops.{target}, which has no "
            "out-of-place form to record."
        )
    return _run(pure, args, kwargs)


def _written_argument(target: Any) -> int | None:
    """The position of the argument ATen operation ``target`` writes into, if any."""
    if not isinstance(target, torch._ops.OpOverload):
        return None
    for index, argument in enumerate(target._schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            return index if not argument.kwarg_only else None
    return None


def _returns_view(target: Any) -> bool:
    if not isinstance(target, torch._ops.OpOverload):
        return False
    returns = target._schema.returns
    return bool(returns) and all(
        r.alias_info is not None and not r.alias_info.is_write for r in returns
    )


def _run(target: Any, args: tuple, kwargs: dict) -> Any:
    """Call one operation; shape queries run on plain tensors (they are not recorded)."""
    if isinstance(target, torch._ops.OpOverload) and target._schema.name.split("::")[-1] in (
        _METADATA
    ):
        return _plain_call(target, args, kwargs)
    return target(*args, **kwargs)


def _plain_call(target: Any, args: tuple, kwargs: dict) -> Any:
    with torch._C.DisableTorchFunctionSubclass():
        return target(*args, **kwargs)
