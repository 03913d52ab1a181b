"""One pipeline node's data path, shared by ``leapp_node``
(:mod:`leapp_ros.node.pipeline_node`) and
``leapp_fused`` (:mod:`leapp_ros.node.fused_node`, one :class:`NodeData` per pipeline node):
:class:`NodeData` holds the node's model, the current value of each input and the counters of
its status record; :meth:`NodeData.input_callback` makes what a subscription or the
intra-process bus calls with each message (decode, drop and count a malformed one or one
holding NaN/inf, store the values, their arrival times and ticks, fire once every trigger has
come: with ticks, once every trigger has a message of one tick, :mod:`leapp_ros.node.input_sets`;
a newest-value input's message is only stored); a node fires on one *set* of its triggers, and
a message it rejects spoils the set it belongs to, which is then dropped whole
(``incomplete_sets``) rather than completed with a partner from another instant;
:meth:`NodeData.report_model_error` and :meth:`NodeData.report_nonfinite_outputs` count and
log a run that publishes nothing.

Tuned for latency: a callback binds what it needs once, when it is made, and handles a message
in one Python frame besides the decoder's; the nodes call the model inline and the reports
only when a run fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from leapp.spec import Spec
from leapp_ros.messages.multiarray import MessageError
from leapp_ros.messages.topic_io import TopicReader, float_ports, nonfinite
from leapp_ros.node.domain_guard import InputGuard
from leapp_ros.node.frame_memory import FRAME_BYTES, frame_bytes, keep_frame_buffers
from leapp_ros.node.input_sets import InputSets
from leapp_ros.node.rate_limited_log import one_line
from leapp_ros.node.safety import OutputGuard
from leapp_ros.node.stamp_sync import FRAME_TYPES, StampSync, synced_callback, take_set
from leapp_ros.plan.domain import InputBounds
from leapp_ros.plan.initial_values import initial_values
from leapp_ros.plan.limits import OutputLimits
from leapp_ros.plan.pipeline import NodePlan, PipelinePlan

__all__ = ["COUNTERS", "NodeData"]

COUNTERS = (
    "runs",
    "received",
    "dropped",
    "stale",
    "errors",
    "nonfinite_inputs",
    "nonfinite_outputs",
    "incomplete_sets",
    "timeouts",
    "safe_actions",
    "clamped",
    "step_limited",
    "out_of_domain",
)

Warn = Callable[[str, str], None]  # (rate-limiting key, text): the node's _warn
_Data = TypeVar("_Data", bound="NodeData")


@dataclass(eq=False)
class NodeData:
    """One pipeline node's model, input values and counters (see the module documentation)."""

    plan: NodePlan
    call: Callable[[Sequence[Any]], list[Any]]  # the model: one array per input and output
    values: list[Any]  # the current value of each input (None until the first one)
    state_links: tuple[tuple[int, int], ...] = ()  # (output, input) of the node's own state
    checked_outputs: tuple[int, ...] = ()  # outputs whose NaN/inf drop the run
    guard: OutputGuard | None = None  # limits and safe action of the outputs (None: none)
    domain: InputGuard | None = None  # out-of-domain guards of the inputs (None: none)
    reads_only: bool = False  # the model never writes into its inputs (views of a payload do)
    players: Any = None  # outputs played out at their own rates (node.target_player), or None
    runs: int = 0
    received: int = 0
    dropped: int = 0
    stale: int = 0
    errors: int = 0
    nonfinite_inputs: int = 0
    nonfinite_outputs: int = 0
    incomplete_sets: int = 0
    timeouts: int = 0
    safe_actions: int = 0
    clamped: int = 0
    step_limited: int = 0
    out_of_domain: int = 0
    last_violation: dict[str, Any] | None = None  # the last out-of-domain value, as recorded
    # per input topic: its reader and the messages taken from it (``received`` by topic)
    topic_received: list[tuple[TopicReader, list[int]]] = field(default_factory=list)
    measured: list[tuple[TopicReader, list[int]]] = field(default_factory=list)  # of ramps

    @classmethod
    def load(
        cls: type[_Data],
        spec: Spec,
        plan: PipelinePlan,
        node: NodePlan,
        *,
        check_nonfinite: bool,
        limits: Mapping[str, OutputLimits] | None = None,
        bounds: Mapping[str, InputBounds] | None = None,
        rate_hz: float | None = None,
    ) -> _Data:
        """The node ``node`` of ``plan``: its model loaded and warmed up, its feedback and
        state inputs at their initial values; ``check_nonfinite`` (``on_nonfinite: drop``)
        makes NaN/inf in a float output drop the run; ``limits`` (by output port name) the
        safe action, limits and ramp-in of its outputs (``rate_hz``: the node's rate, which
        counts a ramp's commands); ``bounds`` (by input port name) its inputs' domain.

        Raises:
            StartupError, PipelineError: the model or the initial values are unusable.
        """
        from leapp_ros.node.model import load_node_model

        if frame_bytes(port for port in node.inputs if port.topic) >= FRAME_BYTES:
            keep_frame_buffers()  # a camera frame's buffers: reused, not faulted in anew
        guard = OutputGuard.of_node(node, limits or {}, rate_hz)
        model = load_node_model(spec, node.name)
        initial = initial_values(plan.initial_values, node)
        return cls(
            plan=node,
            call=model.call,
            values=[initial.get(i) for i in range(len(node.inputs))],
            state_links=tuple(
                (node.outputs.index(node.output(port.source.split("/", 1)[1])), i)
                for i, port in enumerate(node.inputs)
                if port.kind == "state" and port.source is not None
            ),
            checked_outputs=float_ports(node.outputs) if check_nonfinite else (),
            guard=guard,
            domain=InputGuard.of(node, bounds or {}),
            reads_only=getattr(model, "reads_only", False),
        )

    @property
    def name(self) -> str:
        return self.plan.name

    def counts(self) -> dict[str, int]:
        """The counters of the status record, in its order."""
        return {counter: getattr(self, counter) for counter in COUNTERS}

    def received_on(self) -> dict[str, int]:
        """The messages taken from each input topic (full name), as ``received`` counts them."""
        return {reader.resolved: cell[0] for reader, cell in self.topic_received}

    def measured_cell(self, reader: TopicReader) -> list[int]:
        """The count of messages a ramp's measured input (``reader``) took: its newest
        message is all it needs, so it is reported apart (:meth:`measured_on`)."""
        cell = [0]
        self.measured.append((reader, cell))
        return cell

    def measured_on(self) -> dict[str, int]:
        """The messages taken from each measured input topic of a ramp (full name)."""
        return {reader.resolved: cell[0] for reader, cell in self.measured}

    def _received_cell(self, reader: TopicReader) -> list[int]:
        """The count of ``reader``'s topic (one per topic, also when the middleware and the
        intra-process bus both deliver on it)."""
        for known, cell in self.topic_received:
            if known is reader:
                return cell
        cell = [0]
        self.topic_received.append((reader, cell))
        return cell

    def input_callback(
        self,
        reader: TopicReader,
        read: Callable[[Any], list[Any]],
        *,
        keys: Sequence[Hashable],
        sets: InputSets,
        fire: Callable[[float], None],
        warn: Warn,
        check_nonfinite: bool,
        skip: Callable[[str], bool] | None = None,
        sync: StampSync | None = None,
        partners: Callable[[frozenset[Hashable]], None] | None = None,
        tick_of: Callable[[Any], int | None] | None = None,
        stamp_of: Callable[[Any], int | None] | None = None,
        stamped: bool = False,
    ) -> Callable[[Any], None]:
        """What the subscription of ``reader`` calls with each message.

        Args:
            reader: the topic and the input ports (``reader.indices``) it feeds.
            read: one value per port of the reader from a message (``reader.read``; for the
                intra-process bus, the value handed over, once per port).
            keys: each port's key in ``sets`` (:class:`~leapp_ros.node.input_sets.InputSets`:
                the node's triggers, the set being gathered, arrival times and ticks); a
                message on a trigger counts towards a set, a newest-value input's is stored.
            fire: ``fire(now)`` runs the node on the set that formed at ``now``.
            warn: the node's rate-limited warning (key, text).
            check_nonfinite: drop a message whose float values hold NaN/inf (counted).
            skip: whether to ignore a message on the resolved topic, asked first (the
                middleware's copy of a value the intra-process bus delivered already).
            sync: with ``sync: exact | approximate``, what gathers the triggering inputs by
                header stamp instead of by arrival (see :mod:`leapp_ros.node.stamp_sync`).
            partners: completes a set from the other subscriptions' waiting messages
                (:mod:`leapp_ros.node.partner_take`).
            tick_of: the tick a message carries (None for messages that carry none):
                triggers carrying ticks form sets of one tick.
            stamp_of: with ``sync``, a message's stamp (default ``reader.stamp_ns``, its header
                stamp; a MultiArray's tick stands for it).
            stamped: the ticks ``tick_of`` reads are camera frames' stamps: they go on as
                the run's tick, but gathered by arrival they form no sets.

        A camera frame's header stamp is kept as the set's (``sets.stamp``: the tick of a run
        whose triggers carry none).
        """
        values, slots = self.values, list(zip(reader.indices, keys, strict=True))
        fire_keys = [key for key in keys if key in sets.triggers]
        origin = frozenset(fire_keys)
        decode = self._decoder(reader, read, warn, check_nonfinite)
        frame = getattr(reader, "message_type", None) in FRAME_TYPES
        sets.framed |= frame
        if sync is not None and fire_keys:
            stamp_of = stamp_of or reader.stamp_ns
            return synced_callback(self, reader, decode, slots, sets, sync, fire, skip, stamp_of)
        frame_stamp = reader.stamp_ns if frame else None
        drop_set = self._set_dropper(reader, sets, warn)
        monotonic = time.monotonic
        stamps, ticks, pending, rejected = sets.stamps, sets.ticks, sets.pending, sets.rejected
        # messages carrying ticks are queued by tick, unless this topic brings whole sets
        partial = fire_keys and tick_of is not None and not stamped and not sets.triggers <= origin
        if stamped:
            sets.stamp_keys.update(fire_keys)
        by_tick = sets.by_tick if partial else None
        data, mixed = self, self._mixed_warning(sets, warn)

        def on_message(message: Any) -> None:
            if skip is not None and skip(reader.resolved):
                return
            decoded = decode(message)
            tick = tick_of(message) if tick_of is not None else None
            if decoded is None:  # this topic's message of the set is unusable: the set is spoilt
                if fire_keys:
                    if tick is not None and by_tick is not None:
                        for key in fire_keys:
                            by_tick.reject(key, tick)
                    rejected.update(fire_keys)
                    pending.difference_update(fire_keys)
                    if not pending:
                        drop_set()
                    elif partners is not None:
                        partners(origin)
                return
            now = monotonic()
            for (index, key), value in zip(slots, decoded, strict=True):
                values[index] = value
                stamps[key] = now
                ticks[key] = tick
            if frame_stamp is not None:
                sets.stamp = frame_stamp(message)
            if not fire_keys:
                return
            if tick is not None and by_tick is not None:
                entry = (data, slots, decoded, now)
                for key in fire_keys:
                    matched = by_tick.add(key, tick, entry)
                    if matched is not None:  # a message of each trigger with this tick
                        take_set(matched, sets, tick)
                        sets.reset()
                        fire(now)
                        return
            first = not pending.isdisjoint(fire_keys)  # the set's first message here
            pending.difference_update(fire_keys)
            if not pending:
                if rejected:
                    drop_set()
                elif sets.one_tick():
                    if by_tick is not None:
                        by_tick.clear()  # used by arrival: none may join a later set
                    fire(now)
                else:
                    mixed()
            elif partners is not None and first:  # (a newer one: the others were tried)
                partners(origin)

        return on_message

    def _mixed_warning(self, sets: InputSets, warn: Warn) -> Callable[[], None]:
        """``mixed()``: log that the node's triggers hold messages of different ticks."""
        name = self.name

        def mixed() -> None:
            warn(
                "\0mixed-ticks",
                f"node {name!r}: its triggers hold messages of different instants (ticks "
                f"{sets.mixed_ticks()}); it fires only on messages of one tick and waits for "
                "the partners. Inputs at different rates: make the slower ones newest-value "
                "inputs (parameter triggers)",
            )

        return mixed

    def _decoder(
        self, reader: TopicReader, read: Callable[[Any], list[Any]], warn: Warn, check: bool
    ) -> Callable[[Any], list[Any] | None]:
        """``decode(message)``: one value per port of ``reader``, or None for a message it
        drops (malformed, or NaN/inf with ``check``), counted and logged."""
        data, inputs, indices = self, self.plan.inputs, reader.indices
        topic = reader.topic or ""
        floats = float_ports(inputs)
        checked = [n for n, index in enumerate(indices) if index in floats and check]
        taken = self._received_cell(reader)

        def decode(message: Any) -> list[Any] | None:
            data.received += 1
            taken[0] += 1
            try:
                decoded = read(message)
            except Exception as e:  # MessageError, or one no codec expected: never die of it
                data.dropped += 1
                problem = e if isinstance(e, MessageError) else one_line(e)
                warn(topic, f"dropped a message on {reader.resolved}: {problem}")
                return None
            if checked and (bad := nonfinite(decoded, checked)):
                data.nonfinite_inputs += 1
                ports = [inputs[indices[n]].port for n in bad]
                warn(
                    "\0nonfinite-in",
                    f"node {data.name!r}: dropped a message on {reader.resolved}: input(s) "
                    f"{ports} hold NaN or infinite values (on_nonfinite: drop)",
                )
                return None
            return decoded

        return decode

    def _set_dropper(self, reader: TopicReader, sets: InputSets, warn: Warn) -> Callable[[], None]:
        """``drop_set()``: count and log a complete set with a rejected message, and start
        gathering the next one."""
        data = self

        def drop_set() -> None:
            data.incomplete_sets += 1
            warn(
                "\0incomplete-set",
                f"node {data.name!r}: dropped a set of inputs with a rejected message in it "
                f"(last on {reader.resolved}); the next complete set fires",
            )
            sets.reset()

        return drop_set

    def report_model_error(self, error: Exception, warn: Warn, logger: Any) -> None:
        """Count and log a run the model (or publishing its results) failed with ``error``."""
        self.errors += 1
        warn(
            f"\0model {self.name}",
            f"node {self.name!r}: the model failed and this run was skipped: "
            f"{one_line(error)} (the full error is logged at debug level)",
        )
        logger.debug(f"{self.name}: {type(error).__name__}: {error}")

    def report_nonfinite_outputs(self, bad: Sequence[int], warn: Warn) -> None:
        """Count and log a run whose outputs ``bad`` hold NaN/inf (nothing was published)."""
        self.nonfinite_outputs += 1
        ports = [self.plan.outputs[i].port for i in bad]
        warn(
            f"\0nonfinite-out {self.name}",
            f"node {self.name!r}: output(s) {ports} hold NaN or infinite values; nothing "
            "was published (on_nonfinite: drop)",
        )
