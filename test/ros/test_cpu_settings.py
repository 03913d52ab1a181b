"""CPU settings: latency requests (``/dev/cpu_dma_latency``) and CPU affinity, by themselves,
as the nodes' ``cpu_latency_us`` and ``cpu_affinity`` parameters, and through ``leapp-ros run
--cpu-latency-us --pin-cpus`` over real DDS."""

from __future__ import annotations

import functools
import os
import signal
import struct
import subprocess
import sys
import textwrap

import pytest
from support.ros import run_to_exit, startup_error_line
from support.runner import Command

from leapp_ros.plan.cpu_settings import (
    DEVICE,
    CpuLatencyRequest,
    CpuSettingsError,
    current_limit,
    pin_process,
    usable_cpus,
)
from leapp_ros.plan.pipeline import PlanError
from leapp_ros.run.deployment import Deployment, GraphOptions
from leapp_ros.run.processes import load_plan, plan_processes
from leapp_ros.testing import Probe, reserve_domain_id, ros_env

pytestmark = pytest.mark.ros

NODES = ("preprocess", "policy")
DEVICE_WRITABLE = os.access(DEVICE, os.W_OK) and current_limit() is not None
needs_device = pytest.mark.skipif(
    not DEVICE_WRITABLE, reason=f"{DEVICE} is not writable here (it needs root)"
)


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
    with pytest.raises(CpuSettingsError, match="a CPU latency"):
        CpuLatencyRequest(value, device=tmp_path / "qos")


def test_request_without_access_names_the_file_and_how_to_get_access(tmp_path):
    missing = tmp_path / "cpu_dma_latency"
    with pytest.raises(CpuSettingsError) as raised:
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


# --- CPU affinity ----------------------------------------------------------------------------


def test_pinning_moves_every_thread_of_the_process_and_the_threads_it_starts_later():
    script = textwrap.dedent("""
        import os, threading
        from leapp_ros.plan.cpu_settings import pin_process, usable_cpus
        started = threading.Event()
        early = threading.Thread(target=started.wait, daemon=True)
        early.start()  # like the middleware's threads: running before the node pins
        cpu = usable_cpus()[-1]
        assert pin_process([cpu]) == (cpu,)
        late = threading.Thread(target=lambda: print(sorted(os.sched_getaffinity(0))))
        late.start(); late.join()
        print(sorted({tuple(sorted(os.sched_getaffinity(int(t))))
                      for t in os.listdir("/proc/self/task")}))
        started.set()
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    cpu = usable_cpus()[-1]
    assert result.stdout.split("\n")[:2] == [f"[{cpu}]", f"[({cpu},)]"]


@pytest.mark.parametrize(("cpus", "problem"), [([10**6], "[1000000] are not available"),
                                               ([], "no CPU given")])  # fmt: skip
def test_pinning_to_cpus_the_process_may_not_use_lists_those_it_may(cpus, problem):
    with pytest.raises(CpuSettingsError, match="this process may use CPUs") as raised:
        pin_process(cpus)
    assert problem in str(raised.value)


# --- plans and parameters ---------------------------------------------------------------------


def test_cpu_latency_option_reaches_every_process_after_the_params_file(seed, tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("/**:\n  ros__parameters:\n    cpu_latency_us: 50\n")
    plan = load_plan(seed.path)
    for deployment in (Deployment.PROCESSES, Deployment.COMPOSED):
        options = GraphOptions(deployment, params_file=params, cpu_latency_us=0)
        for process in plan_processes(plan, options):
            ros = process.ros_arguments()
            assert ros[-2:] == ["-p", "cpu_latency_us:=0"]  # later wins over the file
            assert ros.index("--params-file") < ros.index("-p")


def test_pin_cpus_gives_consecutive_processes_consecutive_cpus_round_robin(seed):
    cpus = usable_cpus()
    plan = load_plan(seed.path)
    processes = plan_processes(plan, GraphOptions(pin_cpus=True))
    assert [p.ros_arguments()[-1] for p in processes] == [
        f"cpu_affinity:=[{cpus[i % len(cpus)]}]" for i in range(len(NODES))
    ]
    (container,) = plan_processes(plan, GraphOptions(Deployment.COMPOSED, pin_cpus=True))
    assert container.ros_arguments()[-2:] == ["-p", f"cpu_affinity:=[{cpus[0]}]"]


@pytest.mark.parametrize("value", [-2, 1.5, "0"], ids=repr)
def test_options_reject_a_cpu_latency_that_is_not_a_whole_number_from_minus_1(value):
    with pytest.raises(PlanError, match="cpu_latency_us must be"):
        GraphOptions(cpu_latency_us=value)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("cpu_latency_us:=-2", "parameter cpu_latency_us must be -1 (off) or >= 0, got -2"),
        ("cpu_latency_us:=1.5", "parameter cpu_latency_us must be a whole number, got 1.5"),
        ("cpu_affinity:=[-1]", "parameter cpu_affinity must be whole numbers >= 0 such as "
         "[0, 1], got [-1]"),
        ("cpu_affinity:=x", "parameter cpu_affinity must be whole numbers >= 0 such as "
         "[0, 1], got 'x'"),
        ("cpu_affinity:=[100000]", "node 'policy': parameter cpu_affinity: cannot pin to CPUs "
         "[100000]: [100000] are not available; this process may use CPUs"),
    ],
)  # fmt: skip
def test_node_refuses_to_start_with_bad_cpu_settings(value, problem, seed, capsys, monkeypatch):
    from leapp_ros.node.pipeline_node import main

    args = ["--ros-args", "-r", "__node:=policy", "-p", f"spec_path:={seed.path}"]
    with reserve_domain_id() as domain_id:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(domain_id))
        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        code = main(["leapp_node", *args, "-p", value])
    assert code == 2
    assert capsys.readouterr().err.strip().startswith(f"leapp_node: error: {problem}")


def test_node_without_access_warns_how_to_get_it_and_runs_anyway(
    seed, tmp_path, capfd, monkeypatch
):
    import rclpy
    from rclpy.parameter import Parameter

    import leapp_ros.node.cpu_placement as placement
    import leapp_ros.node.pipeline_node as node_module

    missing = tmp_path / "cpu_dma_latency"
    request = functools.partial(CpuLatencyRequest, device=missing)
    monkeypatch.setattr(placement, "CpuLatencyRequest", request)
    with reserve_domain_id() as domain_id:
        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=domain_id)
        try:
            node = node_module.PipelineNode(
                "policy",
                context=context,
                parameter_overrides=[
                    Parameter("spec_path", Parameter.Type.STRING, str(seed.path)),
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


def test_node_takes_one_cpu_number_as_a_list_of_one(seed):
    cpu = usable_cpus()[-1]
    args = ["--ros-args", "-r", "__node:=policy", "-p", f"spec_path:={seed.path}"]
    with reserve_domain_id() as domain_id:
        probe = Probe(domain_id)
        node = Command(
            [
                sys.executable,
                "-m",
                "leapp_ros.node.pipeline_node",
                *args,
                "-p",
                f"cpu_affinity:={cpu}",
            ],
            ros_env(domain_id),
        )
        try:
            status = probe.wait_ready("/", ["policy"], timeout_s=60)["policy"]
            assert os.sched_getaffinity(node.process.pid) == {cpu}
        finally:
            node.kill()
            probe.close()
    assert status["cpu_affinity"] == [cpu]


def test_container_refuses_nodes_that_ask_for_different_cpus(seed, tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(
        "/torch_pipeline/preprocess:\n  ros__parameters:\n    cpu_affinity: [0]\n"
        f"/torch_pipeline/policy:\n  ros__parameters:\n    cpu_affinity: [{usable_cpus()[-1]}]\n"
    )
    if usable_cpus()[-1] == 0:
        pytest.skip("one CPU only: nothing to disagree about")
    args = [str(seed.path), "--ros-args", "--params-file", str(params)]
    line = startup_error_line(run_to_exit("leapp_ros.run.container", args), "leapp_container")
    assert "share its process but ask for different CPUs (cpu_affinity: preprocess [0], " in line


# --- leapp-ros run --cpu-latency-us --pin-cpus, over real DDS -------------------------------


def test_run_pins_the_nodes_and_holds_the_request_while_the_graph_runs(seed):
    before = current_limit()
    command = [sys.executable, "-m", "leapp_ros.tools.cli", "run", str(seed.path)]
    options = ["--cpu-latency-us", "0", "--pin-cpus"]
    cpus = usable_cpus()
    with reserve_domain_id() as domain_id:
        probe = Probe(domain_id)
        run = Command([*command, *options], ros_env(domain_id))
        try:
            run.wait_for(r"graph ready", 60)
            statuses = probe.wait_ready("/torch_pipeline", NODES, timeout_s=20)
            held = current_limit()
            pids = run.started_pids()
            for index, node in enumerate(NODES):
                threads = os.listdir(f"/proc/{pids[node]}/task")
                assert {frozenset(os.sched_getaffinity(int(t))) for t in threads} == {
                    frozenset([cpus[index % len(cpus)]])
                }
                assert statuses[node]["cpu_affinity"] == [cpus[index % len(cpus)]]
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
