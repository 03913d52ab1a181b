"""The benches' rules: bench/ros_latency.py's hand-written raw CDR node encodes as rclpy
serializes, the report judges each mode by ratios to the typed hand-written graph of its shape
(latency <= 0.7x, 0.85x for one process per node; CPU per answer <= 0.75x; a rate at least the
hand-written graph's) with the raw variant beside, a hand-written graph answers each input pair
once over real topics with leapp.Pipeline's action; bench/export.py refuses a missing NVIDIA
Python before measuring."""

from __future__ import annotations

import array
import re
import sys

import hand_written_nodes
import latency_report
import numpy as np
import pytest
import ros_latency
from bare_calls import Timing
from latency_report import (
    COMPOSED,
    FUSED,
    FUSED_PROCESS,
    HAND_CHAIN,
    HAND_WRITTEN_OF,
    MODES,
    PROCESSES,
    RAW_OF,
    judge,
    report,
)
from support.ros import REPO


def result(median: float, cpu: float = 300.0, sustained: int = 1000, answers=1.0) -> dict:
    return {
        "timing": Timing(median, 3 * median, 1000),
        "lost": 0,
        "answers": answers,
        "sustained": sustained,
        "cpu": cpu,
        "checked": 0.0,
        "loss": 0.001,
    }


def test_raw_encoding_is_what_serialize_message_writes():
    from rclpy.serialization import deserialize_message, serialize_message
    from std_msgs.msg import Float32MultiArray

    values = np.random.default_rng(0).standard_normal(7).astype(np.float32)
    encoded = hand_written_nodes.float32_encoder(values.size)(values)
    message = Float32MultiArray(data=array.array("f", values.tobytes()))
    assert encoded == serialize_message(message)
    decoded = deserialize_message(encoded, Float32MultiArray)
    assert np.array_equal(np.frombuffer(decoded.data, np.float32), values)


def test_raw_view_reads_data_after_any_layout():
    from rclpy.serialization import serialize_message
    from std_msgs.msg import Float32MultiArray, MultiArrayDimension

    values = np.arange(6, dtype=np.float32)
    for labels in ((), ("a",), ("abc", "joint_names_1", "xy")):
        message = Float32MultiArray(data=array.array("f", values.tobytes()))
        message.layout.dim = [MultiArrayDimension(label=t, size=6, stride=6) for t in labels]
        assert np.array_equal(hand_written_nodes.float32_view(serialize_message(message)), values)
    hand_written_nodes.check_float32_cdr()


def test_raw_view_refuses_big_endian_cdr():
    with pytest.raises(ValueError, match="little-endian"):
        hand_written_nodes.float32_view(b"\x00\x00\x00\x00" + bytes(12))


@pytest.mark.parametrize(
    ("mode", "passing", "failing"),
    [
        (COMPOSED, 0.69, 0.71),
        (PROCESSES, 0.84, 0.86),
        (FUSED, 0.69, 0.71),
        (FUSED_PROCESS, 0.69, 0.71),
    ],
)
def test_latency_verdict_is_the_median_ratio_to_the_typed_hand_written_graph(
    mode, passing, failing
):
    hand = result(100.0)
    assert judge(mode, result(100.0 * passing), hand)[0].passed is True
    assert judge(mode, result(100.0 * failing), hand)[0].passed is False


def test_cpu_verdict_is_at_most_three_quarters_of_the_hand_written_cpu():
    hand = result(100.0, cpu=400.0)
    assert judge(COMPOSED, result(50.0, cpu=299.0), hand)[1].passed is True
    assert judge(COMPOSED, result(50.0, cpu=301.0), hand)[1].passed is False


def test_rate_verdict_is_at_least_the_hand_written_rate():
    hand = result(100.0, sustained=1000)
    assert judge(PROCESSES, result(50.0, sustained=1000), hand)[2].passed is True
    assert judge(PROCESSES, result(50.0, sustained=500), hand)[2].passed is False


def test_a_graph_answering_twice_per_pair_is_invalid_not_judged():
    verdicts = judge(FUSED, result(50.0, answers=2.0), result(100.0))
    assert [verdict.word for verdict in verdicts] == ["INVALID"] * 3


def test_report_prints_each_verdict_with_figures_and_the_raw_ratios_beside(capsys, monkeypatch):
    monkeypatch.setenv("ROS_DOMAIN_ID", "7")
    results = {}
    for mode in MODES:
        results[HAND_WRITTEN_OF[mode]] = result(200.0, cpu=400.0, sustained=1000)
        results[RAW_OF[mode]] = result(160.0, cpu=360.0, sustained=2000)
        results[mode] = result(100.0, cpu=280.0, sustained=2000)
    results[PROCESSES] = result(180.0, cpu=320.0, sustained=500)  # fails all three
    report(results)
    printed = capsys.readouterr().out
    lines = re.findall(r"^ +(latency|CPU|rate) +(.+?) +(PASS|FAIL) *(.*)$", printed, re.M)
    assert len(lines) == 3 * len(MODES), printed
    words = [word for _, _, word, _ in lines]
    assert words == ["PASS"] * 3 + ["FAIL"] * 3 + ["PASS"] * 6, printed
    assert "median 100.0 / 200.0 us = 0.50x <= 0.70x" in printed
    assert "median 180.0 / 200.0 us = 0.90x <= 0.85x" in printed
    assert "per answer 280 / 400 us = 0.70x <= 0.75x" in printed
    assert "sustained 500 Hz >= 1000 Hz" in printed
    raw = [rest for _, _, _, rest in lines]
    assert all("raw CDR: " in rest for rest in raw), printed
    assert "raw CDR: median 0.62x, p99 0.62x" in printed  # 100 / 160
    assert "raw CDR: 0.78x" in printed  # CPU 280 / 360
    assert "9 of 12 verdicts PASS" in printed
    assert re.search(r"leapp, composed .* 280 us,  0\.10 %$", printed, re.M), printed


def test_every_mode_has_a_latency_limit_and_both_references():
    assert set(latency_report.LATENCY_LIMITS) == set(MODES) == set(HAND_WRITTEN_OF) == set(RAW_OF)


def test_cpu_is_measured_per_mode_next_to_both_its_references():
    labels = [*(ref for mode in MODES for ref in (HAND_WRITTEN_OF[mode], RAW_OF[mode])), *MODES]
    groups = ros_latency.cpu_groups(dict.fromkeys([*labels, "extra"]))
    assert groups == [
        *((mode, HAND_WRITTEN_OF[mode], RAW_OF[mode]) for mode in MODES),
        ("extra",),
    ]
    assert ros_latency.cpu_groups(dict.fromkeys([FUSED, HAND_WRITTEN_OF[FUSED]])) == [
        (FUSED, HAND_WRITTEN_OF[FUSED])
    ]


def test_cpu_windows_alternate_and_turn_the_order_each_round():
    order = []

    class Client:
        def __init__(self, label):
            self.label = label

        def cpu_per_answer_us(self, rate_hz, seconds):
            order.append(self.label)
            return 100.0 + len(order), 0.0

    clients = {label: Client(label) for label in "abc"}
    windows = ros_latency.cpu_windows(clients, rounds=4, seconds=0.1)
    assert "".join(order) == "abc" + "bca" + "cab" + "abc"
    assert {label: len(runs) for label, runs in windows.items()} == dict.fromkeys("abc", 4)
    assert windows["a"][1] == (100.0 + 6, 0.0)  # a's second window: the sixth of all


@pytest.mark.ros
def test_a_hand_written_graph_answers_each_input_pair_once_with_the_pipelines_action(
    tmp_path, monkeypatch
):
    """The reference of the verdicts is a graph the client can time: over real topics, one
    action per input pair, none lost, and (checked as it starts) leapp.Pipeline's action."""
    import leapp.spec
    from leapp_ros.testing import reserve_domain_id

    with reserve_domain_id() as domain:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(domain))
        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        spec = leapp.spec.load(ros_latency.export_seed(tmp_path).spec_path)
        enter = ros_latency.reference_subjects(spec)[HAND_CHAIN]
        with enter(ros_latency.namespace_of(HAND_CHAIN)) as client:
            assert client.checked is not None and client.checked <= 1e-5
            assert client.answers_per_pair() == 1.0
            client.sample(20)
            assert client.lost == 0 and len(client.times) == 20


def test_export_bench_refuses_a_missing_nvidia_python_before_measuring(tmp_path):
    import subprocess

    missing = tmp_path / "no-venv" / "bin" / "python"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "export.py"), "--nvidia-python", str(missing)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert f"--nvidia-python {missing}: no such program" in done.stderr
    assert "scripts/nvidia_leapp.sh" in done.stderr and "Traceback" not in done.stderr
