"""What a node runs on: the sets its triggers form, and its newest-value inputs.

A node's inputs fed over a topic are of two sorts (parameter ``triggers``,
:mod:`leapp_ros.plan.firing_settings`):

- **triggers** (by default every external and data-flow input): their messages form the
  *sets* that fire the node, one new message per trigger (``sync: arrival``), or by header
  stamp (``sync: exact | approximate``, :mod:`leapp_ros.node.stamp_sync`);
- **newest-value inputs** (the others): a run uses the latest message of each. When the set
  is complete, one that has not arrived yet, or that arrived more than ``max_input_age`` ago,
  makes the node skip the run and count it ``stale`` (the watchdog, watching commands, sees
  it); the set is used up, so the triggers must come anew.

On a timer every input is a newest-value input (that is how a timer, per node or per
pipeline, fits here: it asks :meth:`InputSets.unusable` before each run), except with
``sync: exact | approximate``: then the triggers are gathered by stamp as they come, a set
becomes their current values only once it is whole, and each tick runs on the newest whole set
(:attr:`InputSets.checked` holds them with the newest-value inputs: a tick needs a set, no
older than ``max_input_age``).

**Ticks.** A MultiArray can name its instant (:mod:`leapp_ros.messages.tick_label`). When the
triggers' messages carry ticks, a set is made of messages of one tick: a message is queued
by tick for each trigger it feeds (a :class:`~leapp_ros.node.stamp_sync.StampSync` on ticks,
``exact``, one queue per trigger: a packed message feeds several) and a set forms as soon as
each trigger has a message of that tick, however the instants interleave on the way (one
branch of a graph up to :data:`TICK_DEPTH` messages ahead of the other); messages that carry
none are gathered by arrival, as before. A set whose messages carry different ticks never
fires: the node waits for the partner of a tick (and says so in its log, at most once a
second). Ticks of newest-value inputs are not compared: a newest value is used whatever its
instant. The tick of a run (:meth:`InputSets.tick`) goes out on every MultiArray output, so
the nodes after it join only values of one instant too.

**Frames.** A camera frame (``sensor_msgs/Image``, ``PointCloud2``) says when it was taken in
its header stamp. A node fed by frames keeps the stamp of the newest one it took
(:attr:`InputSets.stamp`; gathered by stamp: the set's stamp) and, when its triggers carry no
tick, that stamp is the tick of its run: an encoder's latent carries its frame's instant, so a
node after it that gathers its triggers by stamp (``sync: exact | approximate``, the tick of a
MultiArray standing for its stamp) joins the latent with the sensors of the frame's instant,
however late the latent comes. Gathered by arrival, a frame's stamp carried as a tick goes on
from node to node but never holds a set back (:attr:`InputSets.stamp_keys`: the stamps of two
cameras differ): a node joins values of a frame's instant only when it gathers by stamp.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple

from leapp_ros.node.stamp_sync import StampSync
from leapp_ros.plan.pipeline import NodePlan

__all__ = ["TICK_DEPTH", "InputSets", "Unusable"]

Key = Hashable
TICK_DEPTH = 32  # messages kept per trigger while waiting for the partners of their tick


class Unusable(NamedTuple):
    """A newest-value input a run cannot use: its data path, its position there, whether it
    never arrived (else it is too old), and why in words."""

    data: Any
    index: int
    missing: bool
    why: str

    def describe(self) -> str:
        """``node 'x': newest-value input 'y' has not arrived yet``."""
        port = self.data.plan.inputs[self.index].port
        return f"node {self.data.name!r}: newest-value input {port!r} {self.why}"


class InputSets:
    """The triggers, pending set, arrival times, ticks and newest-value inputs of one ROS
    node (a ``leapp_node``, or a fused node, whose keys name a stage and an input).

    Args:
        triggers: the keys whose messages form sets (empty on a timer).
        newest: the newest-value inputs: per key, the data path holding it (counted
            ``stale`` for it) and its position in that data path's ``values``.
        max_age_s: the oldest an input may be when the node runs (None: no limit).
        gathered: on a timer, the triggers (gathered by stamp) as ``newest`` gives inputs.
    """

    def __init__(
        self,
        triggers: frozenset[Key],
        newest: Mapping[Key, tuple[Any, int]],
        max_age_s: float | None = None,
        gathered: Mapping[Key, tuple[Any, int]] | None = None,
    ):
        self.triggers = triggers
        self.newest = dict(newest)
        self.checked = {**(gathered or {}), **self.newest}  # what a tick of a timer needs
        self.max_age_s = max_age_s
        self.pending: set[Key] = set(triggers)  # triggers the set being gathered waits for
        self.rejected: set[Key] = set()  # triggers whose message of this set was rejected
        keys = [*triggers, *self.newest]
        self.stamps: dict[Key, float] = dict.fromkeys(keys, -float("inf"))  # arrival times
        self.ticks: dict[Key, int | None] = dict.fromkeys(keys)
        self.framed = False  # a camera frame feeds the node: its stamp is the runs' tick
        self.stamp: int | None = None  # the header stamp of its newest frame (or set)
        self.stamp_keys: set[Key] = set()  # triggers whose ticks are frames' stamps
        # ticked messages by trigger: one branch of a graph may run this many messages ahead
        self.by_tick = StampSync("exact", topics=list(triggers), depth=TICK_DEPTH)

    @classmethod
    def of_node(cls, plan: NodePlan, data: Any) -> InputSets:
        """The input sets of a ``leapp_node`` running ``plan`` (its firing rule applied) with
        the data path ``data``: its triggers and newest-value inputs, keyed by position."""
        triggers = plan.triggering()
        newest = {
            index: (data, index)
            for index, port in enumerate(plan.inputs)
            if port.triggers and index not in triggers
        }
        gathered = {index: (data, index) for index in triggers}
        timer = plan.firing.mode == "timer"
        return cls(triggers, newest, plan.firing.max_input_age_s, gathered if timer else None)

    def reset(self) -> None:
        """Start gathering a new set (after a run, a drop, an activation)."""
        self.pending.update(self.triggers)
        self.rejected.clear()

    def one_tick(self) -> bool:
        """Whether the triggers' values carry at most one tick (a set of one instant)."""
        ticks, stamp_keys = self.ticks, self.stamp_keys
        found = None
        for key in self.triggers:
            tick = ticks[key]
            if tick is not None and key not in stamp_keys:
                if found is not None and tick != found:
                    return False
                found = tick
        return True

    def tick(self) -> int | None:
        """The tick of the set the node runs on: the one its triggers carry, else the header
        stamp of its frame (None: none)."""
        ticks = self.ticks
        for key in self.triggers:
            if ticks[key] is not None:
                return ticks[key]
        return self.stamp

    def mixed_ticks(self) -> dict[Key, int]:
        """The triggers' ticks, for a message saying that they differ."""
        return {key: tick for key in self.triggers if (tick := self.ticks[key]) is not None}

    def old_triggers(self, now: float) -> list[Key]:
        """The triggers of the set received longer than ``max_age_s`` before ``now``."""
        age = self.max_age_s
        if not age:
            return []
        stamps = self.stamps
        return [key for key in self.triggers if now - stamps[key] > age]

    def unusable(self, now: float) -> Unusable | None:
        """The first newest-value input (on a timer: or trigger) a run at ``now`` cannot use
        (None: every one is fine): one that never arrived, or one older than ``max_age_s``."""
        age = self.max_age_s
        stamps = self.stamps
        for key, (data, index) in self.checked.items():
            if data.values[index] is None:
                return Unusable(data, index, True, "has not arrived yet")
            if age and now - stamps[key] > age:
                why = f"is {now - stamps[key]:.3g} s old (max_input_age {age:g} s)"
                return Unusable(data, index, False, why)
        return None
