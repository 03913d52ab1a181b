"""``leapp-ros sim`` closes a graph that sees around a MuJoCo model, in every mode: depth frames,
Odometry and height samples reach the command's node each tick, a colour camera at a third of
the rate reaches its own node on its ticks only, and every command equals eager PyTorch on the
messages that produced it, all of them stamped with one physics state.

The robot and the policy are :mod:`support.sighted`'s: ``see`` turns the arm's position, the
belly camera's depth, the base's twist and the heights around it into the arm's target;
``look`` takes the overhead camera's colour frame (``every: 3``; every tick in the fused mode,
whose one node takes every input, so that a slower camera would hold the command back). The
simulator's bag of the graph loop is the record: its messages are decoded here with rclpy and
NumPy alone and fed to the traced functions run eagerly.
"""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import yaml
from support.sighted import (
    COLOUR,
    DEPTH,
    GRID,
    MAP,
    export_sighted_policy,
    look,
    see,
    write_sighted_model,
)

from leapp_ros.bag.bag_file import read_bag
from leapp_ros.run.deployment import Deployment
from leapp_ros.run.processes import load_plan
from leapp_ros.sim.sim_loop import simulate
from leapp_ros.sim.sim_map import load_map

pytestmark = pytest.mark.ros

pytest.importorskip("mujoco", reason="leapp-ros sim needs MuJoCo: pip install 'leapp_ros[sim]'")

TICKS = MAP["ticks"]
TOLERANCE = 1e-5
INPUTS = {name: f"/sighted/see/{name}" for name in ("joint_states", "depth", "odom", "heights")}
COLOUR_TOPIC, TARGET, MEAN = "/sighted/look/rgb", "/sighted/see/target", "/sighted/look/mean"


@pytest.fixture(scope="module", params=list(Deployment), ids=lambda d: d.value)
def loop(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("sighted")
    export, mjcf = export_sighted_policy(folder), write_sighted_model(folder)
    every = 1 if request.param is Deployment.FUSED else 3
    cameras = {**MAP["cameras"], "overhead": {"colour": "look/rgb", "every": every}}
    map_path = folder / "map.yaml"
    map_path.write_text(yaml.safe_dump({**MAP, "cameras": cameras}), encoding="utf-8")
    report = simulate(load_plan(export), mjcf, load_map(map_path), deployment=request.param,
                      bag=folder / "bag")  # fmt: skip
    return SimpleNamespace(report=report, bag=read_bag(folder / "bag"), every=every)


def typed(bag, message):
    from rclpy.serialization import deserialize_message

    from leapp_ros.messages.robot_codecs import message_class

    return deserialize_message(message.data, message_class(bag.types[message.topic]))


def ticks_of(bag) -> list[tuple[int, dict[str, object]]]:
    """The bag's messages by tick: its time (the outputs' come 1 us after the inputs') and
    the messages, typed."""
    ticks: dict[int, dict[str, object]] = defaultdict(dict)
    for message in bag.messages:
        time_ns = message.time_ns - (1000 if message.topic in (TARGET, MEAN) else 0)
        ticks[time_ns][message.topic] = typed(bag, message)
    return sorted(ticks.items())


def eager_inputs(tick: dict[str, object]) -> tuple[torch.Tensor, ...]:
    """``see``'s inputs from the tick's messages, by NumPy alone."""
    joints, image = tick[INPUTS["joint_states"]], tick[INPUTS["depth"]]
    odometry, cloud = tick[INPUTS["odom"]], tick[INPUTS["heights"]]
    depth = np.frombuffer(bytes(image.data), "<f4").reshape(image.height, image.width)
    twist = odometry.twist.twist
    velocity = [getattr(getattr(twist, part), axis) for part in ("linear", "angular")
                for axis in "xyz"]  # fmt: skip
    points = np.frombuffer(bytes(cloud.data), "<f4").reshape(cloud.height, cloud.width, 4)
    assert depth.shape == DEPTH and points.shape[:2] == GRID
    return (
        torch.tensor([joints.position[list(joints.name).index("arm")]], dtype=torch.float32),
        torch.from_numpy(depth.copy()),
        torch.tensor(velocity, dtype=torch.float32),
        torch.from_numpy(points[..., 2].copy()),
    )


def test_the_graph_loop_ran_every_tick_equal_to_the_leapp_pipeline_loop(loop):
    report = loop.report
    assert report.ok, report.format()
    assert len(report.graph.commands) == TICKS


def test_every_message_of_a_tick_carries_the_stamp_of_one_physics_state(loop):
    bag, every = loop.bag, loop.every
    ticks = ticks_of(bag)
    assert len(ticks) == TICKS
    starts = set()
    for index, (time_ns, tick) in enumerate(ticks):
        inputs = {topic: m for topic, m in tick.items() if topic not in (TARGET, MEAN)}
        stamps = {m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in inputs.values()}
        assert len(stamps) == 1, f"tick {index}: {stamps}"
        starts.add(time_ns - stamps.pop())  # the bag's time is the start plus simulated time
        expected = set(INPUTS.values()) | ({COLOUR_TOPIC} if index % every == 0 else set())
        assert set(inputs) == expected, f"tick {index}"
    assert len(starts) == 1, starts


def test_the_colour_camera_publishes_on_its_ticks_and_its_node_answers_each_frame(loop):
    bag, every = loop.bag, loop.every
    assert bag.count(COLOUR_TOPIC) == len(range(0, TICKS, every)) == bag.count(MEAN)
    for _, tick in ticks_of(bag):
        if COLOUR_TOPIC not in tick:
            assert MEAN not in tick
            continue
        frame = tick[COLOUR_TOPIC]
        assert (frame.encoding, frame.height, frame.width) == ("rgb8", *COLOUR)
        pixels = np.frombuffer(bytes(frame.data), np.uint8).reshape(*COLOUR, 3)
        expected = look(torch.from_numpy(pixels.copy())).numpy()
        np.testing.assert_allclose(tick[MEAN].data, expected, rtol=0, atol=TOLERANCE)


def test_every_command_equals_eager_pytorch_on_the_messages_that_produced_it(loop):
    report, bag = loop.report, loop.bag
    ticks = ticks_of(bag)
    for index, ((_, tick), command) in enumerate(zip(ticks, report.graph.commands, strict=True)):
        expected = see(*eager_inputs(tick)).numpy()
        np.testing.assert_allclose(tick[TARGET].data, expected, rtol=0, atol=TOLERANCE,
                                   err_msg=f"tick {index}")  # fmt: skip
        np.testing.assert_allclose(command, expected, rtol=0, atol=TOLERANCE)
    assert np.ptp(np.array(report.graph.commands)) > 1e-3, "the commands follow the inputs"
