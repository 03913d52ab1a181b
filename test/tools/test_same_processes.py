"""One export started with the same options by ``leapp-ros run``, by ``ros2 launch leapp_ros
pipeline.launch.py`` and by a generated package's launch file starts the same processes with
the same parameters, in every deployment.

The export is the generated package's, installed with pip (``share/<package>/export``), so the
package's launch file runs on its own defaults. First without starting anything: the command
lines the runner would run (``leapp-ros run``'s graph) and those launch_ros builds from each
launch file (the real launch stack evaluating it) are read back into what they mean
(:mod:`support.command_lines`: executable, arguments, node name and namespace, then every ROS
argument in order) and must be equal, for options that touch every part of them. Then live,
with ``autostart:=false`` (the nodes start unconfigured: no model is loaded), each way in turn
in a domain of its own: the command lines of the running processes (``/proc``) and every
parameter of every node (their parameter services) must be equal across the three. The
parameters file is the package's own plus a safe action on the policy's ``action``, so each way
starts the stand-in too (``leapp_stand_in``, a plain node after the nodes' processes).
"""

from __future__ import annotations

import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
from support.command_lines import live_command_lines, read_command_line
from support.generated import evaluate_launch_file, install
from support.runner import REPO, Command

from leapp_ros.run.deployment import Deployment
from leapp_ros.testing import Probe, claim_domain_id, ros_env
from leapp_ros.tools import cli
from leapp_ros.tools.generate import generate_package

pytest.importorskip(
    "launch_ros.actions",
    reason="the ROS 2 launch stack is not installed (launch, launch_ros): use a ROS 2 install, "
    "or run scripts/setup.sh with ../shared/ros2-launch present",
)

pytestmark = pytest.mark.launch

PACKAGE = "torch_pipeline_ros"
PIPELINE_LAUNCH = REPO / "launch" / "pipeline.launch.py"
EXECUTABLES = ("leapp_node", "leapp_container", "leapp_fused", "leapp_stand_in")
LAUNCH_FILES = {
    Deployment.PROCESSES: "torch_pipeline.launch.py",
    Deployment.COMPOSED: "torch_pipeline_composed.launch.py",
    Deployment.FUSED: "torch_pipeline_fused.launch.py",
}
REMAP = "preprocess/state:=/robot/state"


@pytest.fixture(scope="module")
def site(seed, tmp_path_factory) -> Path:
    package = generate_package(seed.path, tmp_path_factory.mktemp("src")).path
    return install(package, tmp_path_factory.mktemp("pip") / "site")


def installed(site: Path, folder: str) -> Path:
    return site / "share" / PACKAGE / folder / "torch_pipeline.yaml"


@pytest.fixture(scope="module")
def params(site, tmp_path_factory) -> Path:
    """The package's parameters file with a safe action on the policy's ``action``."""
    import yaml

    document = yaml.safe_load(installed(site, "config").read_text(encoding="utf-8")) or {}
    section = document.setdefault("/**", {}).setdefault("ros__parameters", {})
    section.setdefault("ports", {})["action"] = {"safe_action": "hold"}
    path = tmp_path_factory.mktemp("params") / "robot.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def options(params: Path, deployment: Deployment, **extra: str) -> dict[str, str]:
    """The options as launch arguments: every field of GraphOptions set."""
    return {
        "deployment": deployment.value,
        "namespace": "/robot1/pipe",
        "log_level": "warn",
        "params_file": str(params),
        "cpu_latency_us": "0",
        "pin_cpus": "true",
        "remaps": REMAP,
        "autostart": "false",
        **extra,
    }


def run_arguments(arguments: dict[str, str]) -> list[str]:
    """The same options as ``leapp-ros run`` arguments."""
    flags = ["--deployment", arguments["deployment"], "--namespace", arguments["namespace"]]
    flags += ["--log-level", arguments["log_level"], "--params-file", arguments["params_file"]]
    flags += ["--remap", arguments["remaps"], "--no-autostart"]
    if "cpu_latency_us" in arguments:
        flags += ["--cpu-latency-us", arguments["cpu_latency_us"]]
    if arguments.get("pin_cpus") == "true":
        flags.append("--pin-cpus")
    if "nodes" in arguments:
        flags += ["--nodes", arguments["nodes"]]
    return flags


def runner_command_lines(monkeypatch, site: Path, arguments: dict[str, str]) -> list:
    """The command lines of the graph ``leapp-ros run`` makes (not started)."""
    made = []
    monkeypatch.setattr(cli, "serve", lambda graph: made.append(graph) or 0)
    assert cli.main(["run", str(installed(site, "export")), *run_arguments(arguments)]) == 0
    return [read_command_line(argv) for argv in made[0].commands.values()]


@pytest.mark.parametrize("deployment", list(Deployment))
def test_run_pipeline_launch_and_generated_launch_file_build_the_same_command_lines(
    site, params, monkeypatch, deployment
):
    arguments = options(params, deployment)
    if deployment is not Deployment.FUSED:  # a fused node takes no choice of some nodes
        arguments["nodes"] = "policy"
    spec = str(installed(site, "export"))
    run = runner_command_lines(monkeypatch, site, arguments)
    launched = evaluate_launch_file(PIPELINE_LAUNCH, None, pipeline=spec, **arguments)
    generated = evaluate_launch_file(
        site / "share" / PACKAGE / "launch" / LAUNCH_FILES[deployment], site, **arguments
    )
    assert launched.processes == run
    assert generated.processes == run
    assert run  # and what they are:
    *nodes, stand_in = run
    name = "_leapp_stand_in" if deployment is Deployment.FUSED else "_leapp_stand_in_policy"
    kind = "ComposableNodeContainer" if deployment is Deployment.COMPOSED else "LifecycleNode"
    assert launched.kinds == generated.kinds == [kind] * len(nodes) + ["Node"]
    for process in nodes:
        assert process.namespace == "/robot1/pipe"
        assert process.rules[:2] == (("r", REMAP), ("params-file", arguments["params_file"]))
        assert process.rules[-1] == ("log-level", "warn")
        assert {"cpu_latency_us": 0, "autostart": False}.items() <= process.parameters.items()
        assert process.parameters["stand_in"] == stand_in.name == name
        assert len(process.parameters["cpu_affinity"]) == 1
    assert stand_in.executable == "leapp_stand_in" and stand_in.namespace == "/robot1/pipe"
    assert stand_in.rules == (("r", REMAP), ("log-level", "warn"))
    assert ("--params-file", arguments["params_file"]) == stand_in.arguments[-2:]


@pytest.mark.parametrize("deployment", list(Deployment))
def test_the_defaults_of_run_and_pipeline_launch_start_the_same_command_lines(
    site, monkeypatch, deployment
):
    spec = str(installed(site, "export"))
    made = []
    monkeypatch.setattr(cli, "serve", lambda graph: made.append(graph) or 0)
    assert cli.main(["run", spec, "--deployment", deployment.value]) == 0
    run = [read_command_line(argv) for argv in made[0].commands.values()]
    launched = evaluate_launch_file(
        PIPELINE_LAUNCH, None, pipeline=spec, deployment=deployment.value
    )
    assert launched.processes == run
    kinds = {kind for process in run for kind, _ in process.rules}
    assert kinds <= {"p"}  # no log level, no parameters file, no remap


# --- live: the running processes and their nodes' parameters ---------------------------------


def ros2() -> str:
    found = Path(sys.executable).parent / "ros2"
    if not found.is_file() and not shutil.which("ros2"):
        pytest.skip("the ros2 CLI is not installed (scripts/setup.sh installs it)")
    return str(found) if found.is_file() else str(shutil.which("ros2"))


def start_argv(way: str, site: Path, arguments: dict[str, str]) -> list[str]:
    deployment = Deployment(arguments["deployment"])
    spec = str(installed(site, "export"))
    if way == "leapp-ros run":
        return [sys.executable, "-m", "leapp_ros.tools.cli", "run", spec,
                *run_arguments(arguments)]  # fmt: skip
    launch_arguments = [f"{name}:={value}" for name, value in arguments.items()]
    if way == "pipeline.launch.py":
        return [ros2(), "launch", "leapp_ros", "pipeline.launch.py", f"pipeline:={spec}",
                *launch_arguments]  # fmt: skip
    return [ros2(), "launch", PACKAGE, LAUNCH_FILES[deployment], *launch_arguments]


def node_parameters(probe: Probe, node: str, timeout_s: float) -> dict:
    """Every parameter of ``node`` (full name) and its value, from its parameter services."""
    from rcl_interfaces.srv import GetParameters, ListParameters
    from rclpy.parameter import parameter_value_to_python

    def call(service, name, request):
        """The service's response. ``service_is_ready`` sees the server's request side only:
        a response sent before the server's response writer matched this client is lost
        (seen on Jazzy under load), so a request that got no answer is asked again; these
        requests only read, so asking twice changes nothing."""
        client = probe.node.create_client(service, f"{node}/{name}")
        deadline = time.monotonic() + timeout_s
        try:
            probe.spin_until(client.service_is_ready, timeout_s, f"{node}/{name}")
            while True:
                future = client.call_async(request)
                give_up = min(deadline, time.monotonic() + 5.0)
                probe.spin_until(
                    lambda f=future, t=give_up: f.done() or time.monotonic() > t, timeout_s, name
                )
                if future.done() and future.result() is not None:
                    return future.result()
                client.remove_pending_request(future)
                assert time.monotonic() < deadline, f"{node}/{name}: no answer in {timeout_s} s"
        finally:
            probe.node.destroy_client(client)

    names = list(call(ListParameters, "list_parameters", ListParameters.Request()).result.names)
    values = call(GetParameters, "get_parameters", GetParameters.Request(names=names)).values
    pairs = zip(names, values, strict=True)
    return {name: parameter_value_to_python(value) for name, value in pairs}


def started(way: str, site: Path, arguments: dict[str, str], ros_nodes: list[str]) -> tuple:
    """Start the graph ``way``, read its processes' command lines and its nodes' parameters,
    stop it (SIGINT: exit code 0)."""
    domain_id, lock = claim_domain_id()
    env = ros_env(domain_id)
    env["AMENT_PREFIX_PATH"] = f"{site}:{env.get('AMENT_PREFIX_PATH', '')}"
    command = Command(start_argv(way, site, arguments), env)
    probe = Probe(domain_id)
    try:
        namespace = arguments["namespace"]
        parameters = {node: node_parameters(probe, f"{namespace}/{node}", 90)
                      for node in ros_nodes}  # fmt: skip
        lines = live_command_lines(command.process.pid, EXECUTABLES)
        command.process.send_signal(signal.SIGINT)
        assert command.wait(60) == 0, command.output
        return lines, parameters
    finally:
        probe.close()
        command.kill()
        lock.close()


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.parametrize("deployment", list(Deployment))
def test_each_way_runs_the_same_processes_whose_nodes_have_the_same_parameters(
    site, params, deployment
):
    arguments = options(params, deployment, namespace="/torch_pipeline")  # the file's sections
    fused = deployment is Deployment.FUSED
    ros_nodes = ["leapp_fused"] if fused else ["preprocess", "policy"]
    ways = ("leapp-ros run", "pipeline.launch.py", "generated launch file")
    seen = {way: started(way, site, arguments, ros_nodes) for way in ways}
    (lines, parameters), *others = seen.values()
    assert len(lines) == (1 if deployment is not Deployment.PROCESSES else 2) + 1  # stand-in
    assert [line.executable for line in lines].count("leapp_stand_in") == 1
    for way, (other_lines, other_parameters) in zip(ways[1:], others, strict=True):
        assert other_lines == lines, way
        assert other_parameters == parameters, way
    for node in ros_nodes:  # set on the command line, or by the installed parameters file
        assert parameters[node]["autostart"] is False
        assert parameters[node]["spec_path"] == str(installed(site, "export"))
        # the generated parameters file names each pipeline node's firing; the fused node has
        # no section of its own there and keeps the default, "" (as the spec says)
        assert parameters[node]["firing"] == ("" if fused else "inputs")
        assert parameters[node]["stand_in"] == "_leapp_stand_in"
