"""The rules of outputs played out at their own rates, without ROS
(:mod:`leapp_ros.plan.output_rates`, :class:`leapp_ros.node.target_player.TargetPlayer`); the
same over real DDS are in test_target_rates.py, test_target_halt.py and test_action_chunks.py."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support.rates import expected_targets, export_chain, export_chunker

from leapp_ros.node.target_player import TargetPlayer
from leapp_ros.plan.output_rates import OutputRate, consumed_outputs, output_rates, played_port
from leapp_ros.plan.pipeline import Firing
from leapp_ros.plan.settings import StartupError
from leapp_ros.run.processes import load_plan


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    return load_plan(export_chain(tmp_path_factory.mktemp("chain")))


@pytest.fixture(scope="module")
def chunker(tmp_path_factory):
    return load_plan(export_chunker(tmp_path_factory.mktemp("chunker")).path)


def play(rate: OutputRate, results: list, ticks: int) -> list[np.ndarray]:
    player = TargetPlayer(rate, "float64")
    out = []
    for result in results:
        player.target(result)
        for _ in range(ticks):
            value = player.next()
            player.published(value)
            out.append(value)
    return out


def test_hold_publishes_each_result_until_the_next():
    rate = OutputRate("a", 0, 100.0, "hold", 0.1)
    got = play(rate, [np.array([1.0, 2.0]), np.array([3.0, 4.0])], 4)
    assert [v.tolist() for v in got] == [[1.0, 2.0]] * 4 + [[3.0, 4.0]] * 4


def test_linear_goes_from_the_last_published_value_to_the_result_in_n_steps():
    rate = OutputRate("a", 0, 100.0, "linear", 0.04)  # n = 4
    got = play(rate, [np.array([0.0]), np.array([4.0]), np.array([0.0])], 6)
    assert [v.item() for v in got] == [0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 4, 4, 3, 2, 1, 0, 0, 0]


def test_a_new_result_replaces_the_rest_of_the_ramp_from_the_value_published_last():
    rate = OutputRate("a", 0, 100.0, "linear", 0.04)
    got = play(rate, [np.array([0.0]), np.array([4.0]), np.array([-2.0])], 2)
    assert [v.item() for v in got] == [0, 0, 1, 2, 1, 0]


def test_a_chunk_is_played_point_by_point_as_documented():
    chunk = np.arange(8.0).reshape(4, 2)
    for mode in ("hold", "linear"):
        rate = OutputRate("c", 0, 100.0, mode, 0.03, chunk=True)  # n = 3 rows per point
        got = play(rate, [chunk], 15)
        want = expected_targets(chunk, chunk[0], 3.0, 15, linear=mode == "linear")
        np.testing.assert_allclose(got, want)
        assert got[-1].tolist() == [6.0, 7.0], "the last point is held"


def test_a_played_chunk_writes_one_row_per_message(chunker):
    port = chunker.node("chunker").output("rows")
    row = played_port(port, OutputRate("rows", 1, 10.0, "hold", 1.0, chunk=True))
    assert (row.shape, row.labels, row.binding.elements) == ((2,), ("dim1",), ("hip", "knee"))
    assert played_port(port, None) is port


def rates(plan, node: str, firing: Firing | None = None, **given):
    return output_rates(given, plan.node(node), firing or plan.node(node).firing,
                        consumed_outputs(plan, node))  # fmt: skip


@pytest.mark.parametrize(
    ("port", "given", "says"),
    [
        ("command", {"interpolate": "linear"}, "interpolate needs .*output_rate_hz"),
        ("command", {"interpolate": "cubic", "output_rate_hz": 9}, "must be one of"),
        ("command", {"output_rate_hz": -1}, "must be a number >= 0"),
        ("command", {"output_rate_hz": 5}, "slower than the points it plays"),
    ],
)
def test_bad_rate_parameters_are_refused_naming_the_parameter(chain, port, given, says):
    with pytest.raises(StartupError, match=rf"ports\.{port}\.\w+.*{says}|{says}"):
        rates(chain, "post", **{port: given})


def test_linear_needs_the_rate_results_come_at(chain):
    firing = Firing()  # on inputs, no rate known
    given = {"output_rate_hz": 100, "interpolate": "linear"}
    with pytest.raises(StartupError, match=r"rate_hz:=<Hz>"):
        rates(chain, "post", firing, command=given)
    (played,) = rates(chain, "post", replace(firing, rate_hz=20.0), command=given)
    assert (played.steps, played.chunk) == (5.0, False)


def test_an_output_another_node_reads_is_not_played_out(chain):
    with pytest.raises(StartupError, match=r"feeds another node"):
        rates(chain, "policy", action={"output_rate_hz": 100})


def test_a_chunk_sent_as_a_joint_trajectory_is_not_played_out(chunker, tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(
        "/**:\n  ros__parameters:\n    ports:\n      chunk:\n"
        "        message: trajectory_msgs/msg/JointTrajectory\n"
    )
    plan = load_plan(chunker.spec_path, params_file=params)
    with pytest.raises(StartupError, match=r"JointTrajectory carries the whole chunk"):
        rates(plan, "chunker", chunk={"output_rate_hz": 100})
