"""One pipeline node as a ROS 2 node: the ``leapp_node`` executable and :class:`PipelineNode`.

Start one node of an export::

    leapp_node --ros-args -r __node:=preprocess -r __ns:=/torch_pipeline \\
        -p spec_path:=exports/torch_pipeline [-p firing:=timer -p rate_hz:=50.0]

(or ``python -m leapp_ros.node.pipeline_node ...``). The node loads the spec (checking every
artifact's sha256), plans it (:func:`leapp_ros.plan.pipeline.make_plan`) under its namespace,
loads and warms up its model, subscribes to one topic per input, advertises one per output and
runs the model whenever its firing rule says so. Its ROS parameters are documented in
:mod:`leapp_ros.plan.settings`, :mod:`leapp_ros.plan.limits` and
:mod:`leapp_ros.plan.output_rates` (targets at a controller's rate); all are read once, any
other is refused. It fires on the sets its triggers form with the newest value of its other
inputs (:mod:`leapp_ros.node.input_sets`), takes several external MultiArray inputs as one
packed message too (:mod:`leapp_ros.messages.packed_inputs`), and every output carries the
tick of its set (:mod:`leapp_ros.messages.tick_label`). It is a lifecycle node
(:mod:`leapp_ros.node.managed_node`: e-stop, input watchdog, safe action, ``/diagnostics``);
with ``autostart`` (default) it configures and activates at once. Feedback inputs never
trigger and start from ``pipeline.initial_values``; state inputs stay inside the node.

A malformed message is dropped, counted and logged (at most once a second per topic); so is a
run whose model raised, and the node keeps running. With an intra-process bus (composed) it
exchanges values with the other pipeline nodes of its process directly
(:mod:`leapp_ros.node.intra_process`). Its status goes out as JSON on ``_leapp/status``
(:mod:`leapp_ros.node.status_report`); it logs ``leapp node '<name>' ready`` when ready.
Exit codes: 0 after SIGINT/SIGTERM, 2 for a startup problem (one error line on stderr).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from rclpy.parameter import Parameter
from rclpy.qos_overriding_options import QoSOverridingOptions

from leapp.errors import LeappError
from leapp.spec import Spec
from leapp_ros.messages.packed_inputs import PackedInput
from leapp_ros.messages.topic_io import TopicReader, nonfinite, now_stamp, topic_readers
from leapp_ros.node.cpu_placement import CpuPlacement
from leapp_ros.node.data_path import NodeData
from leapp_ros.node.executor import node_main
from leapp_ros.node.input_sets import InputSets
from leapp_ros.node.intra_process import IntraProcessBus, handed_tick
from leapp_ros.node.managed_node import ManagedNode
from leapp_ros.node.match_count import MatchCount
from leapp_ros.node.measured_position import subscribe_measured
from leapp_ros.node.output_topics import OutputTopics
from leapp_ros.node.partner_take import partner_take
from leapp_ros.node.stamp_sync import framed_nodes, from_framed, gather_by_stamp, stamp_sync
from leapp_ros.node.target_player import TargetPlayers, output_writers
from leapp_ros.plan.domain import declare_input_bounds
from leapp_ros.plan.firing_settings import firing_rule
from leapp_ros.plan.limits import declare_output_limits
from leapp_ros.plan.output_rates import consumed_outputs, declare_output_rates, output_rates
from leapp_ros.plan.pipeline import make_plan
from leapp_ros.plan.settings import (
    StartupError,
    declare_port_overrides,
    load_spec,
    qos_profile,
    refuse_unknown_parameters,
)

__all__ = ["PipelineNode", "StartupError", "main"]

PROGRAM = "leapp_node"

USAGE = f"""usage: {PROGRAM} --ros-args -r __node:=<node> [-r __ns:=/<namespace>]
                  -p spec_path:=<export folder or yaml> [-p pipeline_node:=<node>]
                  [-p firing:=inputs|timer] [-p triggers:=[<port>,...]] [-p rate_hz:=<Hz>]
                  [-p max_input_age:=<s>] [--params-file <file>] [--log-level <level>]
Runs one node of an exported leapp pipeline as a ROS 2 node."""


class PipelineNode(ManagedNode):
    """A ROS 2 lifecycle node running one node of an exported pipeline (see the module
    documentation and :class:`~leapp_ros.node.managed_node.ManagedNode`).

    Args:
        node_name: the ROS node name (a ``-r __node:=`` remap wins over it).
        namespace: the ROS namespace (a ``-r __ns:=`` remap wins over it).
        context: the rclpy context (default: the global one).
        spec: an already loaded spec of ``spec_path`` (a container loads it once for all).
        parameter_overrides: parameter values that win over command-line ones.
        cli_args: ROS arguments of this node only (``--ros-args -r __node:=policy ...``).
        use_global_arguments: False to ignore the process's own ROS arguments (a node loaded
            into a component container takes only those of its load request).
        bus: the intra-process bus of the process (:mod:`leapp_ros.node.intra_process`): values
            go to and come from the other pipeline nodes on it without the middleware.

    Raises:
        StartupError: the spec, the model, the parameters or the initial values are unusable
            (with ``autostart: false`` only the parameters: configure reports the rest); the
            message names the node and says what to do. The node is destroyed then.
    """

    def __init__(
        self,
        node_name: str = "leapp_node",
        *,
        namespace: str | None = None,
        context: Any = None,
        spec: Spec | None = None,
        parameter_overrides: Sequence[Parameter] = (),
        cli_args: Sequence[str] | None = None,
        use_global_arguments: bool = True,
        bus: IntraProcessBus | None = None,
    ):
        super().__init__(
            node_name,
            namespace=namespace,
            context=context,
            parameter_overrides=list(parameter_overrides),
            cli_args=None if cli_args is None else list(cli_args),
            use_global_arguments=use_global_arguments,
        )
        self._leapp_timers: list[Any] = []
        self._cpu = CpuPlacement()
        self._bus = bus
        self._bus_exits: list[Any] = []  # what leaves the bus when the node is destroyed
        try:
            self._start(spec)
        except BaseException:
            self.destroy_node()
            raise

    # --- startup ------------------------------------------------------------------------

    def _configure(self, spec: Spec | None, settings: dict[str, Any]) -> None:
        """Load and warm up the model, create the topics and timers (lifecycle configure)."""
        if settings["cpu_affinity"]:
            self._cpu.pin(settings["cpu_affinity"], self.pipeline_node, self.get_logger())
        try:
            self._load(spec, settings)
        except StartupError:
            raise
        except LeappError as e:
            raise StartupError(f"node {self.pipeline_node!r}: {e}") from e
        refuse_unknown_parameters(self, f"node {self.get_fully_qualified_name()!r}")
        self._create_entities()
        self._cpu.request_latency(
            settings["cpu_latency_us"], self.pipeline_node, self.get_logger()
        )
        self.get_logger().debug(f"firing {self.firing}")

    def _load(self, spec: Spec | None, settings: dict[str, Any]) -> None:
        """Load the spec and the model; plan the topics and the firing rule."""
        if spec is None:
            spec = load_spec(str(settings["spec_path"]))
        self.spec = spec
        names = [model.name for model in spec.models]
        if self.pipeline_node not in names:
            raise StartupError(
                f"pipeline {spec.name!r} has no node {self.pipeline_node!r} (the ROS node "
                f"name, or parameter pipeline_node); its nodes are {', '.join(names)}: "
                "name one with -r __node:=<node> or -p pipeline_node:=<node>"
            )
        model = spec.model(self.pipeline_node)
        limits = declare_output_limits(self, model)
        bounds = declare_input_bounds(self, model, default_action=settings["on_out_of_domain"])
        rates = declare_output_rates(self, model)
        ports = declare_port_overrides(self, model)
        plan = make_plan(spec, namespace=self.get_namespace(), ports={self.pipeline_node: ports})
        self.firing = firing_rule(plan.node(self.pipeline_node), settings)
        self.plan = replace(plan.node(self.pipeline_node), firing=self.firing)
        consumed = consumed_outputs(plan, self.pipeline_node)
        self._rates = output_rates(rates, self.plan, self.firing, consumed)
        self._publish_nonfinite = settings["on_nonfinite"] == "publish"
        self._pipeline_plan = plan
        self._data = NodeData.load(
            spec,
            plan,
            self.plan,
            check_nonfinite=not self._publish_nonfinite,
            limits=limits,
            bounds=bounds,
            rate_hz=self.firing.rate_hz,
        )
        self._values = self._data.values  # (the same list: one lookup less per run)
        copy = not self._data.reads_only
        self._readers = topic_readers(self.plan.inputs, copy=copy)
        if self.plan.packed is not None:
            self._readers.append(PackedInput(self.plan, copy=copy))  # type: ignore[arg-type]
        self._writers = output_writers(self.plan.outputs, self._rates, raw=self._raw)
        self._sets = InputSets.of_node(self.plan, self._data)
        self._triggers = self._sets.triggers

    def _create_entities(self) -> None:
        overrides = QoSOverridingOptions.with_default_policies()
        # the middleware's copies of values the intra-process bus delivered already are skipped
        skip = self._bus.produces if self._bus is not None else None
        sync = stamp_sync(self.firing)
        partners = partner_take(self.firing, self._sets, sync)
        self._input_counts: list[tuple[str, MatchCount]] = []
        framed = framed_nodes(self._pipeline_plan)
        for reader in self._readers:
            gathered = sync is not None and gather_by_stamp(
                sync, self.pipeline_node, reader, self.plan.inputs, self._triggers, framed
            )
            by_tick = gathered and not reader.stamped  # a MultiArray: its tick is its stamp
            stamped = from_framed(self.plan.inputs, reader.indices, framed)
            read = reader.read_raw if self._raw else reader.read
            callback = self._input_callback(
                self._data,
                reader,
                read,
                reader.indices,
                skip,
                sync=sync,
                partners=partners,
                tick_of=reader.tick if reader.ticked else None,
                stamp_of=reader.tick if by_tick else None,
                stamped=stamped,
            )
            matched = MatchCount()
            subscription = self.create_subscription(
                reader.message_class,
                reader.topic,
                callback,
                qos_profile(self.plan.inputs[reader.indices[0]].qos),
                qos_overriding_options=overrides,
                event_callbacks=matched.subscription_callbacks(),
                raw=self._raw,
            )
            reader.resolved = subscription.topic_name  # after remapping: the name users see
            self._input_counts.append((reader.resolved, matched))
            if partners is not None:
                partners.add(subscription, self._triggers.intersection(reader.indices), callback)
            if self._bus is not None and not isinstance(reader, PackedInput):
                count = len(reader.indices)
                deliver = self._input_callback(
                    self._data,
                    reader,
                    lambda item, n=count: [item[0]] * n,  # (value, tick) from the bus
                    reader.indices,
                    sync=sync if gathered else None,
                    tick_of=handed_tick,
                    stamp_of=handed_tick if gathered else None,
                    stamped=stamped,
                )
                self._bus_exits.append(self._bus.subscribe(reader.resolved, deliver))
        self._outputs = OutputTopics(self, self._writers, overrides=overrides, bus=self._bus)
        self._bus_exits += self._outputs.exits
        self._output_publishers = self._outputs.publishers
        self._stamped = self._outputs.stamped
        if self._rates:  # outputs played out at their own rates
            clock, publish = self.get_clock(), self._outputs.publish_one

            def target(index: int, value: Any) -> None:
                publish(index, value, now_stamp(clock, self._raw))

            self._data.players = TargetPlayers(self, self._data, self._rates, target, self._warn)
        for _, topic, matched in subscribe_measured(self, self._pipeline_plan, [self._data]):
            self._input_counts.append((topic, matched))  # (status: publishers matched)
        self._create_status_and_timers()

    def _create_status_and_timers(self) -> None:
        if self.firing.mode == "timer" and self.firing.rate_hz:
            self._leapp_timers.append(self.create_timer(1.0 / self.firing.rate_hz, self._on_timer))

    def destroy_node(self) -> None:
        """Destroy the node, leave the intra-process bus and end the CPU latency request."""
        self._release_data_path()
        super().destroy_node()

    def _release_data_path(self) -> None:
        while self._bus_exits:
            self._bus_exits.pop()()
        self._cpu.release()

    # --- data path ----------------------------------------------------------------------

    def _input_callback(
        self,
        data: NodeData,
        reader: TopicReader,
        read: Callable[[Any], list[Any]],
        keys: Sequence[Any],
        skip: Callable[[str], bool] | None = None,
        **options: Any,
    ) -> Callable[[Any], None]:
        """What a subscription (or the bus) calls with each message for ``data``'s ports
        ``reader.indices``, keyed ``keys`` in this node's input sets; ``options`` (``sync``,
        ``partners``, ``tick_of``, ``stamp_of``, ``stamped``): see
        :meth:`NodeData.input_callback`."""
        return data.input_callback(
            reader,
            read,
            keys=keys,
            sets=self._sets,
            fire=self._fire_on_inputs,
            warn=self._warn,
            check_nonfinite=not self._publish_nonfinite,
            skip=skip,
            **options,
        )

    def _fire_on_inputs(self, now: float) -> None:
        """Run on the set that formed at ``now``, unless a trigger of it or a newest-value
        input is too old, or a newest-value input never came (counted ``stale``)."""
        if self.firing.mode == "timer":
            return  # a whole set gathered by stamp: the next tick runs on it
        sets = self._sets
        old = sets.old_triggers(now)
        if old:
            self._data.stale += 1
            sets.pending.update(old)  # the old ones must come anew
            return
        if sets.newest and (unusable := sets.unusable(now)) is not None:
            unusable.data.stale += 1
            self._warn("\0stale", f"{unusable.describe()}: skipped a set (counted stale)")
            sets.reset()
            return
        sets.reset()
        self._run_if_admitted(now)

    def _on_timer(self) -> None:
        sets = self._sets
        now = self._timer_guard(sets.stamps[key] for key in sets.checked)
        if now is None:
            return
        unusable = sets.unusable(now)
        if unusable is not None:
            if not unusable.missing:  # (not every input has arrived yet: no run, no count)
                unusable.data.stale += 1
            return
        self._run_if_admitted(now)

    def _run(self) -> None:
        data = self._data
        try:
            # The readers checked every value against its port; no second check here.
            if data.domain is not None and (outside := data.domain.check(self._values)):
                return self._out_of_domain(data, outside)
            results = data.call(self._values)
            if (checks := data.checked_outputs) and (bad := nonfinite(results, checks)):
                data.report_nonfinite_outputs(bad, self._warn)
                return
            if data.guard is not None:
                if (outside := data.guard.out_of_domain(results)) is not None:
                    return self._out_of_domain(data, outside)
                results = data.guard.apply(results, data)
            for output, index in data.state_links:
                self._values[index] = results[output]
            stamp = now_stamp(self.get_clock(), self._raw) if self._stamped else None
            shown = results if data.players is None else data.players.take(results)
            self._outputs.publish(shown, stamp, self._sets.tick())
        except Exception as e:
            data.report_model_error(e, self._warn, self.get_logger())
            return
        data.runs += 1
        self._gate.last_command = time.monotonic()  # what the input watchdog watches
        if data.guard is not None and data.guard.ramps:
            self._blended(data)

    # --- operations (see ManagedNode) ----------------------------------------------------

    def _data_paths(self) -> list[NodeData]:
        return [self._data]

    def _reset_sets(self) -> None:
        """Start gathering a new set of inputs (after an activation or an e-stop release)."""
        self._sets.reset()

    def _last_set_time(self) -> float | None:
        return self._gate.last_set or None

    def _publish_safe_values(self, data: NodeData, values: list[Any], stamp: Any) -> None:
        self._outputs.publish(values, stamp)

    # --- status -------------------------------------------------------------------------

    def status(self, state: str = "ready") -> dict[str, Any]:
        """The status record this node publishes on ``_leapp/status``."""
        return self._status_record(self._data, self._output_publishers, self._input_counts, state)

    def _status_records(self, state: str) -> list[dict[str, Any]]:
        return [self.status(state)]

    def _ready_names(self) -> list[str]:
        return [self.pipeline_node]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``leapp_node``; ``argv`` is the whole command line (default sys.argv)."""
    return node_main(PROGRAM, USAGE, lambda context: PipelineNode(context=context), argv)


if __name__ == "__main__":
    sys.exit(main())
