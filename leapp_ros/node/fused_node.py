"""A whole pipeline in one ROS 2 node: ``leapp_fused`` and :class:`FusedPipelineNode`.

    leapp_fused --ros-args -r __ns:=/torch_pipeline -p spec_path:=exports/torch_pipeline \\
        [-p firing:=timer -p rate_hz:=50.0] [-p publish_intermediate:=false]

(or ``python -m leapp_ros.node.fused_node``; ``leapp-ros run --fused``, ``ros2 launch leapp_ros
pipeline.launch.py fused:=true``). The node, ``leapp_fused`` in the pipeline's namespace,
subscribes to the external inputs of every pipeline node and, on each tick, runs every node
in producer-before-consumer order, handing values from node to node in memory. It publishes on
the same topics as the graph of one node per pipeline node: the outputs no other node consumes
(the pipeline's results) as soon as their node has run, then, once the tick is over, the
intermediate outputs another node consumes (for ``ros2 topic echo``, bags and debugging;
``publish_intermediate:=false`` leaves those topics out; one nobody subscribes to is not
encoded at all, unless its QoS is transient_local). One subscription hop and no
intermediate hop: a tick costs what :class:`leapp.Pipeline` costs plus one message in and one
out.

Semantics, as in the other modes:

- firing: ``inputs`` (default) ticks when every trigger has a new message since the last tick
  (parameter ``triggers``: external inputs, by default all of them; the others are
  newest-value inputs, :mod:`leapp_ros.node.input_sets`); ``timer`` ticks at ``rate_hz``
  (default ``pipeline.configs.frequency``) on the latest values once every external input has
  one; a pipeline without external inputs runs on the timer. ``max_input_age`` skips a tick
  whose external inputs include an older one (counted as ``stale``). A stage with several
  external MultiArray inputs takes them as one packed message too, and every output of a tick
  carries the tick of its set (:mod:`leapp_ros.messages.tick_label`).
- state and feedback: state inputs keep their node's last output; a feedback input takes its
  producer's output of the previous tick (as :meth:`leapp.Pipeline.step` does), starting from
  ``pipeline.initial_values``.
- bad input: a malformed message or one holding NaN/inf (``on_nonfinite: drop``) is dropped
  and counted; a node whose model fails, or whose results hold NaN/inf, publishes nothing this
  tick, and the nodes it feeds do not run; the node keeps running.
- status: one record per pipeline node on ``_leapp/status``, exactly as a ``leapp_node`` has
  it, plus ``"fused": "<this node's full name>"`` and ``"ticks"`` (the ticks run so far: the
  records of one publication carry the same number); the log says ``leapp node '<node>' ready``
  for each, so supervisors and test harnesses treat the process like a container of them.

Parameters: those of :mod:`leapp_ros.plan.settings` (``pipeline_node`` excepted), applied to the
whole pipeline, ``ports.<port>.*`` applying to every node's port of that name (a result played
out at ``ports.<port>.output_rate_hz`` is interpolated over one tick period,
:mod:`leapp_ros.plan.output_rates`), and ``publish_intermediate`` (bool, default true). A spec
whose nodes run at rates of their own (``pipeline.configs.node_frequency``) needs the fused
node's own ``firing`` / ``rate_hz``: one tick runs every node.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from leapp.spec import Spec
from leapp_ros.messages.topic_io import OutputWriter, TopicReader, nonfinite, now_stamp
from leapp_ros.node.data_path import NodeData
from leapp_ros.node.executor import node_main
from leapp_ros.node.fused_stages import (
    OWNER,
    Stage,
    external_readers,
    load_stages,
    stage_input_sets,
    tick_firing,
)
from leapp_ros.node.match_count import MatchCount
from leapp_ros.node.measured_position import subscribe_measured
from leapp_ros.node.partner_take import partner_take
from leapp_ros.node.pipeline_node import PipelineNode
from leapp_ros.node.stamp_sync import gather_by_stamp, stamp_sync
from leapp_ros.node.target_player import TargetPlayers, output_writers
from leapp_ros.plan.domain import declare_input_bounds
from leapp_ros.plan.firing_settings import trigger_ports
from leapp_ros.plan.limits import declare_output_limits
from leapp_ros.plan.output_rates import consumed_outputs, declare_output_rates, output_rates
from leapp_ros.plan.pipeline import make_plan
from leapp_ros.plan.settings import (
    StartupError,
    declare_port_overrides,
    load_spec,
    qos_profile,
)

__all__ = ["FusedPipelineNode", "main"]

PROGRAM = "leapp_fused"
NODE_NAME = "leapp_fused"

USAGE = f"""usage: {PROGRAM} --ros-args [-r __node:=<name>] [-r __ns:=/<namespace>]
                   -p spec_path:=<export folder or yaml> [-p firing:=inputs|timer]
                   [-p rate_hz:=<Hz>] [-p max_input_age:=<s>] [-p publish_intermediate:=false]
                   [--params-file <file>] [--log-level <level>]
Runs every node of an exported leapp pipeline in one ROS 2 node, tick by tick."""


class FusedPipelineNode(PipelineNode):
    """A ROS 2 node running every node of an exported pipeline per tick (see the module
    documentation). Arguments as :class:`~leapp_ros.node.pipeline_node.PipelineNode`'s.

    Raises:
        StartupError: the spec, a model, the parameters or the initial values are unusable;
            the message names the node and says what to do.
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs: Any):
        super().__init__(node_name, **kwargs)

    # --- startup ------------------------------------------------------------------------

    def _load(self, spec: Spec | None, settings: dict[str, Any]) -> None:
        from rcl_interfaces.msg import ParameterDescriptor

        self._publish_intermediate = self.declare_parameter(
            "publish_intermediate",
            True,
            ParameterDescriptor(
                description="publish the outputs another node consumes too", read_only=True
            ),
        ).value
        if not isinstance(self._publish_intermediate, bool):
            raise StartupError(
                f"parameter publish_intermediate must be true or false, got "
                f"{self._publish_intermediate!r}"
            )
        if spec is None:
            spec = load_spec(str(settings["spec_path"]))
        self.spec = spec
        limits = declare_output_limits(self, *spec.models)
        action = settings["on_out_of_domain"]
        bounds = declare_input_bounds(self, *spec.models, default_action=action)
        rates = declare_output_rates(self, *spec.models)
        overrides = declare_port_overrides(self, *spec.models)
        plan = make_plan(
            spec,
            namespace=self.get_namespace(),
            ports={
                model.name: {
                    port: overrides[port]
                    for port in {p.name for p in (*model.inputs, *model.outputs)}
                    if port in overrides
                }
                for model in spec.models
            },
        )
        self.pipeline_node = ",".join(node.name for node in plan.nodes)
        self.plan_of_pipeline = plan
        self._publish_nonfinite = settings["on_nonfinite"] == "publish"
        self.firing = tick_firing(plan, settings)
        self._stages = load_stages(
            spec,
            plan,
            check_nonfinite=not self._publish_nonfinite,
            limits=limits,
            bounds=bounds,
            rate_hz=self.firing.rate_hz,
        )
        self._rates = {  # per stage, its outputs played out at their own rates
            id(stage): output_rates(
                rates,
                stage.plan,
                self.firing,
                consumed_outputs(plan, stage.name),
                owner=f"leapp_fused node {stage.name!r}",
            )
            for stage in self._stages
        }
        externals = [
            (stage.name, port)
            for stage in self._stages
            for port in stage.plan.inputs
            if port.kind == "external"
        ]
        self._chosen = trigger_ports(OWNER, settings["triggers"], externals)
        self._ticks = 0

    def _create_entities(self) -> None:
        from rclpy.qos import DurabilityPolicy
        from rclpy.qos_overriding_options import QoSOverridingOptions

        overrides = QoSOverridingOptions.with_default_policies()
        consumed = {
            id(stage): {index for index, _, _ in (*stage.data_links, *stage.feedback_links)}
            for stage in self._stages
        }
        # The external inputs, as triggers of a tick or newest values (the callbacks hold on
        # to these objects).
        self._sets = stage_input_sets(self._stages, self.firing, self._chosen)
        self._triggers = self._sets.triggers
        self._readers: list[TopicReader] = []
        sync = stamp_sync(self.firing)
        partners = partner_take(self.firing, self._sets, sync)
        for number, stage in enumerate(self._stages):
            rates = self._rates[id(stage)]
            writers = output_writers(stage.plan.outputs, rates, raw=self._raw)
            for reader in external_readers(stage):
                indices = reader.indices
                if sync is not None:
                    triggering = [i for i in indices if (number, i) in self._triggers]
                    gather_by_stamp(sync, stage.name, reader, stage.plan.inputs, triggering)
                keys = [(number, index) for index in indices]
                callback = self._input_callback(
                    stage,
                    reader,
                    reader.read_raw if self._raw else reader.read,
                    keys,
                    sync=sync,
                    partners=partners,
                    tick_of=reader.tick if reader.ticked else None,
                )
                matched = MatchCount()
                subscription = self.create_subscription(
                    reader.message_class,
                    reader.topic,
                    callback,
                    qos_profile(stage.plan.inputs[indices[0]].qos),
                    qos_overriding_options=overrides,
                    event_callbacks=matched.subscription_callbacks(),
                    raw=self._raw,
                )
                reader.resolved = subscription.topic_name
                stage.input_counts.append((reader.resolved, matched))
                if partners is not None:
                    partners.add(subscription, self._triggers.intersection(keys), callback)
                self._readers.append(reader)
            for index, port in enumerate(stage.plan.outputs):
                intermediate = index in consumed[id(stage)]
                if intermediate and not self._publish_intermediate:
                    continue
                writer = writers[index]
                count = MatchCount()
                publisher = self.create_publisher(
                    writer.message_class,
                    port.topic,
                    qos_profile(port.qos),
                    qos_overriding_options=overrides,
                    event_callbacks=count.publisher_callbacks(),
                )
                stage.publishers.append(publisher)
                if not intermediate:
                    stage.publish_now.append((index, publisher, writer))
                elif publisher.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL:
                    stage.publish_later.append((index, publisher, writer, _always))
                else:  # no subscriber, no message: skip encoding one nobody takes
                    stage.publish_later.append((index, publisher, writer, count))
            if rates:
                stage.players = TargetPlayers(
                    self, stage, rates, self._target_publisher(stage), self._warn
                )
        self._stamped = any(
            entry[2].stamped
            for stage in self._stages
            for entry in (*stage.publish_now, *stage.publish_later)
        )
        self._output_publishers = [p for stage in self._stages for p in stage.publishers]
        for stage, topic, matched in subscribe_measured(self, self.plan_of_pipeline, self._stages):
            stage.input_counts.append((topic, matched))
        self._create_status_and_timers()

    # --- data path ----------------------------------------------------------------------

    def _fire_on_inputs(self, now: float) -> None:
        if self.firing.mode == "timer":
            return  # a whole set gathered by stamp: the next tick runs on it
        sets = self._sets
        old = sets.old_triggers(now)
        if old:
            for number in {number for number, _ in old}:
                self._stages[number].stale += 1
            sets.pending.update(old)  # the old ones must come anew
            return
        if sets.newest and (unusable := sets.unusable(now)) is not None:
            unusable.data.stale += 1
            self._warn("\0stale", f"{unusable.describe()}: skipped a tick (counted stale)")
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
            if not unusable.missing:  # (not every input has arrived yet: no tick, no count)
                unusable.data.stale += 1
            return
        self._run_if_admitted(now)

    def _run(self) -> None:
        """One tick: every stage in order, pipeline results published at once."""
        ran: set[int] = set()
        later: list[tuple[Any, OutputWriter, Any, Callable[[], int]]] = []
        feedback: list[tuple[Stage, int, Any]] = []
        stamp = now_stamp(self.get_clock(), self._raw) if self._stamped else None
        tick = self._sets.tick()
        for number, stage in enumerate(self._stages):
            if not stage.producers <= ran:
                continue  # a producer published nothing this tick
            if stage.domain is not None and (outside := stage.domain.check(stage.values)):
                self._out_of_domain(stage, outside)
                if self._gate.latched:
                    return  # the safe action went out: nothing of this tick follows
                continue
            try:
                results = stage.call(stage.values)
            except Exception as e:
                stage.report_model_error(e, self._warn, self.get_logger())
                continue
            if (checks := stage.checked_outputs) and (bad := nonfinite(results, checks)):
                stage.report_nonfinite_outputs(bad, self._warn)
                continue
            if stage.guard is not None:
                if (outside := stage.guard.out_of_domain(results)) is not None:
                    self._out_of_domain(stage, outside)
                    if self._gate.latched:
                        return
                    continue
                results = stage.guard.apply(results, stage)
                if stage.guard.ramps:
                    self._blended(stage)
            for output, index in stage.state_links:
                stage.values[index] = results[output]
            for output, consumer, index in stage.data_links:
                consumer.values[index] = results[output]
            for output, consumer, index in stage.feedback_links:
                feedback.append((consumer, index, results[output]))
            shown = results if stage.players is None else stage.players.take(results)
            for output, publisher, writer in stage.publish_now:
                if shown[output] is not None:  # (a played output's player publishes it)
                    publisher.publish(writer.write(shown[output], stamp, tick))
            if stage.publish_later:
                later += [(p, w, results[o], want) for o, p, w, want in stage.publish_later]
            stage.runs += 1
            ran.add(number)
        for consumer, index, value in feedback:
            consumer.values[index] = value
        for publisher, writer, value, wanted in later:
            if wanted():
                publisher.publish(writer.write(value, stamp, tick))
        self._ticks += 1
        if len(ran) == len(self._stages):  # every result published: the watchdog is fed
            self._gate.last_command = time.monotonic()

    def _target_publisher(self, stage: Stage) -> Callable[[int, Any], None]:
        """``publish(index, value)``: one target of ``stage``'s output ``index``."""
        entries = {output: (publisher, writer) for output, publisher, writer in stage.publish_now}
        clock = self.get_clock()

        def publish(index: int, value: Any) -> None:
            publisher, writer = entries[index]
            publisher.publish(writer.write(value, now_stamp(clock, self._raw)))

        return publish

    # --- operations (see ManagedNode) ----------------------------------------------------

    def _data_paths(self) -> list[Stage]:
        return self._stages

    def _publish_safe_values(self, data: NodeData, values: list[Any], stamp: Any) -> None:
        """The safe values of one stage's pipeline results (intermediates stay silent)."""
        for output, publisher, writer in data.publish_now:
            if values[output] is not None:
                publisher.publish(writer.write(values[output], stamp))

    # --- status -------------------------------------------------------------------------

    def statuses(self, state: str = "ready") -> list[dict[str, Any]]:
        """One status record per pipeline node, as a ``leapp_node`` of it publishes."""
        fused = self.get_fully_qualified_name()
        records = [
            self._status_record(stage, stage.publishers, stage.input_counts, state)
            for stage in self._stages
        ]
        return [{**record, "fused": fused, "ticks": self._ticks} for record in records]

    def _status_records(self, state: str) -> list[dict[str, Any]]:
        return self.statuses(state)

    def _ready_names(self) -> list[str]:
        return [stage.name for stage in self._stages]

    def _unconfigured_names(self) -> list[str]:
        return [stage.name for stage in getattr(self, "_stages", ())] or [self.get_name()]


def _always() -> int:
    return 1  # a latched (transient_local) intermediate: late subscribers get the last value


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``leapp_fused``; ``argv`` is the whole command line (default sys.argv)."""
    return node_main(PROGRAM, USAGE, lambda context: FusedPipelineNode(context=context), argv)


if __name__ == "__main__":
    sys.exit(main())
