"""The nodes spin on rclpy's EventsExecutor where ``rclpy.experimental`` has one, and on
SingleThreadedExecutor where it does not (Jazzy's rclpy before the EventsExecutor came to it,
Humble's): both wheels CI tests have it, so a process here is made to lack it, and its graph
must answer like eager PyTorch all the same.

Real rclpy, Fast DDS over localhost, a domain per test.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import pytest
import torch
from support.ros import REPO, eager_seed
from support.runner import SeedIO

from leapp_ros.node.executor import make_executor
from leapp_ros.testing import Probe, reserve_domain_id, ros_env

pytestmark = pytest.mark.ros

NAMESPACE = "/torch_pipeline"
# leapp_container with the seed export, in a process whose rclpy has no rclpy.experimental;
# it prints the class of the executor its nodes spin on
WITHOUT_EVENTS_EXECUTOR = """
import sys
sys.modules["rclpy.experimental"] = None
from leapp_ros.node import executor
choose = executor.make_executor
def make_executor(context=None):
    chosen = choose(context)
    print("executor:", type(chosen).__name__, flush=True)
    return chosen
executor.make_executor = make_executor
from leapp_ros.run.container import main
sys.exit(main(["leapp_container", *sys.argv[1:]]))
"""


def test_without_rclpy_experimental_the_executor_is_single_threaded(monkeypatch):
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    monkeypatch.setitem(sys.modules, "rclpy.experimental", None)  # its import fails
    context = Context()
    rclpy.init(context=context)
    try:
        executor = make_executor(context)
        assert type(executor) is SingleThreadedExecutor
        executor.shutdown()
    finally:
        context.try_shutdown()


def test_a_graph_without_the_events_executor_answers_like_eager_pytorch(seed, tmp_path):
    log = tmp_path / "container.log"
    with reserve_domain_id() as domain_id, open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", WITHOUT_EVENTS_EXECUTOR, str(seed.path)],
            env=ros_env(domain_id),
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        probe = Probe(domain_id)
        try:
            probe.wait_ready(NAMESPACE, ["preprocess", "policy"], timeout_s=60)
            io = SeedIO(probe, NAMESPACE)
            for _ in range(3):
                state, velocity = torch.randn(6) * 2, torch.randn(3)
                _, expected = eager_seed(seed, state, velocity)
                answer = io.step(state, velocity, expected, timeout_s=20)
                torch.testing.assert_close(answer, expected)
            # printed before the nodes spun, which they did to answer
            assert "executor: SingleThreadedExecutor" in log.read_text(errors="replace")
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=30) == 0, log.read_text(errors="replace")
        finally:
            probe.close()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
