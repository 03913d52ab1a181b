"""A camera frame's header stamp is the tick of the runs it feeds (leapp_ros.node.input_sets):
an encoder's latent carries its frame's instant, and a node after it that gathers by stamp
(``sync: exact``) joins the latent with the sensors of that instant, however late it comes.

Without DDS: the rule on a data path, message by message. Over real DDS, in every mode: the
depth policy of test/support/sensors.py (an encoder on a depth frame; a policy on its latent,
an Odometry and height samples), ``sync: exact``. After a tick without a frame (the camera
skipped one: its Odometry and heights came alone), the next frame reaches the policy before
the sensors of its own stamp; the policy waits for them rather than running on the last
tick's, and its action equals eager PyTorch on the frame's tick.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from support.sensors import DEPTH_FRAME, POINTS, cloud, depth_policy, export_depth_policy
from support.sensors import image as depth_image
from support.sensors import odometry as odometry_message

from leapp_ros.node.data_path import NodeData
from leapp_ros.node.input_sets import InputSets
from leapp_ros.node.stamp_sync import StampSync, framed_nodes, gather_by_stamp
from leapp_ros.plan.bindings import IMAGE, JOINT_STATE, ODOMETRY
from leapp_ros.plan.pipeline import InputPlan, NodePlan
from leapp_ros.plan.settings import StartupError
from leapp_ros.testing import Deployment, GraphOptions, GraphUnderTest

F32 = "std_msgs/msg/Float32MultiArray"
TOLERANCE = 1e-5


def data_path(inputs: tuple[InputPlan, ...], triggers: frozenset[int]) -> tuple[NodeData, Any]:
    plan = NodePlan("n", None, inputs, ())  # type: ignore[arg-type]
    data = NodeData(plan=plan, call=lambda values: [], values=[None] * len(inputs))
    return data, InputSets(triggers, {})


def callback(data, sets, index, message_type, fired, *, stamped=False, tick_of=None):
    reader = SimpleNamespace(
        indices=[index],
        topic=f"t{index}",
        resolved=f"/p/t{index}",
        message_type=message_type,
        stamp_ns=lambda message: message[1],
    )
    return data.input_callback(
        reader,
        lambda message: [np.array([message[0]], np.float32)],
        keys=[index],
        sets=sets,
        fire=lambda now: (sets.reset(), fired.append(sets.tick())),
        warn=lambda key, text: None,
        check_nonfinite=True,
        tick_of=tick_of,
        stamped=stamped,
    )


def test_a_run_on_a_frame_carries_the_frames_header_stamp_as_its_tick():
    frame = InputPlan("depth", "external", "depth", IMAGE, "float32", (1,))
    data, sets = data_path((frame,), frozenset({0}))
    fired: list = []
    on_frame = callback(data, sets, 0, IMAGE, fired)
    on_frame((1.0, 1_000_000_123))
    on_frame((2.0, 2_000_000_456))
    assert fired == [1_000_000_123, 2_000_000_456]


def test_a_run_on_sensors_without_a_frame_carries_no_tick():
    joints = InputPlan("q", "external", "q", JOINT_STATE, "float32", (1,))
    data, sets = data_path((joints,), frozenset({0}))
    fired: list = []
    callback(data, sets, 0, JOINT_STATE, fired)((1.0, 5))
    assert fired == [None]


def test_frame_stamps_gathered_by_arrival_never_hold_a_set_back():
    """Two cameras' latents, stamped differently: a join by arrival runs on them (and carries
    one of their stamps on) instead of waiting for partners of one tick."""
    inputs = tuple(
        InputPlan(f"l{i}", "data_flow", f"e{i}/latent", F32, "float32", (1,), source=f"e{i}/l")
        for i in range(2)
    )
    data, sets = data_path(inputs, frozenset({0, 1}))
    fired: list = []
    tick = lambda message: message[1]  # noqa: E731
    left, right = (callback(data, sets, i, F32, fired, stamped=True, tick_of=tick) for i in (0, 1))
    left((1.0, 100))
    right((2.0, 107))
    assert len(fired) == 1 and fired[0] in (100, 107)


def pipeline(*nodes: NodePlan) -> SimpleNamespace:
    return SimpleNamespace(nodes=nodes)


def node(name: str, *inputs: InputPlan) -> NodePlan:
    return NodePlan(name, None, inputs, ())  # type: ignore[arg-type]


def flow(name: str, source: str) -> InputPlan:
    return InputPlan(name, "data_flow", name, F32, "float32", (1,), source=source)


def test_the_nodes_after_a_frame_carry_its_stamp_and_may_be_gathered_by_it():
    depth = InputPlan("depth", "external", "encoder/depth", IMAGE, "float32", (1,))
    odom = InputPlan("odom", "external", "policy/odom", ODOMETRY, "float32", (3,))
    plan = pipeline(
        node("encoder", depth),
        node("mlp", flow("latent", "encoder/latent")),
        node("policy", flow("code", "mlp/code"), odom),
        node("proprio", InputPlan("q", "external", "proprio/q", JOINT_STATE, "float32", (1,))),
        node("mixer", flow("p", "proprio/p")),
    )
    framed = framed_nodes(plan)
    assert framed == {"encoder", "mlp", "policy"}
    reader = SimpleNamespace(indices=[0], topic="code", message_type=F32, message_class=object)
    policy, mixer = plan.nodes[2], plan.nodes[4]
    assert gather_by_stamp(StampSync("exact"), "policy", reader, policy.inputs, [0], framed)
    with pytest.raises(StartupError, match="from a pipeline node that no camera frame feeds"):
        gather_by_stamp(StampSync("exact"), "mixer", reader, mixer.inputs, [0], framed)


# --- over real DDS ------------------------------------------------------------------------

NS = "/depth_policy"
DEPTH, ODOM, HEIGHTS = (f"{NS}/encoder/depth", f"{NS}/policy/odom", f"{NS}/policy/heights")


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    return export_depth_policy(tmp_path_factory.mktemp("depth_policy"))


def sensors(rng, tick: int) -> tuple[dict[str, object], tuple[torch.Tensor, ...]]:
    """The messages of one tick, all stamped ``tick`` seconds, and the tensors they carry."""
    metres = (rng.random(DEPTH_FRAME) * 6).astype(np.float32)
    linear = rng.standard_normal(3)
    heights = rng.standard_normal(POINTS).astype(np.float32)
    messages = {
        DEPTH: depth_image(metres, "32FC1"),
        ODOM: odometry_message(linear, rng.standard_normal(3), (1.0, 0.0, 0.0, 0.0)),
        HEIGHTS: cloud(heights, organized=False),
    }
    for message in messages.values():
        message.header.stamp.sec = tick
    tensors = (
        torch.from_numpy(metres).reshape(1, 1, *DEPTH_FRAME),
        torch.tensor(linear, dtype=torch.float32),
        torch.from_numpy(heights),
    )
    return messages, tensors


@pytest.mark.ros
@pytest.mark.parametrize("deployment", list(Deployment), ids=str)
def test_a_frame_after_a_gap_joins_the_sensors_of_its_own_stamp(export, deployment, tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"/**": {"ros__parameters": {"sync": "exact"}}}))
    rng = np.random.default_rng(3)
    with GraphUnderTest(export.path, GraphOptions(deployment, params_file=params)) as graph:
        messages, tensors = sensors(rng, 1)
        graph.send(messages, outputs=["policy/action"])
        gap, _ = sensors(rng, 2)  # the camera skips tick 2
        graph.publish({topic: gap[topic] for topic in (ODOM, HEIGHTS)})
        runs = graph.wait_received()["policy"]["runs"]
        late, late_tensors = sensors(rng, 3)
        graph.publish({DEPTH: late[DEPTH]})  # tick 3's frame first ...
        status = graph.wait_received()  # ... taken (processes, composed: its latent too)
        assert status["policy"]["runs"] == runs, "the frame ran with the sensors of tick 2"
        graph.send({topic: late[topic] for topic in (ODOM, HEIGHTS)}, outputs=["policy/action"])
        status = graph.wait_received()
        actions = graph.received("policy/action")
    assert status["policy"]["runs"] == runs + 1
    for action, inputs in zip(actions, (tensors, late_tensors), strict=True):
        with torch.no_grad():
            _, expected = depth_policy(*inputs, export.weights)
        difference = float((action - expected).abs().max())
        assert difference <= TOLERANCE, f"{action} differs from eager {expected}"
