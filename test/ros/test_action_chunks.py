"""Action chunks over real DDS, in every deployment: an output of shape [T, J] with LEAPP's
temporal axis (``TemporalAxis(period_ms)``, kind ``target/joint/position_chunk``) goes out
either as one ``trajectory_msgs/JointTrajectory`` (T points ``temporal_period_ms`` apart, the
joints named) or, with ``ports.<port>.output_rate_hz``, played out row by row as a
``Float64MultiArray`` at that rate (``interpolate: linear`` between the points); a new chunk
replaces the rest of the old one, from the row published last.

Every value is checked against eager PyTorch and the documented formula
(leapp_ros.plan.output_rates); where the new chunk comes in is found from the values.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from support.rates import CHUNK_PERIOD_MS, JOINTS, eager_chunk, expected_targets, export_chunker

from leapp_ros.testing import Deployment, GraphOptions, GraphUnderTest

pytestmark = pytest.mark.ros

ROWS_HZ = 10.0
STEPS = ROWS_HZ * CHUNK_PERIOD_MS / 1000.0  # n: rows published per point of a chunk


@pytest.fixture(scope="module")
def chunker(tmp_path_factory):
    return export_chunker(tmp_path_factory.mktemp("chunker"))


@pytest.fixture(scope="module", params=list(Deployment))
def graph(request, chunker, tmp_path_factory):
    ports = {
        "chunk": {"message": "trajectory_msgs/msg/JointTrajectory"},
        "rows": {"output_rate_hz": ROWS_HZ, "interpolate": "linear"},
    }
    params = tmp_path_factory.mktemp("chunks") / "params.yaml"
    params.write_text(yaml.safe_dump({"/**": {"ros__parameters": {"ports": ports}}}))
    with GraphUnderTest(chunker.path, GraphOptions(request.param, params_file=params)) as started:
        yield started


def inbox(graph, key: str) -> list:
    return graph.endpoints.output(key)[2]


def rows(graph) -> list[np.ndarray]:
    """The rows published on ``rows`` so far: one point (two joints) per message."""
    found = []
    for message in inbox(graph, "chunker/rows"):
        assert [d.size for d in message.layout.dim] == [len(JOINTS)], "one row per message"
        found.append(np.frombuffer(message.data, np.float64).copy())
    return found


def wait_rows(graph, count: int) -> list[np.ndarray]:
    graph.probe.spin_until(lambda: len(rows(graph)) >= count, graph.timeout_s, f"{count} rows")
    return rows(graph)


def test_a_chunk_is_played_out_row_by_row_and_a_new_chunk_replaces_its_rest(graph):
    assert rows(graph) == [], "this test needs a graph that published no row yet"
    first = (eager_chunk(obs := torch.randn(3)) * 0.5).numpy()
    graph.publish({"chunker/obs": obs})
    played = expected_targets(first, first[0], STEPS, int(20 * STEPS), linear=True)
    got = wait_rows(graph, int(STEPS) + 2)  # into the ramp from the first point to the second
    for index, (value, want) in enumerate(zip(got, played, strict=False)):
        np.testing.assert_allclose(value, want, atol=1e-6, err_msg=f"row {index + 1}")
    second = (eager_chunk(obs := torch.randn(3)) * 0.5).numpy()
    graph.publish({"chunker/obs": obs})
    count = len(got)

    def switch_row() -> int | None:  # the first row that is not the first chunk's
        got = rows(graph)
        differ = (i for i in range(count, min(len(got), len(played)))
                  if not np.allclose(got[i], played[i], atol=1e-6))  # fmt: skip
        return next(differ, None)

    switch = graph.probe.spin_until(switch_row, graph.timeout_s, "the second chunk's rows")
    assert switch < 4 * STEPS, "the second chunk came while the first one played"
    got = wait_rows(graph, switch + int(2 * STEPS))
    replaced = expected_targets(second, got[switch - 1], STEPS, int(2 * STEPS), linear=True)
    for index, (value, want) in enumerate(zip(got[switch:], replaced, strict=False)):
        np.testing.assert_allclose(value, want, atol=1e-6, err_msg=f"row {index + 1} of 2nd")
    for value in got[:switch]:  # the rows before the switch all came from the first chunk
        assert any(np.allclose(value, want, atol=1e-6) for want in played)


def test_a_chunk_is_one_joint_trajectory_with_a_point_per_step(graph):
    obs = torch.randn(3)
    before = len(inbox(graph, "chunker/chunk"))
    graph.publish({"chunker/obs": obs})
    graph.probe.spin_until(
        lambda: len(inbox(graph, "chunker/chunk")) > before, graph.timeout_s, "a trajectory"
    )
    message = inbox(graph, "chunker/chunk")[-1]
    assert list(message.joint_names) == JOINTS
    expected = eager_chunk(obs).numpy()
    assert len(message.points) == len(expected)
    for step, (point, want) in enumerate(zip(message.points, expected, strict=True)):
        np.testing.assert_allclose(np.asarray(point.positions), want, rtol=1e-5, atol=1e-6)
        since = point.time_from_start.sec + point.time_from_start.nanosec * 1e-9
        assert since == pytest.approx((step + 1) * CHUNK_PERIOD_MS / 1000.0)
