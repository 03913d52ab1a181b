"""The closed loop of ``leapp-ros sim``: a MuJoCo robot driven by the live graph in lockstep,
and the same loop driven by :class:`leapp.Pipeline`.

Each control tick, in both loops: the robot's sensor messages are made
(:meth:`~leapp_ros.sim.mujoco_robot.SimulatedRobot.sensor_messages`), the controller answers
with the command, the robot applies it for ``decimation`` physics steps. The graph loop sends
the messages over the graph's topics (:class:`~leapp_ros.testing.GraphUnderTest`, isolated on
this machine, in any deployment) and waits for every output they drive; the ``leapp.Pipeline`` loop
decodes the same bytes as the nodes do and calls ``Pipeline.step``. A camera whose ``every``
skips ticks sends nothing on the others: the ``leapp.Pipeline`` loop keeps its last frame, the
graph's nodes that take it wait for the next, and :func:`check_rates` refuses a map where the
command would wait with them. ``leapp-ros sim`` runs an
export, not the user's PyTorch code, so ``leapp.Pipeline`` (the artifacts run in this process,
no ROS) is its reference: it tells a fault of the graph (transport, message codecs, modes)
from one of the artifacts, which both loops share; whether the artifacts compute what the
traced PyTorch functions do is for a test with those functions (eager PyTorch) to show. The
two robots start alike, so the commands of the two loops must be equal tick by tick;
:class:`SimReport` has the largest difference (and its tick), the falls of each loop (the
map's height or tilt rule), how far the base moved, how well it tracked ``command_velocity``
(in its own frame) and the joints their targets. The graph loop's messages (the inputs and
every output) go into a bag, stamped from the start time plus simulated time, and
:meth:`SimReport.plot` draws the command difference over simulated time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from leapp_ros.bag.bag_file import BagWriter
from leapp_ros.bag.bag_ticks import as_tensor, input_readers
from leapp_ros.messages.topic_io import OutputWriter
from leapp_ros.plan.pipeline import PUBLISHER_QOS, PipelinePlan, QosPlan
from leapp_ros.run.deployment import Deployment
from leapp_ros.sim.mujoco_robot import SimulatedRobot, TickState
from leapp_ros.sim.sim_map import SimMap, SimMapError
from leapp_ros.testing.failures import GraphAssertionError
from leapp_ros.testing.topics import driven_outputs

__all__ = ["LoopRecord", "SimReport", "check_rates", "run_graph", "run_pipeline", "simulate"]

_HARNESS_QOS = QosPlan("reliable", depth=10)  # what GraphUnderTest publishes inputs with


@dataclass(frozen=True)
class LoopRecord:
    """One loop: per tick the command (the command output's values) and the state after it."""

    commands: tuple[np.ndarray, ...]
    states: tuple[TickState, ...]
    sim_map: SimMap

    def _fallen(self) -> list[bool]:
        return [self.sim_map.fall.fallen(s.height, s.tilt_deg) for s in self.states]

    @property
    def falls(self) -> int:
        """How many times the base went from up to fallen."""
        fallen = self._fallen()
        return sum(
            now and not before for before, now in zip([False, *fallen], fallen, strict=False)
        )

    @property
    def fell_at_s(self) -> float | None:
        fallen = self._fallen()
        return next((s.time_s for s, f in zip(self.states, fallen, strict=True) if f), None)

    def mean(self, field: str) -> float | None:
        values = [getattr(s, field) for s in self.states if getattr(s, field) is not None]
        return float(np.mean(values)) if values else None

    def describe(self) -> str:
        parts = [f"{len(self.states)} ticks", f"{self.falls} fall(s)"]
        if self.fell_at_s is not None:
            parts[-1] += f" (first at {self.fell_at_s:.3f} s)"
        if self.states:
            parts.append(f"lowest base {min(s.height for s in self.states):.3f} m")
            parts.append(f"largest tilt {max(s.tilt_deg for s in self.states):.1f} deg")
            x, y, _ = self.states[-1].position
            parts.append(f"base ended at x {x:.3f} m, y {y:.3f} m")
        for field, text in (("velocity_error", "velocity tracking error (base frame)"),
                            ("joint_error", "joint target error")):  # fmt: skip
            mean = self.mean(field)
            if mean is not None:
                parts.append(f"mean {text} {mean:.4g}")
        return ", ".join(parts)


@dataclass(frozen=True)
class SimReport:
    """The outcome of :func:`simulate`; ``stopped`` says why the graph loop ended early."""

    namespace: str
    mode: str
    command: str
    ticks: int
    graph: LoopRecord
    pipeline: LoopRecord
    largest_difference: float
    where: int | None
    tolerance: float
    bag: Path | None
    stopped: str | None = None

    @property
    def ok(self) -> bool:
        """The graph loop ran every tick, equal to the leapp.Pipeline loop, and never fell."""
        return (
            self.stopped is None
            and len(self.graph.commands) == self.ticks
            and self.largest_difference <= self.tolerance
            and self.graph.falls == 0
        )

    def differences(self) -> list[tuple[float, float]]:
        """``(simulated time, largest |graph - leapp.Pipeline|)`` of every tick both loops
        ran."""
        pairs = zip(self.graph.commands, self.pipeline.commands, self.graph.states, strict=False)
        return [(s.time_s, float(np.abs(g - e).max(initial=0.0))) for g, e, s in pairs]

    def format(self) -> str:
        where = (
            "" if self.where is None or not self.largest_difference else f" (tick {self.where})"
        )
        lines = [
            f"leapp-ros sim: {self.namespace} ({self.mode}), command {self.command}, "
            f"{self.ticks} ticks",
            f"  graph loop: {self.graph.describe()}",
            f"  leapp.Pipeline loop: {self.pipeline.describe()}",
            f"  largest command difference, graph - leapp.Pipeline: "
            f"{self.largest_difference:.3g}{where} (tolerance {self.tolerance:g})",
        ]
        if self.bag is not None:
            lines.append(f"  bag of the graph loop: {self.bag}")
        if self.stopped:
            lines.append(f"  stopped after {len(self.graph.commands)} ticks: {self.stopped}")
        problems = []
        if self.largest_difference > self.tolerance:
            problems.append("the graph's commands differ from leapp.Pipeline's")
        if self.graph.falls:
            problems.append("the robot fell")
        if self.stopped or len(self.graph.commands) < self.ticks:
            problems.append("the graph loop did not finish")
        lines.append("sim FAILED: " + "; ".join(problems) if problems else "sim passed")
        return "\n".join(lines)

    def plot(self, path: str | os.PathLike[str]) -> Path:
        """The command difference per tick over simulated time, as a PNG (needs Pillow)."""
        from leapp_ros.bag.deviation_plot import write_deviation_plot

        return write_deviation_plot(
            path,
            {f"{self.command}: graph - leapp.Pipeline": self.differences()},
            title=f"leapp-ros sim {self.namespace} ({self.mode}): falls graph {self.graph.falls}"
            f", leapp.Pipeline {self.pipeline.falls}; dashed: tolerance {self.tolerance:g}",
            x_label="simulated time (s)",
            tolerance=self.tolerance,
        )


def _external_keys(plan: PipelinePlan) -> dict[str, list[str]]:
    """Absolute external input topic -> the ``node/port`` keys it feeds."""
    keys: dict[str, list[str]] = {}
    for node in plan.nodes:
        for port in node.inputs:
            if port.kind == "external" and port.topic is not None:
                keys.setdefault(plan.resolve(port.topic), []).append(f"{node.name}/{port.port}")
    return keys


def _awaited(plan: PipelinePlan, topics: Iterable[str], fused: bool = False) -> list[str]:
    """The outputs the graph publishes for messages on ``topics``: its nodes fire when each of
    their inputs has a new message; a fused node takes every external input."""
    keys = _external_keys(plan)
    topics = set(topics)
    if fused and topics != set(keys):
        return []
    return driven_outputs(plan, [key for topic in topics for key in keys[topic]])


def check_rates(plan: PipelinePlan, robot: SimulatedRobot, fused: bool = False) -> None:
    """That the topics published every tick make the graph publish its command: a camera
    whose ``every`` skips ticks must feed no node on the command's path (nor a fused node,
    which takes every input), which would wait for its next frame (every input of a node
    triggers it).

    Raises:
        SimMapError: the command would not come every tick (names the cameras).
    """
    slow = {s.topic: s for s in robot.cameras.streams if s.every > 1}
    every_tick = set(robot.topics) - set(slow)
    if not slow or robot.command_key in _awaited(plan, every_tick, fused):
        return
    cameras = ", ".join(f"{s.camera} on {topic} (every {s.every})" for topic, s in slow.items())
    where = "the fused node, which takes every input," if fused else "the command's nodes,"
    raise SimMapError(
        f"{robot.map.path}: camera(s) {cameras} feed {where} and a node fires when each of its "
        f"inputs has a new message: the command {robot.command_key} would come on the "
        "cameras' ticks only. Give those cameras every: 1"
        + ("" if fused else ", or feed them to nodes off the command's path")
    )


def run_pipeline(plan: PipelinePlan, mjcf: str | os.PathLike[str], sim_map: SimMap) -> LoopRecord:
    """The loop with :class:`leapp.Pipeline` as the controller."""
    from leapp import spec as spec_module
    from leapp.run.pipeline import Pipeline

    robot = SimulatedRobot(mjcf, sim_map, plan)
    try:
        pipeline = Pipeline(spec_module.load(plan.spec_path))
        readers = input_readers(plan)
        commands, states = [], []
        inputs = {}  # the newest value of every input: a camera's frame until its next one
        for _ in range(sim_map.ticks):
            for topic, data in robot.sensor_messages().items():
                node, reader = readers[topic]
                for position, value in zip(reader.indices, reader.read_raw(data), strict=True):
                    inputs[f"{node.name}/{node.inputs[position].port}"] = as_tensor(value)
            command = pipeline.step(inputs)[robot.command_key].numpy().copy()
            commands.append(command)
            states.append(robot.act(command))
    finally:
        robot.close()
    return LoopRecord(tuple(commands), tuple(states), sim_map)


def run_graph(
    graph: object,
    plan: PipelinePlan,
    mjcf: str | os.PathLike[str],
    sim_map: SimMap,
    bag: BagWriter | None = None,
) -> tuple[LoopRecord, str | None]:
    """The loop with the started ``graph`` (a GraphUnderTest) as the controller; the record
    and why it stopped early (None: it ran every tick)."""
    robot = SimulatedRobot(mjcf, sim_map, plan)
    try:
        return _graph_loop(graph, plan, robot, bag)
    finally:
        robot.close()


def _graph_loop(
    graph: object, plan: PipelinePlan, robot: SimulatedRobot, bag: BagWriter | None
) -> tuple[LoopRecord, str | None]:
    sim_map = robot.map
    fused = bool(getattr(graph, "fused", False))
    check_rates(plan, robot, fused)
    awaited = _awaited(plan, robot.topics, fused)
    writers = {key: OutputWriter(plan.node(key.split("/")[0]).output(key.split("/")[1]),
                                 raw=True) for key in awaited}  # fmt: skip
    if bag is not None:
        for topic, kind in robot.topics.items():
            bag.add_topic(topic, kind, [_HARNESS_QOS])
        for key, writer in writers.items():
            bag.add_topic(plan.resolve(key), writer.port.message_type, [PUBLISHER_QOS])
    commands, states, stopped = [], [], None
    start_ns = time.time_ns()
    try:
        for _ in range(sim_map.ticks):
            stamp = start_ns + round(robot.time_s * 1e9)
            messages = robot.sensor_messages()
            everything = len(messages) == len(robot.topics)
            driven = awaited if everything else _awaited(plan, messages, fused)
            published = graph.send(messages, outputs=driven)  # type: ignore[attr-defined]
            if bag is not None:
                for topic, data in messages.items():
                    bag.write(topic, stamp, data)
                for key, writer in writers.items():
                    if key in published:
                        bag.write(
                            plan.resolve(key), stamp + 1000, bytes(writer.write(published[key]))
                        )
            command = published[robot.command_key].numpy().copy()
            commands.append(command)
            states.append(robot.act(command))
    except GraphAssertionError as e:  # a timeout, a node that died
        stopped = str(e)
    return LoopRecord(tuple(commands), tuple(states), sim_map), stopped


def simulate(
    plan: PipelinePlan,
    mjcf: str | os.PathLike[str],
    sim_map: SimMap,
    *,
    deployment: Deployment | str = Deployment.PROCESSES,
    tolerance: float = 1e-5,
    bag: str | os.PathLike[str] | None = None,
    timeout_s: float = 10.0,
    startup_timeout_s: float = 60.0,
) -> SimReport:
    """Both loops (the leapp.Pipeline loop first) for ``plan``'s graph in ``deployment`` (a
    :class:`~leapp_ros.run.deployment.Deployment` or its name), the graph loop's messages into
    the new bag ``bag``.

    Raises:
        SimMapError, BagError, DependencyError: before anything starts.
    """
    from leapp_ros.testing import GraphUnderTest

    deployment = Deployment.parse(deployment)
    robot = SimulatedRobot(mjcf, sim_map, plan)  # every check
    try:
        check_rates(plan, robot, deployment is Deployment.FUSED)
        command = plan.resolve(robot.command_key)
    finally:
        robot.close()
    writer = BagWriter(bag) if bag is not None else None
    try:
        reference = run_pipeline(plan, mjcf, sim_map)
        graph = GraphUnderTest(
            plan, deployment, timeout_s=startup_timeout_s, step_timeout_s=timeout_s
        )
        try:
            graph.start()
            record, stopped = run_graph(graph, plan, mjcf, sim_map, writer)
        except GraphAssertionError as e:
            record, stopped = LoopRecord((), (), sim_map), str(e)
        finally:
            graph.close(check=False)
    finally:
        if writer is not None:
            writer.close()
    differences = [float(np.abs(g - e).max(initial=0.0))
                   for g, e in zip(record.commands, reference.commands, strict=False)]  # fmt: skip
    largest = max(differences, default=0.0)
    where = int(np.argmax(differences)) if differences else None
    return SimReport(
        plan.namespace,
        deployment.description,
        command,
        sim_map.ticks,
        record,
        reference,
        largest,
        where,
        tolerance,
        None if bag is None else Path(bag),
        stopped,
    )
