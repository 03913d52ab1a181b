"""A simulated arm ramps in from a far pose, latches its safe action on a joint-velocity spike
until an operator releases it, and gets the stand-in's safe action when the process that
commands it is killed, in every deployment mode, and every command it gets is right.

The MuJoCo arm of :mod:`support.sim` runs in lockstep with the live graph, under the runner
with restarts, at the deployed QoS (:class:`support.blended_loop.BlendedLoop`). The nodes run
with ``input_timeout_ms`` 100, ``rate_hz`` 50, ``sync: exact`` where the robot's messages come
in (a restarted node can lose inputs in its first seconds, see
``test_closed_loop_crash.py``), and:

- on the targets ``safe_action: hold``, ``blend_s`` 0.2 (10 commands at 50 Hz) and
  ``blend_from: joint_pos``: commands ramp in from the measured joint positions;
- on the joint velocities ``min`` / ``max`` of +-6 rad/s with ``on_out_of_domain: safe``
  (the arm's own motion stays below that, ramp-ins included: an unblended activation from the
  far pose would pass 8 rad/s).

One run per mode, the operations one after the other, each ending on an event (a message, a
status record counting the inputs, a service's answer) within a generous overall limit:

1. ``activation``: the arm stands far from the policy's pose (0.5 rad off on a joint); the
   command node is deactivated before the first tick, ticks stream until its status counted
   a measured position, then ``activate``: the first command (answering the first tick after
   it) starts a blend from the measured position, and its 10 commands follow the ramp's
   formula (:mod:`support.blended_loop`) with no step larger than the blend allows;
2. ``spike_enable`` and ``spike_lifecycle``: one tick's JointState reads 20 rad/s on the
   elbow; the answer to that tick is the safe action (the loop waits for it, and the next
   tick is sent only after it); normal ticks go on, unanswered, until the command node's
   status counted their inputs while latched; then ``~/enable`` true, or ``deactivate`` and
   ``activate``, releases the latch: commands resume with the first tick after it, ramping
   in again;
3. ``estop``: ``~/enable`` false until its hold came twice (the ticks unanswered), then
   true: commands resume with the first tick after the release, ramping in;
4. ``sigkill``: SIGKILL of the process that runs the policy; the first tick after the kill
   is answered by the stand-in's hold; ticks go on unanswered until the restarted process
   commands again, ramping in (what ``test_closed_loop_crash.py`` proves of the stand-in
   itself, holds only and its handover, is not repeated here). Ticks are not awaited here, so
   a loaded machine can leave the restarted node without inputs for longer than
   ``input_timeout_ms``: its watchdog then holds and ramps in again, as it must; a ramp may
   end so only where the node's status counted that timeout, and the last one completes.

Every command is eager PyTorch on the inputs of the tick it answers, blended by the formula
wherever commands resume, or the hold; anything else is wrong. The arm is up at every tick
(its tip above 90 % of the lower of its start and reference heights; once the activation is
over, its blend and 30 ticks more, no joint more than 0.35 rad from the reference).
``pytest -s`` prints, per mode and operation, the ticks and milliseconds to the safe action,
the largest published step of each ramp-in with the step the blend allows and the step an
unblended command would have made, and the commands checked and wrong; then one line per
mode.
"""

from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from support.blended_loop import BlendedLoop
from support.closed_loop import TIMEOUT_S
from support.sim import REFERENCE, TICK_S, Arm, export_arm_policy, write_arm_model

from leapp_ros.run.processes import plan_processes
from leapp_ros.testing import Deployment, GraphOptions, GraphUnderTest

pytestmark = [pytest.mark.ros, pytest.mark.slow]

BLEND_S = 0.2
COMMANDS = 10  # ceil(BLEND_S * 50 Hz): the commands of one blend
FAR = tuple(r + d for r, d in zip(REFERENCE, (0.5, -0.4, 0.45), strict=True))
VELOCITY_MAX = 6.0  # rad/s, the guard's range
SPIKE = 20.0  # rad/s on the elbow, in one JointState
UP_FRACTION = 0.9
UP_DEVIATION = 0.35
NORMAL_TICKS = 30  # after each operation
LATCHED_TICKS = 10  # the inputs the latched node must count before the release
LATE_TICKS = 10  # after the kill: a command may answer one of this many unanswered ticks
# (sync: exact keeps 8 messages per topic: a restarted node whose JointStates come late
# answers an older tick)
LIMIT_TICKS = 3000  # the most ticks (at 50 Hz: a minute) an event may take
SYNCED = ("preprocess", "leapp_fused")  # the nodes that read the robot's messages
OPERATIONS = ("activation", "spike_enable", "spike_lifecycle", "estop", "sigkill")


def params_document() -> dict[str, Any]:
    targets = {"safe_action": "hold", "blend_s": BLEND_S, "blend_from": "joint_pos"}
    velocity = {"min": -VELOCITY_MAX, "max": VELOCITY_MAX, "on_out_of_domain": "safe"}
    document: dict[str, Any] = {
        "/**": {
            "ros__parameters": {
                "input_timeout_ms": TIMEOUT_S * 1000,
                "rate_hz": 1 / TICK_S,
                "ports": {"joint_targets": targets, "joint_vel": velocity},
            }
        }
    }
    for node in SYNCED:  # /**/: a bare name reaches only a node of the root namespace
        document[f"/**/{node}"] = {"ros__parameters": {"sync": "exact"}}
    return document


# --- the operations -----------------------------------------------------------------------


def commanding(loop: BlendedLoop, field: str) -> int:
    """``field`` summed over the latest status records of the commanding process."""
    latest = loop.latest_status()
    return sum(latest.get(name, {}).get(field, 0) for name in loop.commanding_nodes())


def activate_far(loop: BlendedLoop) -> None:
    """Deactivate the command node before the first tick, stream ticks until it has a
    measured position, activate: the first command ramps in from the far pose."""
    from lifecycle_msgs.msg import Transition

    fault = loop.begin("activation")
    loop.transition(Transition.TRANSITION_DEACTIVATE)
    loop.wait(lambda: loop.inactive_received() is not None, "the inactive node's status")

    def measured() -> bool:
        return sum(loop.latest_status()["policy"].get("measured_on", {}).values()) > 0

    assert loop.run_until(measured, LIMIT_TICKS, answer=False), (
        "the inactive command node never counted a measured position"
    )
    loop.transition(Transition.TRANSITION_ACTIVATE)
    fault.ended = time.monotonic()
    loop.run(COMMANDS + NORMAL_TICKS)
    loop.notes["activation"] = {"settled_at": loop.ticks}  # the arm near the policy's pose
    loop.largest_deviation = loop.arm.deviation()


def spike(loop: BlendedLoop, release: str) -> None:
    """One tick with a velocity spike (its answer: the safe action), normal ticks until the
    latched node counted their inputs, then the release."""
    from lifecycle_msgs.msg import Transition

    fault = loop.begin(f"spike_{release}")
    note = loop.notes[fault.name] = {"event_tick": loop.ticks}
    loop.tick(spike=SPIKE, until=lambda: fault.first_safe is not None)

    def latched() -> int | None:
        latest = loop.latest_status()
        records = [latest.get(name, {}) for name in loop.commanding_nodes()]
        if all(record.get("latched") for record in records):
            return commanding(loop, "received")
        return None

    before = loop.wait(latched, "the command node's status to say latched")
    note["latch_cause"] = loop.latest_status()["policy"].get("latch_cause")
    spikes = sum(name.startswith("spike") for name in (f.name for f in loop.faults))

    def out_of_domain() -> int:
        return loop.latest_status()["preprocess"].get("out_of_domain", 0)

    loop.wait(lambda: out_of_domain() >= spikes, f"the guard node to count {spikes} spikes")
    note["out_of_domain"] = out_of_domain()

    def counted() -> bool:
        return (latched() or 0) >= before + LATCHED_TICKS

    loop.run_until(counted, LIMIT_TICKS, answer=False)
    loop.wait(counted, f"the latched node to count the inputs of {LATCHED_TICKS} ticks")
    fault.proven_silent = len(fault.arrivals)
    if release == "enable":
        loop.set_enabled(True)
    else:
        loop.transition(Transition.TRANSITION_DEACTIVATE)
        loop.wait(lambda: loop.inactive_received() is not None, "the inactive node's status")
        loop.transition(Transition.TRANSITION_ACTIVATE)
    fault.ended = time.monotonic()
    loop.run(NORMAL_TICKS)


def estop(loop: BlendedLoop) -> None:
    """The e-stop through ``~/enable`` until its hold came twice, then its release."""
    fault = loop.begin("estop")
    loop.notes[fault.name] = {"event_tick": loop.ticks}
    loop.set_enabled(False)
    loop.run_until(lambda: fault.count("safe") >= 2, LIMIT_TICKS, answer=False)
    loop.set_enabled(True)
    fault.ended = time.monotonic()
    loop.run(NORMAL_TICKS)


def kill(loop: BlendedLoop, label: str) -> None:
    """SIGKILL the process that runs the policy; the first tick after it gets the stand-in's
    hold; ticks until the restarted process commanded, then its ramp-in and normal ticks."""
    fault = loop.begin("sigkill")
    note = loop.notes[fault.name] = {"event_tick": loop.ticks, "old_pid": loop.graph.pids[label]}
    loop.late = LATE_TICKS
    os.kill(note["old_pid"], signal.SIGKILL)
    fault.started = time.monotonic()
    loop.tick(answer=False, until=lambda: fault.first_safe is not None)

    def resumed() -> bool:  # a command after the first hold: the restarted process's
        kinds = [kind for _, kind in fault.arrivals]
        return "safe" in kinds and "command" in kinds[kinds.index("safe") :]

    assert loop.run_until(resumed, LIMIT_TICKS, answer=False), (
        f"no command from the restarted process within {LIMIT_TICKS} ticks; "
        f"{len(loop.wrong)} wrong: {loop.wrong[:3]}"
    )

    def ramped_in() -> bool:  # the blend in progress (a watchdog's too) is over
        return loop.ramp is None and not loop.resuming

    loop.run_until(ramped_in, LIMIT_TICKS, answer=False)
    loop.run(NORMAL_TICKS, answer=False)
    note["new_pid"] = loop.graph.pids[label]
    interrupted = sum(ramp.interrupted for ramp in loop.ramps_of(fault.name))

    def timeouts() -> int | None:  # those the restarted process counted, once it counted all
        record = loop.latest_status().get("policy", {})
        counted = record.get("timeouts", 0)
        return counted if record.get("pid") == note["new_pid"] and counted >= interrupted else None

    if interrupted:
        loop.wait(timeouts, f"the restarted process's status to count {interrupted} timeouts")
    note["timeouts"] = timeouts()


# --- the run per mode, and its report -----------------------------------------------------


@pytest.fixture(scope="module")
def arm_export(tmp_path_factory):
    return export_arm_policy(tmp_path_factory.mktemp("arm_export"))


@pytest.fixture(scope="module")
def report():
    """Per mode, the figures of :func:`figures`; printed once every mode ran."""
    rows: dict[str, dict[str, Any]] = {}
    yield rows
    if not rows:
        return
    lines = ["", "closed loop through robot operations"]
    for mode, figures in rows.items():
        for name, fault in figures["operations"].items():
            lines.append(f"  {mode:<10} {name:<16} {fault}")
        lines.append(f"  {mode:<10} {'whole run':<16} {figures['run']}")
    lines.append("")
    for mode, figures in rows.items():
        lines.append(f"{mode}: {figures['line']}")
    print("\n".join(lines))


def figures(loop: BlendedLoop) -> dict[str, Any]:
    """Per operation: the ticks and ms to the safe action, each ramp-in's largest step with
    its bound and the unblended step, the commands checked and wrong; and one line."""
    operations, parts = {}, []
    for fault in loop.faults:
        if fault.name not in OPERATIONS:
            continue
        entry: dict[str, Any] = {
            "checked": len(fault.arrivals),
            "wrong": fault.count("wrong"),
        }
        text = []
        if fault.name in loop.safe_ticks and "event_tick" in loop.notes.get(fault.name, {}):
            tick, moment = loop.safe_ticks[fault.name]
            entry["safe_after_ticks"] = tick - loop.notes[fault.name]["event_tick"]
            entry["safe_after_ms"] = round(1000 * (moment - fault.started), 1)
            text.append(
                f"safe action {entry['safe_after_ticks']} ticks / {entry['safe_after_ms']} ms"
            )
        ramps = [ramp.summary() for ramp in loop.ramps_of(fault.name)]
        entry["ramps"] = ramps
        for ramp in ramps:
            text.append(
                f"ramp {ramp['commands']}/{ramp['of']} from {ramp['from']} (first command for "
                f"tick {ramp['first_tick']}) largest step {ramp['largest_step_rad']}"
                f" (bound {ramp['bound_rad']}, unblended {ramp['unblended_step_rad']}) rad"
            )
        operations[fault.name] = entry
        parts.append(f"{fault.name}: " + ", ".join(text))
    checked = sum(len(fault.arrivals) for fault in loop.faults)
    run = {"ticks": loop.ticks, "checked": checked, "wrong": len(loop.wrong)}
    run["fastest_joint_rad_s"] = round(loop.fastest, 2)
    run["largest_lag_ticks"] = loop.largest_lag
    line = "; ".join(parts) + f"; {checked} commands checked, {len(loop.wrong)} wrong"
    return {"operations": operations, "run": run, "line": line}


@pytest.fixture(scope="module", params=list(Deployment), ids=str)
def run(request, arm_export, report, tmp_path_factory):
    """The arm through every operation by the graph in one deployment."""
    folder = tmp_path_factory.mktemp(f"operations_{request.param}")
    params = folder / "params.yaml"
    params.write_text(yaml.safe_dump(params_document()), encoding="utf-8")
    options = GraphOptions(request.param, params_file=params)
    arm = Arm(write_arm_model(folder), FAR)
    start_tip = arm.tip_height()
    with (
        open(folder / "nodes.log", "w", encoding="utf-8") as log,
        GraphUnderTest(arm_export.path, options, restart=True, output=log) as graph,
    ):
        (label,) = [p.label for p in plan_processes(graph.plan, options)
                    if "policy" in p.pipeline_nodes]  # fmt: skip
        loop = BlendedLoop(graph, arm_export.policy, arm, commands=COMMANDS)
        synced = "leapp_fused" if graph.fused else "preprocess"
        assert loop.parameter(synced, "sync") == "exact", f"{synced} does not sync by stamp"
        activate_far(loop)
        spike(loop, "enable")
        spike(loop, "lifecycle")
        estop(loop)
        kill(loop, label)
        tail = "\n".join(graph.output.splitlines()[-30:])
    report[request.param.value] = figures(loop)
    faults = {fault.name: fault for fault in loop.faults}
    return SimpleNamespace(loop=loop, faults=faults, start_tip=start_tip, tail=f"\n{tail}")


# --- the rules ----------------------------------------------------------------------------


def test_every_command_is_eager_blended_as_documented_or_the_safe_action(run):
    loop = run.loop
    assert not loop.wrong, f"{len(loop.wrong)} wrong commands:\n" + "\n".join(loop.wrong[:10])
    assert not loop.unblended, f"commands resumed without a ramp-in: {loop.unblended}"
    assert not loop.missing, f"ticks without a command: {loop.missing}{run.tail}"
    for ramp in loop.ramps:
        assert not ramp.over, f"a step beyond the blend during {ramp.fault}: {ramp.over}"


def test_activation_ramps_in_from_the_far_pose_without_a_step_beyond_the_blend(run):
    fault = run.faults["activation"]
    kinds = fault.kinds_before_end()
    assert kinds == [], f"the inactive node published {kinds}"
    ramp = run.loop.ramps_of("activation")[0]  # (a stalled machine's watchdog adds more)
    assert ramp.complete and not ramp.interrupted, ramp.summary()
    assert ramp.origin.startswith("tick"), f"started from {ramp.origin}, not a measured position"
    assert fault.first_command_tick == fault.first_tick_after, (
        f"commands resumed with tick {fault.first_command_tick}, not with the first after "
        f"activate ({fault.first_tick_after})"
    )
    # the pose is far: an unblended first command would have stepped several times as far
    assert ramp.unblended > 3 * max(ramp.steps), ramp.summary()


def test_the_arm_stays_up_and_its_own_motion_stays_inside_the_guard(run):
    loop = run.loop
    floor = UP_FRACTION * min(run.start_tip, loop.arm.reference_tip_height())
    assert loop.lowest_tip >= floor, f"the tip fell to {loop.lowest_tip:.3f} m (< {floor:.3f})"
    settled = loop.notes["activation"]["settled_at"]
    assert loop.largest_deviation <= UP_DEVIATION, (
        f"a joint {loop.largest_deviation:.3f} rad off after tick {settled}"
    )
    assert loop.fastest < VELOCITY_MAX, f"the arm moved at {loop.fastest:.2f} rad/s"


@pytest.mark.parametrize("release", ["enable", "lifecycle"])
def test_a_velocity_spike_is_answered_by_the_safe_action_latched_until_released(run, release):
    fault = run.faults[f"spike_{release}"]
    note = run.loop.notes[fault.name]
    safe_tick, _ = run.loop.safe_ticks[fault.name]
    assert safe_tick == note["event_tick"], (
        f"the safe action came with tick {safe_tick}, not as the spike's answer "
        f"(tick {note['event_tick']})"
    )
    latched = [kind for _, kind in fault.arrivals[: fault.proven_silent]]
    assert latched and set(latched) == {"safe"}, f"while latched: {latched}"
    assert set(fault.kinds_before_end()) == {"safe"}, fault.kinds_before_end()
    assert "joint_vel[elbow] = 20" in (note["latch_cause"] or ""), note["latch_cause"]
    spikes = 1 + list(run.faults).index(fault.name) - list(run.faults).index("spike_enable")
    assert note["out_of_domain"] == spikes, f"out_of_domain {note['out_of_domain']}"
    assert fault.commands_during == 0, "a tick sent while latched was answered"
    assert fault.first_command_tick == fault.first_tick_after, (
        f"commands resumed with tick {fault.first_command_tick}, not with the first after "
        f"the release ({fault.first_tick_after})"
    )
    ramps = run.loop.ramps_of(fault.name)
    assert ramps and ramps[0].complete and not ramps[0].interrupted, [r.summary() for r in ramps]


def test_an_estop_gives_only_the_hold_and_its_release_ramps_in(run):
    fault = run.faults["estop"]
    kinds = fault.kinds_before_end()
    assert kinds.count("safe") >= 2 and set(kinds) == {"safe"}, f"while e-stopped: {kinds}"
    assert fault.first_command_tick == fault.first_tick_after, (
        f"commands resumed with tick {fault.first_command_tick}, not with the first after "
        f"the release ({fault.first_tick_after})"
    )
    ramps = run.loop.ramps_of("estop")
    assert ramps and ramps[0].complete and not ramps[0].interrupted, [r.summary() for r in ramps]


def test_a_killed_command_process_gets_the_safe_action_with_the_next_tick_and_ramps_in(run):
    fault = run.faults["sigkill"]
    note = run.loop.notes[fault.name]
    assert note["new_pid"] != note["old_pid"], "the process was not restarted"
    safe_tick, _ = run.loop.safe_ticks[fault.name]
    assert safe_tick == note["event_tick"], (
        f"the first hold came with tick {safe_tick}, not the first after the kill "
        f"({note['event_tick']})"
    )
    kinds = [kind for _, kind in fault.arrivals]
    assert kinds[0] == "safe", f"after the kill: {kinds[:5]}"
    back = kinds.index("command")
    assert set(kinds[:back]) == {"safe"}, "only holds until the restarted process commanded"
    ramps = run.loop.ramps_of("sigkill")
    summaries = [ramp.summary() for ramp in ramps]
    assert ramps and ramps[-1].complete, summaries
    assert all(ramp.complete or ramp.interrupted for ramp in ramps), summaries
    interrupted = sum(ramp.interrupted for ramp in ramps)  # by a hold, each: its watchdog's?
    assert interrupted <= (note["timeouts"] or 0), (
        f"{interrupted} ramp(s) ended by a hold, {note['timeouts']} timeout(s) counted: "
        f"{summaries}"
    )
    assert all(r.origin.startswith("tick") for r in ramps), f"started from {summaries}"
