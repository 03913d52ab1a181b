"""CPU latency requests: the request itself (``/dev/cpu_dma_latency``), the nodes'
``cpu_latency_us`` parameter, and ``leapp-ros run --cpu-latency-us`` over real DDS."""

from __future__ import annotations

import functools
import os
import signal
import struct
import sys

import pytest
from runner_support import Command, export_seed

from leapp_ros.cpu_latency import DEVICE, CpuLatencyError, CpuLatencyRequest, current_limit
from leapp_ros.plan import PlanError
from leapp_ros.processes import load_plan, plan_processes
from leapp_ros.testing import Probe, reserve_domain_id, ros_env

NODES = ("preprocess", "policy")
DEVICE_WRITABLE = os.access(DEVICE, os.W_OK) and current_limit() is not None
needs_device = pytest.mark.skipif(
    not DEVICE_WRITABLE, reason=f"{DEVICE} is not writable here (it needs root)"
)


@pytest.fixture(scope="module")
def seed_export(tmp_path_factory):
    return export_seed(tmp_path_factory.mktemp("export"))


# --- the request ------------------------------------------------------------------------------


def test_request_writes_the_microseconds_as_a_native_32_bit_integer(tmp_path):
    device = tmp_path / "qos"
    device.write_bytes(b"")
    request = CpuLatencyRequest(42, device=device)
    assert request.held and device.read_bytes() == struct.pack("=i", 42)
    request.release()
    request.release()  # twice is fine
    assert not request.held


@pytest.mark.parametrize("value", [-1, 2**31, 1.5, True], ids=str)
def test_request_takes_whole_microseconds_from_0_to_2_to_the_31(value, tmp_path):
    with pytest.raises(CpuLatencyError, match="a CPU latency"):
        CpuLatencyRequest(value, device=tmp_path / "qos")


def test_request_without_access_names_the_file_and_how_to_get_access(tmp_path):
    missing = tmp_path / "cpu_dma_latency"
    with pytest.raises(CpuLatencyError) as raised:
        CpuLatencyRequest(0, device=missing)
    message = str(raised.value)
    assert str(missing) in message and "udev rule" in message and "root" in message


@needs_device
def test_a_held_request_bounds_the_system_latency_until_it_is_released():
    before = current_limit()
    assert before is not None
    if before == 0:
        pytest.skip("another process holds a 0 us request already")
    wanted = min(before - 1, 123)
    with CpuLatencyRequest(wanted):
        assert current_limit() == wanted
    assert current_limit() == before


# --- plans and parameters ---------------------------------------------------------------------


def test_cpu_latency_option_reaches_every_process_after_the_params_file(seed_export, tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("/**:\n  ros__parameters:\n    cpu_latency_us: 50\n")
    plan = load_plan(seed_export)
    for composed in (False, True):
        for process in plan_processes(
            plan, composed=composed, params_file=params, cpu_latency_us=0
        ):
            ros = process.ros_arguments()
            assert ros[-2:] == ["-p", "cpu_latency_us:=0"]  # later wins over the file
            assert ros.index("--params-file") < ros.index("-p")


@pytest.mark.parametrize("value", [-2, 1.5, "0"], ids=repr)
def test_processes_reject_a_cpu_latency_that_is_not_a_whole_number_from_minus_1(
    value, seed_export
):
    with pytest.raises(PlanError, match="cpu_latency_us must be"):
        plan_processes(load_plan(seed_export), cpu_latency_us=value)


@pytest.mark.parametrize(
    ("value", "problem"),
    [("-2", "must be -1 (off) or >= 0, got -2"), ("1.5", "must be a whole number, got 1.5")],
)
def test_node_refuses_to_start_with_a_bad_cpu_latency(
    value, problem, seed_export, capsys, monkeypatch
):
    from leapp_ros.node import main

    args = ["--ros-args", "-r", "__node:=policy", "-p", f"spec_path:={seed_export}"]
    with reserve_domain_id() as domain_id:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(domain_id))
        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        code = main(["leapp_node", *args, "-p", f"cpu_latency_us:={value}"])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        f"leapp_node: error: parameter cpu_latency_us {problem}"
    )


def test_node_without_access_warns_how_to_get_it_and_runs_anyway(
    seed_export, tmp_path, capfd, monkeypatch
):
    import rclpy
    from rclpy.parameter import Parameter

    import leapp_ros.node as node_module

    missing = tmp_path / "cpu_dma_latency"
    request = functools.partial(CpuLatencyRequest, device=missing)
    monkeypatch.setattr(node_module, "CpuLatencyRequest", request)
    with reserve_domain_id() as domain_id:
        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=domain_id)
        try:
            node = node_module.PipelineNode(
                "policy",
                context=context,
                parameter_overrides=[
                    Parameter("spec_path", Parameter.Type.STRING, str(seed_export)),
                    Parameter("cpu_latency_us", Parameter.Type.INTEGER, 0),
                ],
            )
            status = node.status()
            node.destroy_node()
        finally:
            context.try_shutdown()
    assert status["state"] == "ready" and status["cpu_latency_us"] is None
    logged = capfd.readouterr().err
    assert "node 'policy': cpu_latency_us is 0, but cannot request" in logged
    assert str(missing) in logged


# --- leapp-ros run --cpu-latency-us, over real DDS --------------------------------------------


def test_run_holds_the_request_while_the_graph_runs_and_ends_it_with_the_graph(seed_export):
    before = current_limit()
    command = [sys.executable, "-m", "leapp_ros.cli", "run", str(seed_export)]
    with reserve_domain_id() as domain_id:
        probe = Probe(domain_id)
        run = Command([*command, "--cpu-latency-us", "0"], ros_env(domain_id))
        try:
            run.wait_for(r"graph ready", 60)
            statuses = probe.wait_ready("/torch_pipeline", NODES, timeout_s=20)
            held = current_limit()
            os.kill(run.process.pid, signal.SIGINT)
            assert run.wait(30) == 0, run.output
        finally:
            run.kill()
            probe.close()
    if DEVICE_WRITABLE:
        assert [statuses[node]["cpu_latency_us"] for node in NODES] == [0, 0]
        assert held == 0 and "holding a CPU latency request of 0 us" in run.output
        assert current_limit() == before
    else:  # where only root may write it, the nodes say how to get access and run anyway
        assert [statuses[node]["cpu_latency_us"] for node in NODES] == [None, None]
        assert "cpu_latency_us is 0, but cannot request" in run.output
