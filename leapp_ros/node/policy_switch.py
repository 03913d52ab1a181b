"""Switching policies on a running node: :class:`PolicySwitch`.

A request is the node's runtime-settable ROS parameter ``load`` (string: an export folder or
its YAML spec)::

    ros2 param set /arm_policy/policy load /robot/exports/arm_policy_v2
    ros2 param set /arm_policy/policy carry_state "[h]"     # optional, before the load

Why a parameter and not a service: no service type carrying a string ships in the ROS 2
wheels of both distributions we run on (``std_srvs`` has none, ``composition_interfaces`` is
in Kilted's only), and a message package of our own needs rosidl generation, which wheels
cannot do. ``SetParameters`` exists everywhere, ``ros2 param set`` and rclpy call it, and its
answer carries a reason: a refused switch prints the differences there.

What happens:

1. **Checks, at once** (in the set-parameters callback, on the executor thread): the spec is
   read and every artifact's checksum verified (:func:`leapp_ros.plan.settings.load_spec`: it
   reads the artifacts once), and the export must have the same ports and wiring for every
   pipeline node this ROS node runs (:func:`leapp_ros.plan.switch_check.switch_differences`);
   the names in ``carry_state`` must be state inputs of it. Otherwise the request is refused
   with the reason (the parameter keeps its value); also while the node is unconfigured, or a
   switch is still loading or on probation.
2. **Loading, beside the running policy**: a worker thread loads and warms up the new models
   (one per pipeline node) and reads the new initial values; the running policy keeps
   answering every set meanwhile.
3. **Take-over at a tick boundary**: the executor thread swaps the models in just before the
   next run it admits (all pipeline nodes of a fused node at once), so the set of that run is
   the first the new policy answers (status: ``first_run``, and the set's ``tick`` when its
   messages carry one). The node's own state inputs start from the new export's initial
   values, or keep their current value where ``carry_state`` names them (``<port>`` or
   ``<node>/<port>``); feedback inputs from other nodes keep their newest value. Every output
   with ``ports.<port>.blend_s`` ramps in from the last command it published
   (:mod:`leapp_ros.node.ramp`; not from ``blend_from``: the command goes on from where it
   was; at the first run after an activation, from where the activation's blend starts),
   limits on top.
4. **Probation**: for ``switch_probation_ticks`` runs (default 10, each pipeline node) a
   result of the new policy that raises, holds NaN/inf in a float output (whatever
   ``on_nonfinite`` says) or lies outside an output's guarded ``min`` / ``max``
   (``on_out_of_domain`` ``drop`` or ``safe``) rolls the node back: the old models and the
   state values they had at the take-over return, that same set is answered by the old
   policy (no tick goes unanswered; in a fused node the stages before the failing one have
   already run the new policy in that tick), the outputs ramp in again from the last command,
   and the status says ``rolled_back`` (``/diagnostics``: ERROR, until the next request).
   After probation the status says ``switched``, and a later configure (after a cleanup)
   loads the new export.

A graph of several nodes switches node by node: ``leapp-ros switch`` asks each
(:mod:`leapp_ros.tools.switch_command`); each takes over at its own next run once its models
are warm, so for a few sets around the switch one node may run the new policy while the
node after it still runs the old one. The fused deployment switches the whole pipeline at
one tick. Lifecycle transitions go on as usual meanwhile: an inactive node takes over at its
first run after activation; a cleanup drops a switch in progress.

Status (``switch`` in every status record, None before the first request): ``state``
(``loading``, ``ready``: warm, takes over at the next run, ``probation``, ``switched``,
``refused``, ``failed``: could not load, ``rolled_back``, ``abandoned``: the node was cleaned
up), ``request`` (requests so far),
``export``, ``previous``, ``reason``, ``first_run`` / ``tick`` of the take-over, ``probation``
(runs done, of how many).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from leapp_ros.messages.topic_io import float_ports, nonfinite
from leapp_ros.node.rate_limited_log import one_line
from leapp_ros.plan.switch_check import carried_states, switch_differences

__all__ = ["DEFAULT_PROBATION_TICKS", "PolicySwitch"]

DEFAULT_PROBATION_TICKS = 10
_BUSY = ("loading", "ready", "probation")


@dataclass(frozen=True)
class _Loaded:
    """One pipeline node's new model, warm, and its state inputs' first values (by index)."""

    data: Any
    call: Callable[[Sequence[Any]], list[Any]]
    states: dict[int, Any]


class PolicySwitch:
    """The ``load`` request of a pipeline node and what follows it (see the module
    documentation). ``node`` is a :class:`~leapp_ros.node.managed_node.ManagedNode`."""

    def __init__(self, node: Any):
        from rcl_interfaces.msg import ParameterDescriptor, ParameterType

        self._node = node
        self.pending: list[_Loaded] | None = None  # warm models, taken over at the next run
        self._record: dict[str, Any] | None = None
        self._requests = 0
        self._trial: dict[str, Any] | None = None  # the switch on probation
        text = ParameterDescriptor(
            description="an export folder or spec: switch to its policy (checked, then warm)",
            type=ParameterType.PARAMETER_STRING,
        )
        node.declare_parameter("load", "", text)
        names = ParameterDescriptor(
            description="state inputs a switch carries over ([<port> | <node>/<port>, ...])",
            dynamic_typing=True,
        )
        node.declare_parameter("carry_state", None, names)
        ticks = ParameterDescriptor(
            description="runs of a new policy that roll it back on an error, NaN or guard",
            read_only=True,
            type=ParameterType.PARAMETER_INTEGER,
        )
        self.probation = node.declare_parameter(
            "switch_probation_ticks", DEFAULT_PROBATION_TICKS, ticks
        ).value
        if self.probation < 1:
            from leapp_ros.plan.settings import StartupError

            got = self.probation
            raise StartupError(f"parameter switch_probation_ticks must be >= 1, got {got}")
        node.add_on_set_parameters_callback(self._on_set)

    # --- the request (executor thread) ------------------------------------------------------

    def _on_set(self, parameters: Sequence[Any]) -> Any:
        from rcl_interfaces.msg import SetParametersResult

        given = {p.name: p.value for p in parameters}
        carry = given.get("carry_state", self._node.get_parameter("carry_state").value)
        if "carry_state" in given and not _names(carry):
            return SetParametersResult(
                successful=False, reason=f"carry_state must be a list of names, got {carry!r}"
            )
        path = given.get("load")
        if not path:  # (the declaration, another parameter, or "" : nothing to switch to)
            return SetParametersResult(successful=True)
        reason = self._request(str(path), list(carry or ()))
        if reason is not None:
            if not self._busy():  # (a refusal never hides a switch in progress)
                self._requests += 1
                self._set_record("refused", export=str(path), reason=reason,
                                 previous=self._running())  # fmt: skip
            self._node.get_logger().warning(f"policy switch to {path} refused: {reason}")
            return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    def _request(self, path: str, carry: list[str]) -> str | None:
        """Check a request and start loading; the reason it is refused, or None."""
        from leapp.errors import LeappError
        from leapp_ros.plan.settings import load_spec

        node = self._node
        if node._lifecycle not in ("inactive", "active"):
            return f"the node is {node._lifecycle}: configure it before switching policies"
        if self._busy():
            return f"a switch to {self._record['export']} is {self._record['state']} still"
        try:
            spec = load_spec(path)
        except LeappError as e:
            return str(e)
        except Exception as e:  # an unreadable file, a folder without a spec
            return f"cannot read {path}: {one_line(e)}"
        paths = list(node._data_paths())
        names = [data.name for data in paths]
        whole = len(node.spec.models) == len(paths)  # (a fused node runs every node)
        differences = switch_differences(node.spec, spec, names, whole=whole)
        if differences:
            return f"{path} does not fit the running graph: " + "; ".join(differences)
        states = {
            data.name: [data.plan.inputs[index].port for _, index in data.state_links]
            for data in paths
        }
        carried, unknown = carried_states(carry, states)
        if unknown:
            shown = [f"{n}/{p}" for n, ports in states.items() for p in ports] or "none"
            return f"carry_state names {unknown}, which are no state inputs (these are: {shown})"
        self._requests += 1
        self._set_record("loading", export=path, previous=self._running())
        worker = threading.Thread(
            target=self._load,
            args=(spec, paths, carried, self._requests),
            name=f"leapp switch {node.get_name()}",
            daemon=True,
        )
        worker.start()
        node.get_logger().info(f"policy switch to {path}: loading beside the running policy")
        return None

    # --- loading (worker thread) ------------------------------------------------------------

    def _load(self, spec: Any, paths: list[Any], carried: dict[str, set[str]], number: int):
        from leapp_ros.node.model import load_node_model
        from leapp_ros.plan.initial_values import initial_values

        try:
            found = spec.pipeline.initial_values
            initial_path = None if found is None else spec.directory / found
            loaded = []
            for data in paths:
                model = load_node_model(spec, data.name)
                states = {
                    index: value
                    for index, value in initial_values(initial_path, data.plan).items()
                    if any(index == i for _, i in data.state_links)
                    and data.plan.inputs[index].port not in carried[data.name]
                }
                loaded.append(_Loaded(data, model.call, states))
        except Exception as e:
            if number == self._requests:
                self._set_record("failed", reason=one_line(e))
            return
        if number == self._requests and self._record["state"] == "loading":
            self._spec = spec
            self._set_record("ready")  # warm: takes over at the next run
            self.pending = loaded  # the executor thread takes it over at its next run

    # --- take-over and probation (executor thread) ------------------------------------------

    def take_over(self, tick: int | None) -> None:
        """Swap the warm models in (called just before a run): the run to come is the new
        policy's first."""
        loaded, self.pending = self.pending, None
        node = self._node
        if loaded is None:
            return
        if [item.data for item in loaded] != list(node._data_paths()):
            self._set_record("abandoned", reason="reconfigured")
            return
        saved = []
        for item in loaded:
            data = item.data
            # copies: a TorchScript model may write into its (carried) state inputs
            states = {index: _copied(data.values[index]) for _, index in data.state_links}
            saved.append((data, data.call, states))
            for index, value in item.states.items():
                data.values[index] = _copied(value)
        runs = dict.fromkeys(range(len(loaded)), 0)
        self._trial = {"saved": saved, "loaded": loaded, "runs": runs}
        for number, item in enumerate(loaded):
            item.data.call = self._on_probation(number, item)
        node._begin_blends(from_last=True)
        first = {item.data.name: item.data.runs + 1 for item in loaded}
        self._set_record("probation", first_run=first, tick=tick, probation=[0, self.probation])
        node.get_logger().info(
            f"policy switch to {self._record['export']}: took over at run "
            f"{min(first.values())}" + ("" if tick is None else f" (tick {tick})")
        )
        node._report_change()

    def _on_probation(self, number: int, item: _Loaded) -> Callable[[Sequence[Any]], Any]:
        """The model call of a pipeline node on probation: a failing result rolls back."""
        data, call = item.data, item.call
        floats = float_ports(data.plan.outputs)
        guard = data.guard

        def probation_call(values: Sequence[Any]) -> list[Any]:
            try:
                results = call(values)
            except Exception as e:
                return self._roll_back(data, values, f"the new model raised {one_line(e)}")
            bad = nonfinite(results, floats)
            if bad:
                ports = [data.plan.outputs[i].port for i in bad]
                return self._roll_back(data, values, f"NaN/inf in output(s) {ports}")
            if guard is not None and (outside := guard.out_of_domain(results)) is not None:
                return self._roll_back(data, values, f"out of domain: {outside.describe()}")
            self._passed(number)
            return results

        return probation_call

    def _passed(self, number: int) -> None:
        trial = self._trial
        if trial is None:
            return
        runs = trial["runs"]
        runs[number] += 1
        done = min(runs.values())
        record = self._record
        if done < self.probation:
            record["probation"] = [done, self.probation]
            return
        for item in trial["loaded"]:
            item.data.call = item.call  # no check per run any more
        self._trial = None
        node = self._node
        node.settings["spec_path"] = record["export"]  # what a later configure loads
        node._spec_given = self._spec
        node.spec = self._spec
        self._set_record("switched", probation=[self.probation, self.probation])
        node.get_logger().info(f"policy switch to {record['export']}: passed probation")
        node._report_change()

    def _roll_back(self, failed: Any, values: Sequence[Any], reason: str) -> list[Any]:
        """Bring the old models and their states back; the old model's results for
        ``values`` (the set the new one failed on)."""
        trial, self._trial = self._trial, None
        old_call = None
        for data, call, states in trial["saved"] if trial else ():
            data.call = call
            for index, value in states.items():
                data.values[index] = value
            if data is failed:
                old_call = call
        record = self._record
        self._set_record("rolled_back", reason=reason)
        node = self._node
        node._begin_blends(from_last=True)
        node.get_logger().error(
            f"policy switch to {record['export']} rolled back ({failed.name!r}: {reason}): "
            f"running {record['previous']} again"
        )
        node._report_change()
        return old_call(values) if old_call is not None else failed.call(values)

    # --- status -----------------------------------------------------------------------------

    def record(self) -> dict[str, Any] | None:
        """The ``switch`` field of the status records (None before the first request)."""
        return None if self._record is None else dict(self._record)

    def reset(self) -> None:
        """The node was cleaned up: a switch in progress is dropped."""
        self.pending = None
        if self._trial is not None:
            for data, call, _ in self._trial["saved"]:
                data.call = call
            self._trial = None
        if self._record is not None and self._record["state"] in _BUSY:
            self._set_record("abandoned", reason="cleaned up")

    def _busy(self) -> bool:
        return self._record is not None and self._record["state"] in _BUSY

    def _running(self) -> str:
        return str(self._node.settings["spec_path"])

    def _set_record(self, state: str, **fields: Any) -> None:
        """A new record of ``state``: ``fields`` over those of the record of this request."""
        base = self._record if "export" not in fields else {}
        record = {
            "reason": None,
            "first_run": None,
            "tick": None,
            "probation": None,
            **{k: v for k, v in (base or {}).items() if k not in ("state", "reason")},
            **fields,
        }
        self._record = {"state": state, "request": self._requests, **record}


def _copied(value: Any) -> Any:
    """A copy of an input value (a NumPy array, or a torch tensor for bfloat16)."""
    return value.clone() if hasattr(value, "clone") else np.array(value, copy=True)


def _names(value: Any) -> bool:
    return value is None or (
        isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
    )
