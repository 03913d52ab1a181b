"""leapp_container as a ROS 2 component container, over real DDS (rclpy + Fast DDS, localhost, a
domain per container): composition_interfaces' load_node / unload_node / list_nodes called by an
rclpy client and by ``ros2 component``, loaded nodes answering like eager PyTorch, and every
refused request answered in the response while the container keeps serving."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from support.composition import skip_unless_composition_works
from support.ros import REPO, NodeProcess, eager_seed
from support.runner import SeedIO

from leapp_ros.plan.cpu_settings import usable_cpus
from leapp_ros.testing import Probe, reserve_domain_id, ros_env

pytestmark = [pytest.mark.ros, pytest.mark.launch]

CONTAINER = "/composition/box"
SEED_NS = "/torch_pipeline"
CALL_TIMEOUT_S = 30.0  # a load reads the spec, loads and warms up a model
CLI_TIMEOUT_S = 30.0


class Container:
    """A ``leapp_container`` process and an rclpy client of its component services."""

    def __init__(self, tmp, domain_id: int, args: list[str], name: str):
        skip_unless_composition_works()  # not at module level: launch_testing's plugin imports
        # every module of the folder and a skip there skips the whole folder
        from composition_interfaces.srv import ListNodes, LoadNode, UnloadNode

        self.domain_id, self.name = domain_id, name
        self.process = NodeProcess(
            "leapp_ros.run.container", args, domain_id, tmp / "container.log"
        )
        self.probe = Probe(domain_id)
        node = self.probe.node
        self.clients = {
            kind: node.create_client(service, f"{name}/_container/{kind}")
            for kind, service in (
                ("load_node", LoadNode),
                ("unload_node", UnloadNode),
                ("list_nodes", ListNodes),
            )
        }
        for client in self.clients.values():
            self.probe.spin_until(self._alive_and(client.service_is_ready), 60, client.srv_name)

    def _alive_and(self, condition):
        def check():
            assert self.process.running(), f"the container exited:\n{self.process.output}"
            return condition()

        return check

    def call(self, kind: str, request):
        future = self.clients[kind].call_async(request)
        self.probe.spin_until(self._alive_and(future.done), CALL_TIMEOUT_S, f"{kind} response")
        return future.result()

    def load(self, spec_path, node: str, namespace: str, **changes):
        """Call load_node for pipeline node ``node``; ``changes`` set request fields, and
        ``parameters`` (a dict) replaces the spec_path parameter."""
        from composition_interfaces.srv import LoadNode

        parameters = changes.pop("parameters", {"spec_path": str(spec_path)})
        request = LoadNode.Request(
            package_name="leapp_ros",
            plugin_name="leapp_ros::PipelineNode",
            node_name=node,
            node_namespace=namespace,
            parameters=[parameter(name, value) for name, value in parameters.items()],
        )
        for field, value in changes.items():
            setattr(request, field, value)
        return self.call("load_node", request)

    def unload(self, unique_id: int):
        from composition_interfaces.srv import UnloadNode

        return self.call("unload_node", UnloadNode.Request(unique_id=unique_id))

    def listing(self) -> list[tuple[int, str]]:
        from composition_interfaces.srv import ListNodes

        response = self.call("list_nodes", ListNodes.Request())
        return list(zip(response.unique_ids, response.full_node_names, strict=True))

    def cpus(self) -> set[int]:
        return os.sched_getaffinity(self.process.process.pid)

    def close(self) -> None:
        self.probe.close()
        self.process.kill()


def parameter(name: str, value):
    from rclpy.parameter import Parameter

    return Parameter(name, value=value).to_parameter_msg()


def ros2(domain_id: int, *args: str, expect: str) -> str:
    """Run ``ros2 <args> --no-daemon`` until its output matches ``expect`` (discovery can miss
    a fresh container at first); its output."""
    pytest.importorskip(
        "ros2component",
        reason="ros2cli's ros2component is not installed (it comes with "
        "../shared/ros2-launch/install.sh and with a full ROS 2 install)",
    )
    beside = Path(sys.executable).with_name("ros2")
    ros2_cli = str(beside) if beside.exists() else shutil.which("ros2")
    if ros2_cli is None:
        pytest.skip("the ros2 command is not on PATH (install ros2cli)")
    command = [ros2_cli, *args, "--no-daemon", "--spin-time", "2"]
    deadline = time.monotonic() + CLI_TIMEOUT_S
    while True:
        result = subprocess.run(
            command,
            env=ros_env(domain_id),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )
        output = result.stdout + result.stderr
        if re.search(expect, output):
            return output
        if time.monotonic() > deadline:
            raise AssertionError(f"ros2 {' '.join(args)}: no {expect!r} in:\n{output}")


def seed_answers_like_eager(probe, seed, namespace: str) -> None:
    io = SeedIO(probe, namespace)
    for _ in range(3):
        state, velocity = torch.randn(6) * 2, torch.randn(3)
        _, expected = eager_seed(seed, state, velocity)
        torch.testing.assert_close(io.step(state, velocity, expected, timeout_s=20), expected)


def test_a_load_request_round_trips_through_the_middlewares_serialization():
    """What every container test here and the composed runs of
    test/tools/test_pipeline_launch.py need; where it cannot work (support/composition.py)
    those are skipped or left out, and this skips, saying why."""
    skip_unless_composition_works()
    from composition_interfaces.srv import LoadNode
    from rclpy.serialization import deserialize_message, serialize_message

    request = LoadNode.Request(package_name="leapp_ros", plugin_name="leapp_ros::PipelineNode")
    request.node_name, request.node_namespace = "policy", SEED_NS
    request.parameters = [parameter("spec_path", "/x/torch_pipeline.yaml")]
    assert deserialize_message(serialize_message(request), LoadNode.Request) == request


@pytest.fixture(scope="module")
def container(tmp_path_factory):
    """An empty container, ``/composition/box``."""
    name_args = ["--ros-args", "-r", "__node:=box", "-r", "__ns:=/composition"]
    with reserve_domain_id() as domain_id:
        started = Container(tmp_path_factory.mktemp("box"), domain_id, name_args, CONTAINER)
        try:
            yield started
        finally:
            started.close()


# --- load, list, unload ----------------------------------------------------------------------


def test_loaded_nodes_answer_over_their_topics_like_eager_pytorch(container, seed):
    responses = [container.load(seed.path, node, "/a") for node in ("preprocess", "policy")]
    assert [(r.success, r.full_node_name) for r in responses] == [
        (True, "/a/preprocess"),
        (True, "/a/policy"),
    ], [r.error_message for r in responses]
    assert responses[1].unique_id == responses[0].unique_id + 1
    container.probe.wait_ready("/a", ["preprocess", "policy"], timeout_s=30)
    seed_answers_like_eager(container.probe, seed, "/a")


def test_list_nodes_has_the_unique_id_and_full_name_of_every_loaded_node(container, seed):
    loaded = [container.load(seed.path, node, "/b") for node in ("preprocess", "policy")]
    listing = container.listing()
    assert [(r.unique_id, r.full_node_name) for r in loaded] == listing[-2:]
    assert [i for i, _ in listing] == sorted(i for i, _ in listing)


def test_unload_stops_and_destroys_the_node_and_its_id_is_never_reused(container, seed):
    latest = container.probe.watch_status("/c")
    first = container.load(seed.path, "preprocess", "/c")
    container.probe.wait_ready("/c", ["preprocess"], timeout_s=30)
    assert container.unload(first.unique_id).success
    container.probe.spin_until(
        lambda: latest["preprocess"]["state"] == "stopping", 10, "stopping status"
    )
    assert (first.unique_id, "/c/preprocess") not in container.listing()
    graph = container.probe.node.get_node_names_and_namespaces
    container.probe.spin_until(lambda: ("preprocess", "/c") not in graph(), 10, "node gone")
    again = container.load(seed.path, "preprocess", "/c")
    assert again.success and again.unique_id > max(i for i, _ in container.listing()[:-1])


def test_unloading_an_unknown_id_answers_with_the_ids_there_are(container):
    response = container.unload(999)
    assert not response.success
    assert response.error_message.startswith("no node with unique id 999 in this container")


def test_loading_a_full_name_twice_is_refused(container, seed):
    assert container.load(seed.path, "preprocess", "/d").success
    response = container.load(seed.path, "preprocess", "/d")
    assert not response.success
    assert "a node named /d/preprocess is already in this container" in response.error_message


def test_log_level_of_the_request_applies_to_the_loaded_node(container, seed):
    quiet = container.load(seed.path, "preprocess", "/quiet", log_level=30)  # warn
    loud = container.load(seed.path, "preprocess", "/loud", log_level=0)  # as the process
    assert quiet.success and loud.success, (quiet.error_message, loud.error_message)
    container.probe.wait_ready("/quiet", ["preprocess"], timeout_s=30)
    container.probe.wait_ready("/loud", ["preprocess"], timeout_s=30)
    assert "[loud.preprocess]: leapp node 'preprocess' ready" in container.process.output
    assert "[quiet.preprocess]" not in container.process.output


def test_use_intra_process_comms_is_accepted_and_ignored(container, seed):
    flag = [parameter("use_intra_process_comms", True)]
    response = container.load(seed.path, "preprocess", "/intra", extra_arguments=flag)
    assert response.success, response.error_message


# --- refused requests ------------------------------------------------------------------------

SPEC = "<the seed export>"
REFUSED = {
    "another_package": ({"package_name": "demo_nodes_cpp"}, "loads only plugin"),
    "another_plugin": ({"plugin_name": "leapp_ros::Other"}, "not 'leapp_ros::Other'"),
    "no_spec_path": ({"parameters": {}}, "parameter spec_path is not set"),
    "missing_spec": ({"parameters": {"spec_path": "/no/such/export"}}, "/no/such/export"),
    "unknown_pipeline_node": ({"node_name": "planner"}, "has no node 'planner'"),
    "bad_parameter_value": (
        {"parameters": {"spec_path": SPEC, "rate_hz": "fast"}},
        "rate_hz must be a number",
    ),
    "bad_node_name": ({"node_name": "my node"}, "invalid node name"),
    "bad_remap_rule": ({"remap_rules": ["nonsense"]}, "invalid node name, namespace or remap"),
    "unknown_extra_argument": (
        {"extra_arguments": [("forkable", True)]},
        "unknown extra argument 'forkable'",
    ),
    "extra_argument_of_another_type": (
        {"extra_arguments": [("use_intra_process_comms", "yes")]},
        "must be a boolean",
    ),
    "bad_log_level": ({"log_level": 7}, "log_level 7 is not a ROS log level"),
}


@pytest.mark.parametrize("changes, reason", REFUSED.values(), ids=REFUSED.keys())
def test_refused_load_answers_why_and_the_container_keeps_serving(
    container, seed, changes, reason
):
    before = container.listing()
    changes = dict(changes)
    if "parameters" in changes:
        given = changes["parameters"].items()
        changes["parameters"] = {k: str(seed.path) if v == SPEC else v for k, v in given}
    if "extra_arguments" in changes:
        changes["extra_arguments"] = [parameter(*pair) for pair in changes["extra_arguments"]]
    response = container.load(seed.path, changes.pop("node_name", "preprocess"), "/e", **changes)
    assert not response.success
    assert reason in response.error_message
    assert container.listing() == before
    assert container.process.running()


def test_graph_still_answers_after_a_refused_load(container, seed):
    for node in ("preprocess", "policy"):
        assert container.load(seed.path, node, "/f").success
    container.probe.wait_ready("/f", ["preprocess", "policy"], timeout_s=30)
    assert not container.load(seed.path, "planner", "/f").success
    seed_answers_like_eager(container.probe, seed, "/f")


def test_refused_load_leaves_the_process_cpus_as_they_were(container, seed):
    cpus = container.cpus()
    pin = {"spec_path": str(seed.path), "cpu_affinity": [min(cpus)]}
    response = container.load(seed.path, "planner", "/g", parameters=pin)
    assert not response.success and "has no node 'planner'" in response.error_message
    assert container.cpus() == cpus


# --- ros2 component --------------------------------------------------------------------------


def test_ros2_component_list_shows_the_container_and_every_node_in_it(container, seed):
    assert container.load(seed.path, "policy", "/h").success
    listing = container.listing()
    expected = "".join(f"  {i}  {re.escape(name)}\n" for i, name in listing)
    output = ros2(container.domain_id, "component", "list", expect=expected)
    assert f"{CONTAINER}\n" + "".join(f"  {i}  {name}\n" for i, name in listing) in output


def test_ros2_component_load_completes_a_container_started_with_preprocess_only(seed, tmp_path):
    args = [str(seed.path), "--nodes", "preprocess", "--ros-args", "-r", "__node:=seed_box"]
    box = f"{SEED_NS}/seed_box"
    with reserve_domain_id() as domain_id:
        started = Container(tmp_path, domain_id, args, box)
        try:
            assert started.listing() == [(1, f"{SEED_NS}/preprocess")]
            load = ["component", "load", box, "leapp_ros", "leapp_ros::PipelineNode"]
            load += ["-p", f"spec_path:={seed.path}", "-r", "__node:=policy", "-r"]
            load += [f"__ns:={SEED_NS}"]
            expected = f"Loaded component 2 into '{box}' container node as '{SEED_NS}/policy'"
            ros2(domain_id, *load, expect=re.escape(expected))
            started.probe.wait_ready(SEED_NS, ["preprocess", "policy"], timeout_s=30)
            seed_answers_like_eager(started.probe, seed, SEED_NS)
            latest = started.probe.watch_status(SEED_NS)
            unload = ["component", "unload", box, "2"]
            ros2(domain_id, *unload, expect=re.escape(f"Unloaded component 2 from '{box}'"))
            started.probe.spin_until(
                lambda: latest["policy"]["state"] == "stopping", 10, "policy stopping"
            )
            assert started.listing() == [(1, f"{SEED_NS}/preprocess")]
        finally:
            started.close()


def test_a_container_preloading_a_share_of_the_nodes_is_named_after_its_first_node(seed, tmp_path):
    # Hosts that compose disjoint shares of one graph under one namespace: no two containers
    # of the same name (leapp_ros.plan.selection.container_name).
    args = [str(seed.path), "--nodes", "policy"]
    with reserve_domain_id() as domain_id:
        started = Container(tmp_path, domain_id, args, f"{SEED_NS}/leapp_container_policy")
        try:
            assert started.listing() == [(1, f"{SEED_NS}/policy")]
            names = started.probe.node.get_node_names_and_namespaces()
            assert ("leapp_container", SEED_NS) not in names
        finally:
            started.close()


# --- CPUs and installs without composition_interfaces ----------------------------------------


def test_load_asking_for_other_cpus_than_the_nodes_in_the_container_is_refused(container, seed):
    cpus = sorted(usable_cpus())
    if len(cpus) < 2:
        pytest.skip("one CPU only: nothing to disagree about")
    first = {"spec_path": str(seed.path), "cpu_affinity": [cpus[0]]}
    assert container.load(seed.path, "preprocess", "/pinned", parameters=first).success
    other = {"spec_path": str(seed.path), "cpu_affinity": [cpus[1]]}
    response = container.load(seed.path, "policy", "/pinned", parameters=other)
    assert not response.success
    assert f"it asks for CPUs [{cpus[1]}] (cpu_affinity)" in response.error_message
    assert container.cpus() == {cpus[0]}


HIDE_COMPOSITION = (
    "import sys; sys.modules['composition_interfaces'] = None; "
    "from leapp_ros.run.container import main; sys.exit(main(['leapp_container', *sys.argv[1:]]))"
)


def without_composition(args: list[str], domain_id: int, log) -> subprocess.Popen:
    """``leapp_container args`` in a process where composition_interfaces cannot be imported."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-c", HIDE_COMPOSITION, *args],
            env=ros_env(domain_id),
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def test_empty_container_without_composition_interfaces_exits_2_saying_what_to_install(
    tmp_path,
):
    log = tmp_path / "container.log"
    with reserve_domain_id() as domain_id:
        code = without_composition([], domain_id, log).wait(timeout=60)
    assert code == 2, log.read_text()
    assert "install the ROS 2 package composition_interfaces" in log.read_text()


def test_export_container_without_composition_interfaces_runs_its_nodes(seed, tmp_path):
    log = tmp_path / "container.log"
    with reserve_domain_id() as domain_id:
        process = without_composition([str(seed.path)], domain_id, log)
        probe = Probe(domain_id)
        try:
            probe.wait_ready(SEED_NS, ["preprocess", "policy"], timeout_s=60)
            seed_answers_like_eager(probe, seed, SEED_NS)
            services = [name for name, _ in probe.node.get_service_names_and_types()]
            assert not [name for name in services if "/_container/" in name]
        finally:
            probe.close()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def test_preloaded_nodes_take_the_container_arguments_less_its_name_remaps():
    from leapp_ros.run.container import without_name_remaps

    arguments = ["--ros-args", "-r", "__node:=box", "-p", "firing:=timer", "--remap"]
    arguments += ["__ns:=/x", "-r", "obs:=o", "-p", "x:=-r", "--", "--ros-args", "-r"]
    arguments += ["__name:=n", "--params-file", "p.yaml"]
    assert without_name_remaps(arguments) == [
        "--ros-args",
        "-p",
        "firing:=timer",
        "-r",
        "obs:=o",
        "-p",
        "x:=-r",
        "--",
        "--ros-args",
        "--params-file",
        "p.yaml",
    ]
