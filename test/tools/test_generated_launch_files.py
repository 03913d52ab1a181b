"""The launch files of a generated package, installed with pip and evaluated by the real launch
stack (launch, launch_ros from ``../shared/ros2-launch``, as CI has them): each is leapp_ros's
launch description with the package's defaults (installed export, parameters file, namespace,
deployment), so each starts what its deployment starts, with the ``autostart`` argument given
to every node. test_ros2_workspace.py builds, tests and launches the same package with colcon
and ``ros2 launch``; test_same_processes.py compares what it starts with ``leapp-ros run`` and
``pipeline.launch.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.generated import evaluate_launch_file, install

from leapp_ros.run.deployment import Deployment
from leapp_ros.tools.generate import generate_package

pytest.importorskip(
    "launch_ros.actions",
    reason="the ROS 2 launch stack is not installed (launch, launch_ros): use a ROS 2 install, "
    "or run scripts/setup.sh with ../shared/ros2-launch present",
)

pytestmark = pytest.mark.launch

PACKAGE = "torch_pipeline_ros"
NODES = ("preprocess", "policy")
LAUNCH_FILES = {
    Deployment.PROCESSES: "torch_pipeline.launch.py",
    Deployment.COMPOSED: "torch_pipeline_composed.launch.py",
    Deployment.FUSED: "torch_pipeline_fused.launch.py",
}


@pytest.fixture(scope="module")
def site(seed, tmp_path_factory) -> Path:
    package = generate_package(seed.path, tmp_path_factory.mktemp("src")).path
    return install(package, tmp_path_factory.mktemp("pip") / "site")


def evaluate(site: Path, name: str, **arguments: str):
    return evaluate_launch_file(site / "share" / PACKAGE / "launch" / name, site, **arguments)


@pytest.mark.parametrize("deployment", list(Deployment))
def test_every_launch_file_takes_pipeline_launch_arguments_with_the_package_defaults(
    site, deployment
):
    from leapp_ros.run.launch_description import ARGUMENTS

    launched = evaluate(site, LAUNCH_FILES[deployment])
    assert list(launched.arguments) == list(ARGUMENTS)
    share = site / "share" / PACKAGE
    assert {name: launched.values[name] for name in ("pipeline", "params_file")} == {
        "pipeline": str(share / "export" / "torch_pipeline.yaml"),
        "params_file": str(share / "config" / "torch_pipeline.yaml"),
    }
    assert (launched.values["namespace"], launched.values["deployment"]) == (
        "/torch_pipeline",
        deployment.value,
    )


def test_launch_file_starts_one_leapp_node_per_pipeline_node(site):
    launched = evaluate(site, LAUNCH_FILES[Deployment.PROCESSES])
    share = site / "share" / PACKAGE
    assert [process.name for process in launched.processes] == list(NODES)
    assert launched.kinds == ["LifecycleNode"] * len(NODES)
    for process in launched.processes:
        assert process.executable == "leapp_node"
        assert process.namespace == "/torch_pipeline"
        assert process.parameters == {
            "spec_path": str(share / "export" / "torch_pipeline.yaml"),
            "pipeline_node": process.name,
        }
        # the parameters file first: what is set here wins over it
        assert process.rules[0] == ("params-file", str(share / "config" / "torch_pipeline.yaml"))


def test_composed_launch_file_starts_one_leapp_container_that_preloads_every_node(site):
    launched = evaluate(site, LAUNCH_FILES[Deployment.COMPOSED])
    [container] = launched.processes
    assert launched.kinds == ["ComposableNodeContainer"]
    assert container.executable == "leapp_container"
    assert (container.name, container.namespace) == ("leapp_container", "/torch_pipeline")
    spec = site / "share" / PACKAGE / "export" / "torch_pipeline.yaml"
    assert container.arguments == (str(spec), "--namespace", "/torch_pipeline")


def test_fused_launch_file_starts_one_leapp_fused_node(site):
    launched = evaluate(site, LAUNCH_FILES[Deployment.FUSED])
    [process] = launched.processes
    assert launched.kinds == ["LifecycleNode"]
    assert process.executable == "leapp_fused"
    assert (process.name, process.namespace) == ("leapp_fused", "/torch_pipeline")
    share = site / "share" / PACKAGE
    assert process.parameters == {"spec_path": str(share / "export" / "torch_pipeline.yaml")}


@pytest.mark.parametrize("deployment", list(Deployment))
def test_autostart_false_goes_to_every_process_after_the_parameters_file(site, deployment):
    launched = evaluate(site, LAUNCH_FILES[deployment])
    argument = launched.arguments["autostart"]
    assert argument.choices == ["true", "false"]
    assert [part.text for part in argument.default_value] == ["true"]
    assert all("autostart" not in process.parameters for process in launched.processes)
    waiting = evaluate(site, LAUNCH_FILES[deployment], autostart="false")
    assert waiting.processes  # (each of them:)
    for process in waiting.processes:  # after the file: it wins over the file's autostart
        kinds = [kind for kind, _ in process.rules]
        assert process.parameters["autostart"] is False
        assert kinds.index("params-file") < process.rules.index(("p", ("autostart", False)))


def test_a_launch_argument_outside_its_choices_is_refused(site):
    with pytest.raises(RuntimeError, match="autostart"):
        evaluate(site, LAUNCH_FILES[Deployment.PROCESSES], autostart="maybe")
