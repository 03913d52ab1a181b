"""Soak the seed pipeline as a live ROS 2 graph, with faults injected, in every mode.

    python bench/soak.py [--minutes 10] [--rate 500] [--modes processes,composed,fused]
                         [--forms separate,packed] [--bursts N] [--kills N] [--outages N]
                         [--recovery-timeout S]

Each mode (one process per node, ``composed``, ``fused``) runs in a graph of its own, started
with restart on (``leapp_ros.run.runner``, as ``leapp-ros run --restart``), in a ROS domain of its
own with discovery on this machine, once per form of the client's inputs (``--forms``). A client
(bench/soak_client.py, one EventsExecutor) publishes ``state`` and ``velocity`` at ``--rate`` Hz
for ``--minutes``, as two messages (``separate``) or as one packed message named with its tick
(``packed``, the coherent form: README, coherent input sets), each tick's inputs recognizable
from the action they produce, while faults spread over the run (planned from
15 % to 75 % of it, a kill first; one at a time, each waiting for the previous one to recover,
the run going on past ``--minutes`` while one has still to):

- bad messages: a burst of malformed inputs on both input topics (wrong length, NaN, empty, a
  layout that is not the port's, 200 000 elements; ``--burst-rounds`` times), each in the slot
  of a tick, one every ``--burst-spacing`` ticks with no tick published between (so that it is
  the newest message for that many periods: the node inputs keep only the newest, and one
  period was too short for a node stalled by a loaded machine); the nodes must drop them
  (``dropped`` and ``nonfinite_inputs`` of their ``_leapp/status`` records rise) and keep
  answering;
- kill: SIGKILL to one process (a pipeline node's, alternately, in processes mode; the only
  one otherwise), which the runner restarts;
- publisher gone: the client destroys its input publishers and creates them again after
  ``--outage`` seconds.

Printed per mode and form: pairs sent and actions received, and how many actions were
computed from the state and the velocity of different ticks (mixed sets; with the packed form
also how many actions did not carry the tick of their inputs); loss beyond QoS (the node
inputs are best effort, depth 1: the fraction of ticks sent outside the fault windows whose
state reached no action; a fault window lasts from the fault until ``--settle`` seconds after
answers resumed);
wrong answers (every action is decoded to the inputs that produced it and compared with eager
PyTorch, computed in this process: must be 0); the restarts and each fault with the time
until answers resumed; VmRSS of each process at ``--warmup`` of the run (or as long after a
restart) and at its end (or just before it was killed), growth < 5 % being flat; the 99th
percentile latency per minute. The verdict line: PASS when there is no wrong answer (and, with
the packed form, no mixed set and every action carries its tick), memory is flat, every fault
recovered (answers resumed within ``--recovery-timeout``, bursts dropped, no
restart but those of the kills) and the graph stopped cleanly.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import math
import os
import signal
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from seed_export import export_seed
from soak_client import BAD_KINDS, FORMS, SoakClient, TickCode

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"

from leapp_ros.run.deployment import Deployment

MODES = {deployment.value: deployment for deployment in Deployment}
FLAT_GROWTH = 0.05
_LIVE_GUARD_S = 0.1  # answers this long after a fault ended come from inputs sent after it
_STATUS_WAIT_S = 2.5  # status records come every second
_HOUSEKEEPING_S = 0.25
_DRAIN_S = 1.0


@dataclass(frozen=True)
class SoakOptions:
    """One mode's run: ``seconds`` at ``rate_hz``, and the faults to inject."""

    seconds: float
    rate_hz: float = 500.0
    bursts: int = 1
    kills: int = 1
    outages: int = 1
    burst_rounds: int = 3  # each kind of bad message this many times per burst
    burst_spacing: int = 4  # ticks from one bad message to the next, none published between
    outage_s: float = 1.0
    recovery_timeout_s: float = 30.0
    settle_s: float = 1.0
    warmup: float = 0.1  # fraction of the run before the "start" RSS

    def schedule(self) -> list[Fault]:
        """The faults, interleaved and spread from 15 % to 75 % of the run."""
        counts = {"kill": self.kills, "bad messages": self.bursts}
        counts["publisher gone"] = self.outages
        order = [k for r in range(max(counts.values())) for k, n in counts.items() if r < n]
        span = 0.6 / max(1, len(order) - 1)
        return [Fault(kind, self.seconds * (0.15 + i * span)) for i, kind in enumerate(order)]


@dataclass
class Fault:
    """One injected fault; times in seconds since the run began."""

    kind: str
    planned_s: float
    target: str = ""  # what was killed, or the burst's message count
    at_s: float | None = None
    ended_s: float | None = None  # burst sent, process killed, publishers back
    resume_tick: int = 0  # the first tick sent after it ended
    first_tick: int = 0
    recovery_s: float | None = None  # from the end to the first answer to a later tick
    window_end_tick: int = 0
    counted: dict[str, int] = field(default_factory=dict)  # status counters it raised
    bad_sent: dict[str, int] = field(default_factory=dict)  # bad messages by counter
    problems: list[str] = field(default_factory=list)

    @property
    def recovered(self) -> bool:
        return self.recovery_s is not None and not self.problems

    def describe(self) -> str:
        when = "not injected" if self.at_s is None else f"{self.at_s:6.1f} s"
        what = f"{self.kind} {self.target}".strip()
        counted = ", ".join(
            f"{name} +{n} of {self.bad_sent[name]} sent" for name, n in self.counted.items()
        )
        resumed = (
            "no answer after it"
            if self.recovery_s is None
            else f"answers resumed {self.recovery_s:.3f} s after it ended"
        )
        notes = "; ".join(filter(None, [counted, resumed, *self.problems]))
        return f"{when}  {what}: {notes}"


@dataclass
class Incarnation:
    """One process's life, its VmRSS (kB) after the warm-up and last seen."""

    label: str
    pid: int
    born_s: float
    start_kb: int | None = None
    end_kb: int | None = None
    killed: bool = False
    by_minute: dict[int, int] = field(default_factory=dict)  # first sample in each minute

    @property
    def growth(self) -> float | None:
        if not self.start_kb or self.end_kb is None:
            return None
        return (self.end_kb - self.start_kb) / self.start_kb

    def describe(self) -> str:
        if self.growth is None:
            return f"{self.label} pid {self.pid}: lived too short for a start sample"
        end = "before SIGKILL" if self.killed else "at end"
        minutes = " ".join(f"{kb / 1024:.1f}" for kb in self.by_minute.values())
        return (
            f"{self.label} pid {self.pid}: {self.start_kb / 1024:.1f} MB -> "
            f"{self.end_kb / 1024:.1f} MB {end} ({self.growth:+.1%})"  # type: ignore[operator]
            + (f"; each minute: {minutes}" if len(self.by_minute) > 1 else "")
        )


@dataclass
class ModeReport:
    mode: str
    options: SoakOptions
    form: str = "separate"
    ran_s: float = 0.0  # longer than asked when a fault was still recovering
    sent: int = 0
    received: int = 0
    wrong: int = 0
    mixed: int = 0  # actions from the state of one tick and the velocity of another
    untagged: int = 0  # packed form: right answers not carrying the tick of their inputs
    lost: int = 0
    counted: int = 0  # ticks sent outside the fault windows
    p99_ms_by_minute: list[float] = field(default_factory=list)
    restarts: int = 0
    faults: list[Fault] = field(default_factory=list)
    memory: list[Incarnation] = field(default_factory=list)
    status: dict[str, int] = field(default_factory=dict)
    exit_code: int | None = None
    failure: str | None = None
    output_tail: str = ""

    @property
    def loss(self) -> float:
        return self.lost / self.counted if self.counted else math.nan

    @property
    def kills(self) -> int:
        return sum(1 for fault in self.faults if fault.kind == "kill" and fault.at_s is not None)

    @property
    def memory_flat(self) -> bool:
        growths = [i.growth for i in self.memory if i.growth is not None]
        return bool(growths) and max(growths) < FLAT_GROWTH

    @property
    def faults_recovered(self) -> bool:
        return all(f.recovered for f in self.faults) and self.restarts == self.kills

    def verdict(self) -> tuple[bool, str]:
        growths = [i.growth for i in self.memory if i.growth is not None]
        reasons = [
            f"{self.wrong} wrong answers",
            f"memory {'flat' if self.memory_flat else 'NOT flat'}"
            + (f" (max {max(growths):+.1%})" if growths else " (no sample)"),
            f"{sum(f.recovered for f in self.faults)} of {len(self.faults)} faults recovered",
            f"{self.restarts} restarts for {self.kills} kills",
        ]
        if self.exit_code != 0:
            reasons.append(f"graph stopped with exit code {self.exit_code}")
        if self.failure:
            reasons.append(self.failure)
        if self.form == "packed":
            reasons.insert(1, f"{self.mixed} mixed sets, {self.untagged} without their tick")
        ok = self.wrong == 0 and self.memory_flat and self.faults_recovered
        ok = ok and self.exit_code == 0 and not self.failure
        ok = ok and (self.form != "packed" or self.mixed == self.untagged == 0)
        return ok, ", ".join(reasons)

    def describe(self) -> str:
        o = self.options
        p99 = ", ".join(f"{v:.2f}" for v in self.p99_ms_by_minute) or "none"
        carried = (
            f"; {self.untagged} did not carry the tick of their inputs"
            if self.form == "packed"
            else ""
        )
        lines = [
            f"== {self.mode}, {self.form} inputs: {self.ran_s:.1f} s at {o.rate_hz:.0f} Hz, "
            "restart on ==",
            f"messages in: {self.sent} input pairs; out: {self.received} actions "
            f"({self.mixed} from the state and velocity of different ticks{carried})",
            f"loss beyond QoS: {self.loss:.3%} ({self.lost} of {self.counted} ticks outside "
            "the fault windows got no answer)",
            f"wrong answers (not eager PyTorch's): {self.wrong}",
            f"p99 latency per minute (ms): {p99}",
            f"restarts: {self.restarts} (kills: {self.kills})",
            f"status counters (all nodes, all lives): {self.status}",
            "faults:",
            *(f"  {fault.describe()}" for fault in self.faults),
            f"memory (VmRSS at {o.warmup:.0%} of the run, or after a restart, and at the end):",
            *(f"  {incarnation.describe()}" for incarnation in self.memory),
        ]
        ok, reasons = self.verdict()
        lines.append(f"verdict {self.mode}, {self.form}: {'PASS' if ok else 'FAIL'} ({reasons})")
        return "\n".join(lines)


class _Tail(io.TextIOBase):
    """The last lines the graph's processes wrote."""

    def __init__(self, lines: int = 200):
        self.lines: deque[str] = deque(maxlen=lines)

    def write(self, text: str) -> int:
        self.lines.extend(text.splitlines())
        return len(text)


class _RestartCount(logging.Handler):
    """Counts the runner's ``restarting it`` warnings."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "restarting it in" in record.getMessage():
            self.count += 1


def vm_rss_kb(pid: int) -> int | None:
    """VmRSS of ``pid`` in kB from /proc (None once it is gone)."""
    with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


class _Soak:
    """One mode's run: the tick loop, the faults, the memory samples."""

    def __init__(self, graph: Any, client: SoakClient, options: SoakOptions):
        self.graph, self.client, self.options = graph, client, options
        self.faults = options.schedule()
        self.total = int(options.seconds * options.rate_hz)  # ticks run (more when extended)
        extra_s = len(self.faults) * (options.recovery_timeout_s + options.outage_s + 3.0)
        self.sent_at = np.full(int((options.seconds + extra_s) * options.rate_hz), np.nan)
        self.memory: dict[int, Incarnation] = {}
        self.t0 = 0.0
        self._pending = list(self.faults)
        self._active: Fault | None = None
        self._step: Callable[[int, float], bool] | None = None  # the active fault's next step
        self._kills = 0
        self._slot_taken = False  # a fault published in this tick's slot instead of the tick
        self.failure: str | None = None

    def now(self) -> float:
        return time.monotonic() - self.t0

    def run(self) -> None:
        client, period = self.client, 1.0 / self.options.rate_hz
        self.t0 = time.monotonic()
        housekeeping, tick = 0.0, 0
        while tick < self.total or (self._busy() and tick < len(self.sent_at)):
            client.spin_until(self.t0 + tick * period)
            now = self.now()
            self._slot_taken = False
            self._advance_faults(tick, now)
            if client.publishing and not self._slot_taken:
                client.publish_tick(tick)
                self.sent_at[tick] = time.monotonic()
            if now >= housekeeping:
                housekeeping = now + _HOUSEKEEPING_S
                self._sample_memory(now)
                if self.graph.exit_code is not None:
                    self.failure = f"the graph stopped by itself: {self.graph.failure}"
                    break
            tick += 1
        self.total = tick
        client.spin_until(time.monotonic() + _DRAIN_S)
        self._sample_memory(self.now())
        for fault in self._pending:
            fault.problems.append("not injected: the run ended first")

    def _busy(self) -> bool:
        """Whether a fault is still to be injected or to recover (the run then goes on)."""
        return self._active is not None or bool(self._pending)

    def _advance_faults(self, tick: int, now: float) -> None:
        if self._active is None:
            if not self._pending or now < self._pending[0].planned_s:
                return
            self._active = self._pending.pop(0)
            self._active.at_s, self._active.first_tick = now, tick
            starts = {"bad messages": self._burst, "kill": self._kill}
            self._step = starts.get(self._active.kind, self._outage)(self._active)
        assert self._step is not None
        if self._step(tick, now):
            self._active = self._step = None

    def _ended(self, fault: Fault, tick: int, now: float) -> None:
        fault.ended_s, fault.resume_tick = now, tick + 1

    def _answered_since(self, fault: Fault) -> bool:
        arrivals = self.client.arrivals
        ended = self.t0 + (fault.ended_s or 0.0) + _LIVE_GUARD_S
        return bool(arrivals) and arrivals[-1] > ended

    def _timed_out(self, fault: Fault, now: float) -> bool:
        if now - (fault.ended_s or now) <= self.options.recovery_timeout_s:
            return False
        fault.problems.append(f"no answer within {self.options.recovery_timeout_s:.0f} s")
        return True

    def _burst(self, fault: Fault) -> Callable[[int, float], bool]:
        """Bad messages one every ``burst_spacing`` ticks, with no tick published between (so
        that each is the newest message for that many periods: the node inputs keep only the
        newest), then wait for the counters."""
        kinds = list(BAD_KINDS) * self.options.burst_rounds
        fault.target = f"({len(kinds)} per input topic)"
        topics = len(self.client.topics)
        for counter in BAD_KINDS.values():  # each kind on every input topic
            sent = fault.bad_sent.get(counter, 0)
            fault.bad_sent[counter] = sent + topics * self.options.burst_rounds
        before = self.client.status.totals()

        spacing = self.options.burst_spacing
        slots = len(kinds) * spacing  # after the fault's first tick: bad or quiet, none normal

        def step(tick: int, now: float) -> bool:
            offset = tick - fault.first_tick
            if 0 < offset <= slots:
                self._slot_taken = True
                if (offset - 1) % spacing == 0:
                    self.client.publish_bad(kinds[(offset - 1) // spacing])
                if offset == slots:  # the last one's quiet slots passed too
                    self._ended(fault, tick, now)
                return False
            if offset <= slots:
                return False
            if now - (fault.ended_s or now) < _STATUS_WAIT_S:
                return False
            after = self.client.status.totals()
            for name in fault.bad_sent:
                fault.counted[name] = after[name] - before[name]
                if fault.counted[name] <= 0:
                    fault.problems.append(f"no {name} counted in the status records")
            return self._answered_since(fault) or self._timed_out(fault, now)

        return step

    def _kill(self, fault: Fault) -> Callable[[int, float], bool]:
        labels = [label for label in self.graph.pids]
        label = labels[self._kills % len(labels)]
        self._kills += 1
        pid = self.graph.pids[label]
        if pid is None:
            fault.problems.append(f"'{label}' was not running")
            return lambda tick, now: True
        self._sample_memory(self.now())
        if pid in self.memory:
            self.memory[pid].killed = True
        os.kill(pid, signal.SIGKILL)
        fault.target = f"'{label}' (pid {pid})"
        self._ended(fault, fault.first_tick, self.now())
        return lambda tick, now: self._answered_since(fault) or self._timed_out(fault, now)

    def _outage(self, fault: Fault) -> Callable[[int, float], bool]:
        self.client.destroy_publishers()
        fault.target = f"for {self.options.outage_s:.1f} s"

        def step(tick: int, now: float) -> bool:
            if fault.ended_s is None:
                if now - (fault.at_s or now) >= self.options.outage_s:
                    self.client.create_publishers()
                    self._ended(fault, tick, now)
                return False
            return self._answered_since(fault) or self._timed_out(fault, now)

        return step

    def _sample_memory(self, now: float) -> None:
        warmup = self.options.warmup * self.options.seconds
        for label, pid in self.graph.pids.items():
            if pid is None:
                continue
            incarnation = self.memory.get(pid)
            if incarnation is None:
                if now >= warmup and not self.graph.is_ready():
                    continue  # a restarted process counts from when it is ready again
                born = 0.0 if now < warmup else now  # the first ones count from the run's start
                incarnation = self.memory[pid] = Incarnation(label, pid, born)
            rss = vm_rss_kb(pid)
            if rss is None:
                continue
            if incarnation.start_kb is None and now - incarnation.born_s >= warmup:
                incarnation.start_kb = rss
            incarnation.end_kb = rss
            incarnation.by_minute.setdefault(int(now // 60), rss)


def analyse(soak: _Soak, report: ModeReport) -> None:
    """Fill ``report`` from the answers: wrong ones, loss, latency, recoveries."""
    client, options = soak.client, soak.options
    answers = client.answers()
    good = answers.good
    arrivals, state_tick = answers.arrivals[good], answers.state_tick[good]
    velocity_tick = answers.velocity_tick[good]
    report.received, report.wrong = len(answers.wrong), int(answers.wrong.sum())
    report.mixed = int((state_tick != velocity_tick).sum())
    if client.form == "packed":
        report.untagged = int((answers.carried_tick[good] != state_tick).sum())
    sent_at = soak.sent_at[: soak.total]
    sent = ~np.isnan(sent_at)
    report.ran_s = soak.total / options.rate_hz
    report.sent = int(sent.sum())
    in_window = np.zeros(soak.total, bool)
    for fault in soak.faults:
        _recovery(fault, soak, arrivals, state_tick)
        in_window[fault.first_tick : fault.window_end_tick] = True
    answered = np.zeros(soak.total, bool)
    answered[state_tick] = True
    counted = sent & ~in_window
    report.counted, report.lost = int(counted.sum()), int((counted & ~answered).sum())
    sent_s = sent_at[np.maximum(state_tick, velocity_tick)] - soak.t0  # of the later input
    known = ~np.isnan(sent_s)
    latency_ms = (arrivals[known] - soak.t0 - sent_s[known]) * 1e3
    minute = (sent_s[known] // 60).astype(int)
    report.p99_ms_by_minute = [
        float(np.percentile(latency_ms[minute == m], 99)) for m in range(minute.max() + 1)
    ] if len(minute) else []  # fmt: skip
    report.faults, report.failure = soak.faults, soak.failure
    report.memory = sorted(soak.memory.values(), key=lambda i: (i.label, i.born_s))
    report.status = client.status.totals()


def _recovery(fault: Fault, soak: _Soak, arrivals: np.ndarray, ticks: np.ndarray) -> None:
    """When answers resumed after ``fault``, and where its window in ticks ends."""
    rate, end = soak.options.rate_hz, soak.total
    if fault.at_s is None or fault.ended_s is None:
        fault.window_end_tick = end if fault.at_s is not None else fault.first_tick
        return
    later = np.flatnonzero(ticks >= fault.resume_tick)
    timeout = soak.options.recovery_timeout_s
    if later.size and arrivals[later[0]] - soak.t0 - fault.ended_s <= timeout:
        fault.recovery_s = float(arrivals[later[0]] - soak.t0 - fault.ended_s)
        resumed = arrivals[later[0]] - soak.t0
    else:
        resumed = fault.ended_s + timeout
        if not any("no answer" in p for p in fault.problems):
            fault.problems.append(f"no answer within {timeout:.0f} s")
    fault.window_end_tick = min(end, int((resumed + soak.options.settle_s) * rate) + 1)


def run_mode(
    export: Path | str,
    mode: str,
    options: SoakOptions,
    code: TickCode,
    namespace: str = "/soak",
    form: str = "separate",
) -> ModeReport:
    """Soak ``export`` (the seed) in ``mode`` (a key of :data:`MODES`) with the client's
    inputs in ``form`` (one of :data:`FORMS`) and report."""
    from leapp_ros.run.processes import load_plan, plan_processes
    from leapp_ros.run.runner import RunningGraph
    from leapp_ros.testing import claim_domain_id, ros_env

    report = ModeReport(mode, options, form)
    plan = load_plan(export, namespace)
    domain_id, lock = claim_domain_id()
    tail = _Tail()
    restarts = _RestartCount()
    runner_log = logging.getLogger("leapp_ros.run.runner")
    runner_log.addHandler(restarts)
    processes = plan_processes(plan, MODES[mode])
    graph = RunningGraph(
        processes, name=f"soak {mode}", env=ros_env(domain_id, base={}), restart=True,
        stdout=tail, stderr=tail,  # type: ignore[arg-type]
    )  # fmt: skip
    client = None
    try:
        graph.start()
        if not graph.wait_ready(timeout_s=120):
            raise RuntimeError(f"graph not ready: {graph.failure}")
        client = SoakClient(domain_id, plan, code, form)
        client.prime()
        soak = _Soak(graph, client, options)
        soak.run()
        analyse(soak, report)
    except Exception as error:
        report.failure = f"{type(error).__name__}: {error}"
    finally:
        if client is not None:
            client.close()
        report.exit_code = graph.stop(timeout_s=60)
        runner_log.removeHandler(restarts)
        report.restarts = restarts.count
        lock.close()
        report.output_tail = "\n".join(tail.lines)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="per mode (default 10)")
    parser.add_argument("--rate", type=float, default=500.0, help="ticks per second")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated")
    parser.add_argument("--forms", default=",".join(FORMS),
                        help="client inputs: separate, packed (comma-separated)")  # fmt: skip
    parser.add_argument("--bursts", type=int, help="bad-message bursts (default: 1 a minute)")
    parser.add_argument("--kills", type=int, help="SIGKILLs (default: 1 per 3 minutes)")
    parser.add_argument("--outages", type=int, help="publisher outages (1 per 3 minutes)")
    parser.add_argument("--burst-rounds", type=int, default=3, help="of every kind per burst")
    parser.add_argument("--burst-spacing", type=int, default=4, metavar="TICKS",
                        help="from one bad message to the next, no tick between")  # fmt: skip
    parser.add_argument("--outage", type=float, default=1.0, help="seconds without publishers")
    parser.add_argument("--recovery-timeout", type=float, default=30.0, metavar="S")
    parser.add_argument("--settle", type=float, default=1.0, metavar="S",
                        help="a fault window lasts this long after answers resumed")  # fmt: skip
    parser.add_argument("--warmup", type=float, default=0.1, help="fraction before start RSS")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if unknown := sorted(set(modes) - MODES.keys()):
        parser.error(f"unknown modes {unknown}; choose among {list(MODES)}")
    forms = [f.strip() for f in args.forms.split(",") if f.strip()]
    if unknown := sorted(set(forms) - set(FORMS)):
        parser.error(f"unknown forms {unknown}; choose among {list(FORMS)}")
    minutes = args.minutes

    def count(value: int | None, per_minutes: float) -> int:
        return max(1, round(minutes / per_minutes)) if value is None else value

    options = SoakOptions(
        seconds=minutes * 60, rate_hz=args.rate, bursts=count(args.bursts, 1),
        kills=count(args.kills, 3), outages=count(args.outages, 3), outage_s=args.outage,
        burst_rounds=args.burst_rounds, burst_spacing=args.burst_spacing,
        recovery_timeout_s=args.recovery_timeout, settle_s=args.settle, warmup=args.warmup,
    )  # fmt: skip
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"soak: {len(modes)} mode(s) x {len(forms)} form(s), {options.seconds:.0f} s each at "
          f"{args.rate:.0f} Hz; {os.cpu_count()} CPUs, load average {load}")  # fmt: skip
    passed = True
    with tempfile.TemporaryDirectory(prefix="leapp_soak_") as folder:
        seed = export_seed(Path(folder))
        code = TickCode(seed.eager)
        mixed: dict[str, list[str]] = {}
        for form in forms:
            for mode in modes:
                report = run_mode(seed.spec_path, mode, options, code, form=form)
                print(report.describe(), flush=True)
                if report.failure:
                    print(f"last output lines of the graph:\n{report.output_tail}", flush=True)
                passed &= report.verdict()[0]
                share = report.mixed / report.received if report.received else math.nan
                mixed.setdefault(form, []).append(
                    f"{mode} {report.mixed} of {report.received} ({share:.1%})"
                )
    for form, counts in mixed.items():
        print(f"actions from inputs of different ticks, {form} inputs: {'; '.join(counts)}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
