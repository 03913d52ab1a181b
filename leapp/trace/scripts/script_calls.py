"""TorchScript calls on traced values, recorded as the ATen operations they run.

A ``torch.jit.ScriptModule`` (made with ``torch.jit.script`` or ``torch.jit.trace``, or loaded
with ``torch.jit.load``: the ``policy.pt`` rsl_rl and Isaac Lab write) runs in TorchScript's
interpreter, which never hands its operations to ``TracedTensor.__torch_function__``: a
``ScriptMethod`` call reaches it once, as one opaque callable, and a ``ScriptFunction`` call not
at all (:func:`activate` wraps ``ScriptFunction.__call__`` while a session records, and
:func:`deactivate` puts it back). :func:`call` records such a call inline, in three steps:

1. a dry run: ``make_fx(pre_dispatch=True)`` runs the call on plain copies of its tensor
   arguments and returns an fx graph of the ATen operations it ran (``aten.linear``,
   ``aten.lstm``... before decomposition), the module's tensors as ``get_attr`` constants.
   Whatever the dry run wrote into the module (buffers written in place or reassigned) is put
   back afterwards;
2. module tensors the call writes (an LSTM actor's ``hidden_state`` updated with
   ``self.hidden_state[:] = h``) become states of the node, named after the attribute: an input
   holding the value before the call, fed back as the node's own output on the next tick, as
   ``annotate.state_tensors`` declares them; :func:`next_states` gives their next values when
   the node closes;
3. the replay (:mod:`leapp.trace.scripts.script_replay`): each operation of the dry-run graph
   is called on the traced values, so it runs eagerly and is recorded like any torch call; a
   write into a module tensor is recorded as the pure computation of its next value, and the
   module gets that value (in the same memory, or as a new tensor where the script reassigned
   it), as eager PyTorch leaves it. Other module tensors are frozen as constants.

What cannot be recorded is a :class:`~leapp.errors.TraceError` naming the node, the script and
the user's line: control flow on tensor values inside the script, a changed non-tensor
attribute (a call counter), a parameter written in place.

A ``torch.export`` program's ``.module()`` needs none of this: its ATen operations reach
``__torch_function__`` one by one.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from leapp.errors import LeappError, TraceError
from leapp.trace.location import user_location
from leapp.trace.scripts.script_replay import replay
from leapp.trace.scripts.size_reads import constant_sizes
from leapp.trace.tensors.extensions import EXTENSIONS
from leapp.trace.tensors.handover import outside_nodes
from leapp.trace.tensors.node_trace import trace_of
from leapp.trace.tensors.operation import Operation, script_name
from leapp.trace.tensors.recorder import owning_trace
from leapp.trace.tensors.tensor import TracedTensor, wrap

if TYPE_CHECKING:
    from leapp.trace.tensors.node_trace import NodeTrace

__all__ = ["ScriptState", "activate", "call", "deactivate", "next_states"]

logger = logging.getLogger(__name__)

_originals: dict[str, Any] = {}


@dataclass
class ScriptState:
    """A module tensor written by TorchScript code during a node run: a state of the node."""

    port: str
    held: torch.Tensor  # the plain tensor the module holds for it now
    current: TracedTensor  # its traced value now (the state's input until the call writes it)


# ------------------------------------------------------------------------------ entry points
def activate() -> None:
    """Wrap ``ScriptFunction.__call__`` so calls on traced values are recorded (idempotent)."""
    if _originals:
        return
    original = torch._C.ScriptFunction.__call__
    _originals["__call__"] = original

    @functools.wraps(original)
    def recorded_call(self, *args, **kwargs):
        traces = {id(t): t for t in map(trace_of, pytree.tree_leaves((args, kwargs))) if t}
        trace = owning_trace(script_name(self), list(traces.values())) if traces else None
        if trace is not None:
            return call(trace, self, args, kwargs)
        closed = [t for t in traces.values() if t.recording.active]
        if closed:  # on published outputs between nodes: marked as computed outside nodes
            op = Operation("call_function", self, f"TorchScript {script_name(self)}")
            run = functools.partial(original, self)
            return outside_nodes(run, op, args, kwargs, closed[0])
        return original(self, *args, **kwargs)

    torch._C.ScriptFunction.__call__ = recorded_call


def deactivate() -> None:
    """Restore ``ScriptFunction.__call__`` (idempotent)."""
    if _originals:
        torch._C.ScriptFunction.__call__ = _originals.pop("__call__")


def call(trace: NodeTrace, func: Any, args: tuple, kwargs: dict) -> Any:
    """Run TorchScript ``func`` on ``args`` eagerly and record it into ``trace``, inlined."""
    where = user_location()
    what = f"node {trace.node!r}: TorchScript {script_name(func)} called at {where}"
    owner = getattr(func, "owner", None)  # a ScriptMethod's module; None for a ScriptFunction
    attributes = _tensor_attributes(owner)
    scalars = _scalar_attributes(owner)
    flat, spec = pytree.tree_flatten((args, kwargs))
    positions = [i for i, leaf in enumerate(flat) if isinstance(leaf, torch.Tensor)]
    paths = [p for p, held in attributes.items() if not (held.is_parameter or held.in_container)]
    try:
        held = [held.tensor for held in attributes.values()]
        graph = _dry_run(what, _plain_callable(func), flat, spec, positions, owner, paths, held)
    finally:
        written, refused = _restore(owner, attributes, scalars)
    if refused:
        raise TraceError(
            f"{what} changes its {', '.join(refused)} on every call; leapp carries only the "
            "tensors a script writes (buffers) from one tick to the next. Keep such state in "
            "a buffer (register_buffer in the module before scripting it), or declare it "
            "yourself with annotate.state_tensors and pass it to the script as an argument."
        )
    states = {path: _state(trace, owner, path, attributes[path].tensor) for path in written}
    known = {id(state.held): state.current for state in trace.script_states.values()}
    try:
        outputs, after = replay(trace, graph, [flat[i] for i in positions], known)
    except LeappError as e:
        raise TraceError(f"{what} cannot be recorded: {e}") from e
    for path, value in zip(paths, after, strict=True):
        if path in states:
            _advance(trace, states[path], owner, path, value, reassigned=written[path])
    return outputs


def next_states(trace: NodeTrace) -> dict[str, TracedTensor]:
    """``{state port: next value}`` of the module tensors TorchScript calls wrote in this run."""
    states = {s.port: s.current for s in trace.script_states.values()}
    trace.script_states.clear()
    return states


# ----------------------------------------------------------------------------- dry run
def _dry_run(what, func, flat, spec, positions, owner, paths, held) -> fx.GraphModule:
    """The ATen graph of one call on plain copies; it returns ``(outputs, attributes after)``.
    Sizes the script reads through tensors are constants (:mod:`.size_reads`); ``held`` are
    the module's tensors, which never are."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def run(*tensors):
        leaves = list(flat)
        for index, tensor in zip(positions, tensors, strict=True):
            leaves[index] = tensor
        args, kwargs = pytree.tree_unflatten(leaves, spec)
        return func(*args, **kwargs), [_get(owner, path) for path in paths]

    try:
        # TorchScript's optimizing executor rewrites a script after its first calls (slices
        # folded, detach inserted): unoptimized, every tick records the same operations.
        with constant_sizes(held), torch.jit.optimized_execution(False):
            graph = make_fx(run, pre_dispatch=True)(*[_plain_copy(flat[i]) for i in positions])
    except Exception as e:
        raise _dry_run_error(what, run, [_plain_copy(flat[i]) for i in positions], e) from e
    logger.debug("%s: %d operations", what, len(graph.graph.nodes))
    return graph


def _dry_run_error(what: str, run: Any, examples: list, error: Exception) -> TraceError:
    """Why the dry run failed: the script fails on these inputs in eager PyTorch too, or it
    reads tensor values as Python values (which ``make_fx`` cannot follow)."""
    try:
        run(*examples)
    except Exception as eager:
        return TraceError(
            f"{what} fails on these inputs ({type(eager).__name__}: {_script_error(eager)}). "
            "Check the inputs' shapes and dtypes against what the script expects."
        )
    return TraceError(
        f"{what} cannot be recorded: it turns a tensor into a Python value "
        f"({_script_error(error)}), so the branch or number taken now would be baked into "
        "the export. Express the choice with tensor operations in the script "
        "(torch.where(cond, a, b), masks), or call the script outside the node and pass "
        "its result in with annotate.input_tensors."
    )


def _script_error(error: BaseException) -> str:
    """The first line of ``error``, and where in the script it happened (TorchScript's own
    traceback names the script's file and line)."""
    text = str(error).strip()
    first = (text.splitlines() or [""])[0][:200]
    frames = re.findall(r'File "([^"]+)", line (\d+)', text)
    return f"{first} at {frames[-1][0]}:{frames[-1][1]} in the script" if frames else first


def _restore(
    owner: Any, attributes: dict[str, _Held], scalars: dict[str, Any]
) -> tuple[dict[str, bool], list[str]]:
    """Put back what the dry run changed in ``owner``. Returns ``{path: reassigned}`` for the
    tensor attributes it wrote (in place, or reassigned: ``self.h = h_new``), and what it
    changed that cannot be a state (parameters, non-tensor attributes)."""
    written: dict[str, bool] = {}
    refused = []
    for path, held in attributes.items():
        now = held.tensor if held.in_container else _get(owner, path)
        if now is held.tensor and held.tensor._version == held.version:
            continue
        if held.in_container:
            with torch.no_grad(), torch._C.DisableTorchFunctionSubclass():
                held.tensor.copy_(held.snapshot)
            continue  # the replay refuses the write
        if held.is_parameter:
            refused.append(f"parameter {path!r}")
        written[path] = now is not held.tensor
        if now is not held.tensor:
            _set(owner, path, held.tensor)
        with torch.no_grad(), torch._C.DisableTorchFunctionSubclass():
            held.tensor.copy_(held.snapshot)
    for path, value in scalars.items():
        if _get(owner, path) != value:
            _set(owner, path, value)
            refused.append(f"attribute {path!r} ({type(value).__name__})")
    return written, refused


@dataclass(frozen=True)
class _Held:
    """A tensor a script module holds, as it was before the dry run."""

    tensor: torch.Tensor
    is_parameter: bool
    version: int
    snapshot: torch.Tensor
    in_container: bool = False  # a tensor in a list/dict attribute: restored, never a state


def _tensor_attributes(owner: Any) -> dict[str, _Held]:
    """``{dotted path: held tensor}`` for every tensor ``owner`` (and its submodules) holds."""
    if owner is None:
        return {}
    iterators = torch._C._jit_debug_module_iterators(owner)
    parameters = {id(p) for _, p in iterators["named_parameters_r"]}
    held = {}
    for path, value in iterators["named_attributes_r"]:
        if isinstance(value, torch.Tensor):
            held[path] = _hold(value, id(value) in parameters)
        elif isinstance(value, (list, tuple, dict)):  # restored, never states (refused)
            for index, leaf in enumerate(pytree.tree_leaves(value)):
                if isinstance(leaf, torch.Tensor):
                    held[f"{path}[{index}]"] = _hold(leaf, False, in_container=True)
    return held


def _hold(tensor: torch.Tensor, is_parameter: bool, in_container: bool = False) -> _Held:
    with torch._C.DisableTorchFunctionSubclass():
        snapshot = tensor.detach().clone()
    return _Held(tensor, is_parameter, tensor._version, snapshot, in_container)


def _scalar_attributes(owner: Any) -> dict[str, Any]:
    """``{dotted path: value}`` of the module's int/float/bool/str attributes."""
    if owner is None:
        return {}
    found = torch._C._jit_debug_module_iterators(owner)["named_attributes_r"]
    return {
        path: value
        for path, value in found
        if isinstance(value, (int, float, bool, str))
        and not path.rpartition(".")[2].startswith("_")
    }


# ------------------------------------------------------------------------------- states
def _state(trace: NodeTrace, owner: Any, path: str, tensor: torch.Tensor) -> ScriptState:
    """The state of the node that module tensor ``path`` is; declared on its first write."""
    for state in trace.script_states.values():
        if state.held is tensor:
            return state  # written by an earlier call in this run
    port = _port_name(path)
    if port in trace.inputs or port in trace.outputs:
        port = f"{_port_name(_type_name(owner)).lower()}_{port}"
    (traced,) = trace.recording.input_tensors(trace.node, {port: tensor}, state=True)
    state = trace.script_states[port] = ScriptState(port, tensor, traced)
    logger.info(
        "node %r: TorchScript module %s writes its tensor %r, which becomes state %r of the node",
        trace.node,
        _type_name(owner),
        path,
        port,
    )
    return state


def _advance(
    trace: NodeTrace, state: ScriptState, owner: Any, path: str, value: Any, reassigned: bool
) -> None:
    """After the replay: the state's next value, and the module holding it as eager PyTorch
    leaves it (written into the same memory, or a new tensor for ``self.h = h_new``)."""
    if value is state.current:
        return
    if not isinstance(value, TracedTensor):
        value = _traced_copy(trace, value)  # a constant written into it
    state.current = value
    with torch._C.DisableTorchFunctionSubclass():
        plain = value.detach().as_subclass(torch.Tensor)
        if reassigned:
            state.held = plain
            _set(owner, path, plain)
        else:
            with torch.no_grad():
                state.held.copy_(plain)


def _traced_copy(trace: NodeTrace, value: torch.Tensor) -> TracedTensor:
    node = trace.graph.call_function(torch.clone, (trace.constant(value),))
    node.meta["example_value"] = (tuple(value.shape), value.dtype)
    return wrap(value, trace, node)


# ---------------------------------------------------------------------------- small helpers
def _plain_callable(func: Any) -> Any:
    if isinstance(func, torch._C.ScriptFunction) and _originals:
        return functools.partial(_originals["__call__"], func)
    return func


def _plain_copy(value: torch.Tensor) -> torch.Tensor:
    with torch._C.DisableTorchFunctionSubclass():
        return value.detach().as_subclass(torch.Tensor).clone()


def _get(owner: Any, path: str) -> Any:
    for name in path.split("."):
        owner = owner.getattr(name)
    return owner


def _set(owner: Any, path: str, value: Any) -> None:
    parent, _, name = path.rpartition(".")
    (_get(owner, parent) if parent else owner).setattr(name, value)


def _type_name(owner: Any) -> str:
    return owner._type().name()


def _port_name(path: str) -> str:
    """``encoder.hidden_state`` -> ``encoder_hidden_state``."""
    port = re.sub(r"[^A-Za-z0-9_]", "_", path.replace(".", "_")).lstrip("_")
    return port if port[:1].isalpha() else f"buffer_{port}"


# The torch recorder hands this module the TorchScript methods called on a node's values.
EXTENSIONS.script_call = call
