"""A function decorated with ``annotate.method``: every call inside a session is one run of
one pipeline node (NVIDIA LEAPP's decorator).

The call's arguments are bound to the function's parameters and declared as the node's inputs,
the function runs on the traced values, and its result is declared as the node's outputs
(:mod:`leapp.trace.ports` names both). A call inside another decorated call is refused:
decorated nodes do not nest. Outside a session the function is simply called.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from leapp.errors import TraceError
from leapp.session import active_session
from leapp.trace import ports as port_names
from leapp.trace.location import user_location

__all__ = ["method"]

F = TypeVar("F", bound=Callable[..., Any])


def method(
    export_with: Any = "jit",
    node_name: str | None = None,
    backend_params: Mapping[str, Any] | None = None,
    environment_constants: Any = None,
) -> Callable[[F], F]:
    """Decorator: every call of the function inside a session is one run of one node.

    ::

        @annotate.method(export_with="onnx")
        def policy_step(obs, hidden):
            hidden = gru(obs, hidden)
            action = head(hidden)
            return action, hidden  # output ports "action" and "hidden"

        model.forward = annotate.method(node_name="model_forward")(model.forward)

    The node is named ``node_name``, else after the function (``functools.wraps`` wrappers such
    as ``@torch.no_grad()`` are looked through). Its inputs are the tensors (or NumPy arrays) the
    call passes, named after their parameters; parameters left at their defaults are frozen as
    constants, other arguments stay Python values, ``self`` is never an input. Its outputs are
    named from the function's ``return`` statements (``output1``, ``output2``, ... for values
    that are not plain names); see :mod:`leapp.trace.ports` for every naming rule. The function
    runs on the traced values and its result is returned as it is, so passing it to another
    decorated function records a ``data_flow`` edge, and feeding it back on the next call a
    ``feedback_flow`` edge. A returned tensor that does not depend on the inputs is a constant
    output. ``export_with`` is as for :func:`output_tensors`. ``backend_params`` is kept on the
    node's recording and not used by any exporter yet.

    ``environment_constants`` (LEAPP's keyword) names module-level objects the function uses
    without taking them as arguments: a ``torch.jit.trace``-d model, a gain tensor::

        @annotate.method(export_with="onnx", environment_constants=["encoder"])
        def encode(obs):
            return encoder(obs)  # encoder = torch.jit.trace(...) at module level

    They are frozen into the node as constants, as every tensor the function reads that is not
    one of its inputs is (a TorchScript model is recorded as the operations it runs); each name
    must be one the function can see (a global, a closed-over variable or a builtin), checked
    on its first call in a session.
    """
    if backend_params is not None and not isinstance(backend_params, Mapping):
        raise TraceError(
            f"annotate.method: backend_params must be a dict or None, got "
            f"{type(backend_params).__name__}."
        )
    if node_name is not None and not isinstance(node_name, str):
        raise TraceError(f"annotate.method: node_name must be a str or None, got {node_name!r}.")
    constants = port_names.constant_names(environment_constants)

    def decorate(function: F) -> F:
        read: list[port_names.FunctionPorts] = []  # the source is read on the first traced call

        @functools.wraps(function)
        def run_as_node(*args: Any, **kwargs: Any) -> Any:
            session = active_session()
            if session is None:
                return function(*args, **kwargs)
            if not read:
                port_names.check_constants(function, constants)
                read.append(port_names.function_ports(function, node_name))
            ports = read[0]
            call = port_names.bind_inputs(ports, args, kwargs)
            if call is None:  # the arguments do not fit: let Python say why
                return function(*args, **kwargs)
            if session.running_method is not None:
                raise TraceError(
                    f"annotate.method: node {ports.node!r} is called at {user_location()} "
                    f"inside the decorated call of node {session.running_method!r}, which is "
                    'still running: decorated nodes do not nest (NVIDIA LEAPP: "Tracing lock '
                    f'is already acquired"). Call {ports.node!r} outside it, or drop its '
                    f"decorator so that its operations belong to {session.running_method!r}."
                )
            session.open_node(ports.node)
            session.running_method = ports.node
            try:
                traced = session.input_tensors(ports.node, call.inputs)
                call_args, call_kwargs = call.rebuild(traced)
                result = function(*call_args, **call_kwargs)
                outputs = port_names.output_ports(ports, result)
            except BaseException:
                session.abandon(ports.node)
                raise
            finally:
                session.running_method = None
            # Every output may be a constant: a plain tensor the function returned unchanged.
            # Values of other nodes are still refused by the recording.
            session.output_tensors(ports.node, outputs, export_with, list(outputs), backend_params)
            return result

        return run_as_node  # type: ignore[return-value]

    return decorate
