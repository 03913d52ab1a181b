"""A node's health as ROS tools read it: ``diagnostic_msgs/DiagnosticArray`` on ``/diagnostics``.

:class:`HealthReport` turns the status records a node publishes on ``_leapp/status`` (one per
pipeline node) into one ``DiagnosticStatus`` each, named ``<ns>/<node>``, hardware id the
export's name, with a value for every counter, the firing rate and the age of the last input
set. The level says what happened since the last periodic report:

- ERROR: the model failed or gave NaN/inf results, the node failed to configure, it is not
  active although ``autostart`` says it should be (and no operator deactivated it), or an
  out-of-domain value latched its safe action (port, element and value named);
- WARN: messages dropped (malformed, NaN/inf, incomplete or stale sets), input timeouts,
  clamped or step-limited commands, out-of-domain values (the last one's port, element and
  value named), the e-stop engaged, the safe action being published, the node waiting for
  ``ros2 lifecycle`` to activate it, or for the stand-in to watch it
  (:mod:`leapp_ros.node.stand_in_handshake`);
- OK: otherwise.

A ramp-in in progress adds ``blending <port> <k>/<N> from <start>`` to the message (and the
value ``blending``), whatever the level. A policy switch (:mod:`leapp_ros.node.policy_switch`)
adds what it is doing (``loading``, ``warm``, ``on probation k/N after taking over at run R``,
``switched``; the value ``switch``); one that was rolled back is an ERROR and one that could
not load a WARN, until the next request.

The node publishes a report every second and, between them, whenever a level changes
(:meth:`HealthReport.changed`). rqt_robot_monitor, diagnostic_aggregator and
``ros2 topic echo /diagnostics`` read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from leapp_ros.node.data_path import COUNTERS
from leapp_ros.plan.pipeline import DIAGNOSTICS_TOPIC

__all__ = ["DIAGNOSTICS_TOPIC", "HealthReport"]

OK, WARN, ERROR = b"\x00", b"\x01", b"\x02"

_FAILURES = {"errors": "model failures", "nonfinite_outputs": "NaN/inf results"}
_WARNINGS = {
    "dropped": "malformed messages dropped",
    "nonfinite_inputs": "NaN/inf messages dropped",
    "incomplete_sets": "incomplete sets dropped",
    "stale": "stale sets skipped",
    "timeouts": "input timeouts",
    "clamped": "commands clamped",
    "step_limited": "commands step-limited",
}


class HealthReport:
    """Diagnostics of one ROS node's pipeline nodes (see the module documentation).

    Args:
        namespace: the node's namespace (``/`` for none): statuses are named
            ``<namespace>/<pipeline node>``.
    """

    def __init__(self, namespace: str):
        self._prefix = namespace.rstrip("/")
        self._counts: dict[str, dict[str, int]] = {}  # at the last periodic report
        self._time: float | None = None
        self._levels: dict[str, tuple] = {}  # level, blending, latched: as last published

    def statuses(
        self, records: Sequence[Mapping[str, Any]], now: float, *, periodic: bool = True
    ) -> list[Any]:
        """One ``DiagnosticStatus`` per record (``_leapp/status`` records, each with
        ``hardware_id``, ``expected_active`` and ``last_set_age_s``); ``periodic`` starts a new
        period (what counts as "since the last report")."""
        from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

        elapsed = None if self._time is None else max(now - self._time, 1e-9)
        statuses = []
        for record in records:
            name = f"{self._prefix}/{record['node']}"
            before = self._counts.get(name, {})
            delta = {c: record.get(c, 0) - before.get(c, 0) for c in COUNTERS}
            level, message = _level(record, delta)
            rate = delta["runs"] / elapsed if elapsed and before else 0.0
            age = record.get("last_set_age_s")
            values = [KeyValue(key=c, value=str(record.get(c, 0))) for c in COUNTERS]
            values += [
                KeyValue(key="firing_rate_hz", value=f"{rate:.3f}"),
                KeyValue(key="last_set_age_s", value="" if age is None else f"{age:.3f}"),
                KeyValue(key="lifecycle", value=str(record.get("lifecycle", ""))),
                KeyValue(key="estop", value=str(bool(record.get("estop"))).lower()),
                KeyValue(key="safe_action", value=str(bool(record.get("safe_action"))).lower()),
                KeyValue(key="latched", value=str(bool(record.get("latched"))).lower()),
                KeyValue(key="blending", value=_blending(record)),
                KeyValue(key="last_out_of_domain", value=_violation(record)),
                KeyValue(key="switch", value=_switch(record)),
            ]
            statuses.append(
                DiagnosticStatus(
                    level=level,
                    name=name,
                    message=message,
                    hardware_id=str(record.get("hardware_id", "")),
                    values=values,
                )
            )
            self._levels[name] = _shown(record, level)
            if periodic:
                self._counts[name] = {c: record.get(c, 0) for c in COUNTERS}
        if periodic:
            self._time = now
        return statuses

    def changed(self, records: Sequence[Mapping[str, Any]]) -> bool:
        """Whether a record's level differs from the one last published."""
        for record in records:
            name = f"{self._prefix}/{record['node']}"
            before = self._counts.get(name, {})
            delta = {c: record.get(c, 0) - before.get(c, 0) for c in COUNTERS}
            if _shown(record, _level(record, delta)[0]) != self._levels.get(name):
                return True
        return False

    def array(self, statuses: list[Any], stamp: Any) -> Any:
        """A ``DiagnosticArray`` of ``statuses`` stamped ``stamp``."""
        from diagnostic_msgs.msg import DiagnosticArray

        array = DiagnosticArray(status=statuses)
        array.header.stamp = stamp
        return array


def _level(record: Mapping[str, Any], delta: Mapping[str, int]) -> tuple[bytes, str]:
    """The level of one status record and its message."""
    lifecycle = record.get("lifecycle", "")
    errors = [f"{delta[c]} {text}" for c, text in _FAILURES.items() if delta.get(c, 0) > 0]
    if record.get("configure_error"):
        errors.insert(0, f"configure failed: {record['configure_error']}")
    if record.get("expected_active", True) and lifecycle != "active":
        errors.insert(0, f"{lifecycle or 'not started'}, but autostart is true")
    warnings = [f"{delta[c]} {text}" for c, text in _WARNINGS.items() if delta.get(c, 0) > 0]
    if record.get("latched"):
        errors.insert(
            0,
            f"safe action latched ({record.get('latch_cause')}) until ~/enable true or a "
            "lifecycle transition",
        )
    if delta.get("out_of_domain", 0) > 0:
        warnings.append(f"{delta['out_of_domain']} out of domain (last: {_violation(record)})")
    if record.get("estop"):
        warnings.insert(0, "e-stop engaged: safe action")
    elif record.get("safe_action") and not record.get("latched"):
        warnings.insert(0, "no input set within input_timeout_ms: safe action")
    if record.get("held"):
        warnings.insert(0, "active, waiting for the stand-in to watch this process")
    if not record.get("expected_active", True) and lifecycle != "active":
        warnings.insert(0, f"{lifecycle}: waiting for ros2 lifecycle to activate it")
    blending = [f"blending {_blending(record)}"] if record.get("blending") else []
    switch = record.get("switch") or {}
    if switch.get("state") == "rolled_back":
        errors.append(_switch(record))
    elif switch.get("state") == "failed":
        warnings.append(_switch(record))
    elif switch.get("state") in ("loading", "ready", "probation"):
        blending.append(_switch(record))
    if errors:
        return ERROR, "; ".join(errors + warnings + blending)
    if warnings:
        return WARN, "; ".join(warnings + blending)
    return OK, "; ".join(["active" if lifecycle == "active" else lifecycle, *blending])


def _blending(record: Mapping[str, Any]) -> str:
    """``joint_targets 2/5 from measured`` for each port in a ramp-in ("" for none)."""
    return ", ".join(
        f"{port} {p['command']}/{p['of']} from {p['from']}"
        for port, p in (record.get("blending") or {}).items()
    )


def _switch(record: Mapping[str, Any]) -> str:
    """The last policy switch, described ("" for none)."""
    switch = record.get("switch")
    if not switch:
        return ""
    state, export = switch["state"], switch["export"]
    if state == "loading":
        return f"policy switch: loading {export}"
    if state == "ready":
        return f"policy switch: {export} warm, takes over at the next run"
    first = (switch.get("first_run") or {}).get(record.get("node"))
    at = "" if first is None else f" (took over at run {first})"
    if state == "probation":
        done, of = switch["probation"]
        return f"policy switch to {export}: on probation {done}/{of}{at}"
    if state == "switched":
        return f"policy switched to {export}{at}"
    if state == "rolled_back":
        return (
            f"policy switch to {export} rolled back{at}: {switch['reason']}; running "
            f"{switch['previous']} again"
        )
    return f"policy switch to {export} {state.replace('_', ' ')}: {switch['reason']}"


def _violation(record: Mapping[str, Any]) -> str:
    """The last out-of-domain value, described ("" for none)."""
    last = record.get("last_out_of_domain")
    return "" if not last else f"{last['text']} (on_out_of_domain: {last['action']})"


def _shown(record: Mapping[str, Any], level: bytes) -> tuple:
    """What a change of publishes diagnostics at once: the level, a ramp-in, the latch, the
    state of a policy switch."""
    switch = (record.get("switch") or {}).get("state")
    return level, bool(record.get("blending")), bool(record.get("latched")), switch
