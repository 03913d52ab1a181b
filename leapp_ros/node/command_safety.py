"""What a node does to keep its commands safe, as a part of
:class:`~leapp_ros.node.managed_node.ManagedNode`: :class:`CommandSafety`.

- the e-stop (``~/enable``, ``estop_topic``), the input watchdog (``input_timeout_ms``) and the
  safe action, by the rules of :class:`~leapp_ros.node.safety.CommandGate`;
- ramp-in (``ports.<port>.blend_s``, :mod:`leapp_ros.node.ramp`): an activation, an e-stop
  release, a watchdog recovery and a latch release blend the next commands in; a blend whose
  measured start is still to come holds commands back until it comes;
- out-of-domain guards (``ports.<port>.min`` / ``max`` of inputs, ``on_out_of_domain``,
  :mod:`leapp_ros.node.domain_guard`): ``drop`` skips the set, ``safe`` latches the safe
  action. A node that trips a ``safe`` guard says so on ``_leapp/guard`` (reliable, in the
  pipeline's namespace): every node of the graph with a safe action (the command nodes) latches
  on it and publishes its safe action at once, every period after, until an operator releases
  it (its ``~/enable`` true, or a lifecycle transition: ``activate``). A latched node gives no
  command; commands resume, blended in, on a set gathered after the release.
- a policy switch (:mod:`leapp_ros.node.policy_switch`) takes over just before a run it
  admits, and blends the next commands in from the last one;
- the stand-in hold (``stand_in``, :mod:`leapp_ros.node.stand_in_handshake`): an activated node
  gives no command, and no safe action, until the graph's stand-in
  (:mod:`leapp_ros.run.stand_in`) says it watches this process; commands then resume on a set
  gathered after that.

A subclass provides ``_data_paths``, ``_publish_safe_values``, ``_reset_sets``, ``_run``,
``_sets``, ``_gate``, ``_report_change``, ``_warn``, ``_lifecycle`` and ``_stand_in``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from leapp_ros.messages.topic_io import now_stamp
from leapp_ros.node.domain_guard import Violation
from leapp_ros.node.match_count import MatchCount
from leapp_ros.node.rate_limited_log import one_line
from leapp_ros.plan.graph_plan import GUARD_TOPIC

__all__ = ["DEFAULT_SAFE_PERIOD_S", "CommandSafety"]

DEFAULT_SAFE_PERIOD_S = 0.1


class CommandSafety:
    """E-stop, watchdog, safe action, ramp-in and out-of-domain latch of a pipeline node (see
    the module documentation)."""

    _guard_timer: Any = None
    _guard_links: MatchCount | None = None
    _guard_publisher: Any = None
    latch_cause: str | None = None  # what latched the safe action (a violation, described)
    _stand_in: Any = None  # the stand-in handshake (a StandInHandshake), if any
    _switch: Any = None  # the policy switch (node.policy_switch.PolicySwitch)

    def _create_guard_topic(self) -> None:
        """``_leapp/guard`` (at configure): a node with a ``safe`` guard publishes its trips
        there, a node with a safe action (an output guard) listens."""
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        paths = self._data_paths()
        profile = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        if any(_latches(data) for data in paths):
            self._guard_publisher = self.create_publisher(String, GUARD_TOPIC, profile)
        if any(data.guard is not None for data in paths):
            self._guard_links = MatchCount()
            self.create_subscription(
                String,
                GUARD_TOPIC,
                self._on_guard_message,
                profile,
                event_callbacks=self._guard_links.subscription_callbacks(),
            )

    def _on_enable(self, request: Any, response: Any) -> Any:
        self._set_estop(not request.data, "service ~/enable")
        if request.data:
            self._release_latch("service ~/enable")
        response.success = True
        response.message = "e-stop engaged: safe action" if self._gate.estop else "enabled"
        return response

    def _set_estop(self, engaged: bool, source: str) -> None:
        gate = self._gate
        if engaged and gate.engage():
            self.get_logger().warning(f"e-stop engaged ({source}): publishing the safe action")
            if gate.active:
                self._publish_safe_action()
        elif not engaged and gate.release(time.monotonic()):
            self._reset_sets()
            self._begin_blends()
            self.get_logger().info(f"e-stop released ({source}): commanding from a fresh set")
        else:
            return
        self._update_guard_timer()
        self._report_change()

    def _on_stand_in(self) -> None:
        """The stand-in's record came: end a hold once it watches this process (commands
        resume, blended in, on a set gathered after it)."""
        if self._gate.held and self._stand_in.clear() and self._gate.unhold(time.monotonic()):
            self._reset_sets()
            self._begin_blends()
            self._report_change()
            self.get_logger().info("the stand-in watches this process: commanding")

    def _safe_period(self) -> float:
        rate = getattr(getattr(self, "firing", None), "rate_hz", None)
        if rate:
            return 1.0 / rate
        return self._gate.timeout_s or DEFAULT_SAFE_PERIOD_S

    def _update_guard_timer(self) -> None:
        """An active node firing on inputs needs a timer for its watchdog and e-stop."""
        firing = getattr(self, "firing", None)
        gate = self._gate
        needed = (
            firing is not None
            and firing.mode == "inputs"
            and gate.active
            and (gate.timeout_s is not None or gate.stopped)
        )
        if needed and self._guard_timer is None:
            self._guard_timer = self.create_timer(self._safe_period(), self._on_guard_timer)
        elif not needed:
            self._drop_guard_timer()

    def _drop_guard_timer(self) -> None:
        if self._guard_timer is not None:
            self.destroy_timer(self._guard_timer)
            self._guard_timer = None

    def _on_guard_timer(self) -> None:
        gate = self._gate
        if gate.stopped:
            self._publish_safe_action()
            return
        was = gate.timed_out
        if gate.overdue(time.monotonic()):
            self._timed_out(was)

    def _run_if_admitted(self, now: float) -> None:
        """Run on the set that formed at ``now`` if the gate admits it (active, no e-stop,
        fresh after an activation or a release); a run after a timeout resumes commands."""
        gate = self._gate
        resumed = gate.timed_out
        sets = self._sets
        if gate.commanding and self._awaiting_start():
            return
        if gate.admit(now, sets.stamps, sets.triggers or sets.newest):
            if resumed:
                self._resumed()
            if self._switch.pending is not None:  # a new policy, warm: it answers this set
                self._switch.take_over(sets.tick())
            self._run()

    def _timer_guard(self, arrivals: Any) -> float | None:
        """A timer tick's check before the data path (``arrivals``: the triggering inputs'
        arrival times): None when the node is inactive, or publishes its safe action
        instead (e-stop, input timeout); else the tick's time."""
        gate = self._gate
        if not gate.active or gate.held:
            return None
        if gate.stopped:
            self._publish_safe_action()
            return None
        now = time.monotonic()
        was = gate.timed_out
        if gate.overdue(now, min(arrivals, default=now)):
            self._timed_out(was)
            return None
        return now

    def _timed_out(self, was: bool) -> None:
        """The watchdog fired: count it, publish the safe action, say so."""
        if not was:  # one timeout per stretch without inputs (safe_actions counts messages)
            for data in self._data_paths():
                data.timeouts += 1
        self._publish_safe_action()
        self._warn(
            "\0timeout",
            f"node {self.pipeline_node!r}: no input set for {self._gate.timeout_s * 1000:g} ms "
            "(input_timeout_ms): publishing the safe action until inputs come back",
        )
        if not was:
            self._report_change()

    def _resumed(self) -> None:
        """A set came after a timeout: normal commands again."""
        self.get_logger().info("inputs are back: commanding again")
        self._begin_blends()
        self._report_change()

    def _publish_safe_action(self) -> None:
        if self._lifecycle in ("unconfigured", "finalized"):
            return
        stamp = now_stamp(self.get_clock(), self._raw)
        for data in self._data_paths():
            if data.players is not None:  # no target between results from now on
                data.players.halt()
            if data.guard is None:
                continue
            values = data.guard.safe_values()
            if all(value is None for value in values):
                continue
            try:
                self._publish_safe_values(data, values, stamp)
            except Exception as e:  # never die of it: say so, and try again next period
                data.errors += 1
                self._warn(
                    f"\0safe {data.name}",
                    f"node {data.name!r}: could not publish the safe action: {one_line(e)}",
                )
                continue
            data.guard.published(values)
            if data.players is not None:
                data.players.halt(values)  # the next result starts from these
            data.safe_actions += 1

    # --- ramp-in --------------------------------------------------------------------------

    def _begin_blends(self, from_last: bool = False) -> None:
        """Blend the next commands of every port with ``blend_s`` in (``from_last``: from
        the last command, as after a policy switch, not from the measured position)."""
        for data in self._data_paths():
            if data.guard is not None and data.guard.ramps:
                data.guard.begin_blends(from_last)

    def _awaiting_start(self) -> bool:
        """Whether a pending ramp-in waits for its first measured position (then the node
        does not command yet, and says so)."""
        for data in self._data_paths():
            ports = [] if data.guard is None else data.guard.awaiting_start()
            if ports:
                self._warn(
                    f"\0awaiting {data.name}",
                    f"node {data.name!r}: ramp-in of {ports} waits for the first measured "
                    "position (blend_from): not commanding until it comes",
                )
                return True
        return False

    def _blended(self, data: Any) -> None:
        """After a run of ``data``: say when a blend found no start, report progress."""
        guard = data.guard
        if guard.unstarted:
            ports, guard.unstarted[:] = list(guard.unstarted), []
            self._warn(
                f"\0unstarted {data.name}",
                f"node {data.name!r}: ramp-in of {ports} skipped: no measured position "
                "(blend_from) and no command published yet to start from",
            )
        blending = bool(guard.blending())
        if blending or guard.was_blending:  # a ramp's progress, or its end
            guard.was_blending = blending
            self._report_change()

    # --- out-of-domain guards ---------------------------------------------------------------

    def _out_of_domain(self, data: Any, violation: Violation) -> None:
        """``data``'s inputs or results hold ``violation``: count it, and drop the set or
        latch the safe action (announced on ``_leapp/guard``)."""
        data.out_of_domain += 1
        data.last_violation = violation.record()
        text = f"node {data.name!r}: out of domain: {violation.describe()}"
        if violation.action == "drop":
            self._warn(f"\0domain {data.name}", f"{text}: dropped the set (on_out_of_domain)")
            self._report_change()
            return
        if self._guard_publisher is not None:
            from std_msgs.msg import String

            cause = {"node": self.get_fully_qualified_name(), "text": text}
            self._guard_publisher.publish(String(data=json.dumps(cause)))
        self._latch(text)

    def _on_guard_message(self, message: Any) -> None:
        cause = json.loads(message.data)
        if cause.get("node") != self.get_fully_qualified_name():
            self._latch(cause.get("text", "a node of the graph tripped a guard"))

    def _latch(self, text: str) -> None:
        """Latch the safe action (a node with one) and publish it at once."""
        if not any(data.guard is not None for data in self._data_paths()):
            return
        gate = self._gate
        self.latch_cause = text
        if gate.latch():
            self.get_logger().error(
                f"{text}: safe action latched until ~/enable true or a lifecycle transition"
            )
        if gate.active:
            self._publish_safe_action()
        self._update_guard_timer()
        self._report_change()

    def _release_latch(self, source: str) -> None:
        if self._gate.unlatch(time.monotonic()):
            self._reset_sets()
            self._begin_blends()
            self.get_logger().info(f"latch released ({source}): commanding from a fresh set")
            self._update_guard_timer()
            self._report_change()

    def _guard_fields(self) -> dict[str, Any]:
        """The status fields of the latch."""
        gate = self._gate
        return {
            "latched": gate.latched,
            "latch_cause": self.latch_cause if gate.latched else None,
            # publishers of trips this node listens to (None: it has no safe action)
            "guard_links": None if self._guard_links is None else self._guard_links(),
        }


def _latches(data: Any) -> bool:
    """Whether a value out of domain in data path ``data`` latches the safe action."""
    inputs = data.domain is not None and data.domain.latches
    return inputs or (data.guard is not None and data.guard.latches)
