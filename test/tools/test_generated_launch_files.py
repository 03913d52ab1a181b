"""The launch files of a generated package, installed with pip and evaluated by the real launch
stack (launch, launch_ros from ``../shared/ros2-launch``, as CI has them): what each starts,
with which parameters in which order, and the ``autostart`` argument given to every node.
test_ros2_workspace.py builds, tests and launches the same package with colcon and
``ros2 launch``."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.generated import evaluate_launch_file, install

from leapp_ros.tools.generate import generate_package

pytest.importorskip(
    "launch_ros.actions",
    reason="the ROS 2 launch stack is not installed (launch, launch_ros): use a ROS 2 install, "
    "or run scripts/setup.sh with ../shared/ros2-launch present",
)

pytestmark = pytest.mark.launch

PACKAGE = "torch_pipeline_ros"
NODES = ("preprocess", "policy")
LAUNCH_FILES = ("torch_pipeline.launch.py", "torch_pipeline_composed.launch.py",
                "torch_pipeline_fused.launch.py")  # fmt: skip


@pytest.fixture(scope="module")
def site(seed, tmp_path_factory) -> Path:
    package = generate_package(seed.path, tmp_path_factory.mktemp("src")).path
    return install(package, tmp_path_factory.mktemp("pip") / "site")


def evaluate(site: Path, name: str, **arguments: str):
    return evaluate_launch_file(site / "share" / PACKAGE / "launch" / name, site, **arguments)


def test_launch_file_starts_one_leapp_node_per_pipeline_node(site):
    launched = evaluate(site, "torch_pipeline.launch.py")
    assert sorted(launched.arguments) == ["autostart", "log_level", "namespace", "params_file"]
    share = site / "share" / PACKAGE
    assert [process.name for process in launched.processes] == list(NODES)
    for process in launched.processes:
        assert process.executable.parts[-3:] == ("lib", "leapp_ros", "leapp_node")
        assert process.namespace == "/torch_pipeline"
        assert process.parameters == {
            "spec_path": str(share / "export" / "torch_pipeline.yaml"),
            "pipeline_node": process.name,
            "autostart": True,
        }
        # the parameters file last: what it sets wins over the rules before it
        assert process.rules[-1] == ("params-file", str(share / "config" / "torch_pipeline.yaml"))
    assert launched.containers == []


def test_composed_launch_file_starts_one_leapp_container(site):
    launched = evaluate(site, "torch_pipeline_composed.launch.py")
    assert launched.processes == []
    [(container, components)] = launched.containers
    assert container.executable.parts[-3:] == ("lib", "leapp_ros", "leapp_container")
    assert container.namespace == "/torch_pipeline"
    assert [component.name for component in components] == list(NODES)
    share = site / "share" / PACKAGE
    for component in components:
        assert (component.package, component.plugin) == ("leapp_ros", "leapp_ros::PipelineNode")
        assert component.namespace == "/torch_pipeline"
        autostart, params_file, fixed = component.parameters  # fixed last: they win
        assert autostart == {"autostart": True}
        assert Path(params_file) == share / "config" / "torch_pipeline.yaml"
        assert fixed == {
            "spec_path": str(share / "export" / "torch_pipeline.yaml"),
            "pipeline_node": component.name,
        }


def test_fused_launch_file_starts_one_leapp_fused_node(site):
    launched = evaluate(site, "torch_pipeline_fused.launch.py")
    [process] = launched.processes
    assert process.executable.parts[-3:] == ("lib", "leapp_ros", "leapp_fused")
    assert (process.name, process.namespace) == ("leapp_fused", "/torch_pipeline")
    share = site / "share" / PACKAGE
    assert process.parameters == {
        "spec_path": str(share / "export" / "torch_pipeline.yaml"),
        "autostart": True,
    }
    assert process.rules[-1] == ("params-file", str(share / "config" / "torch_pipeline.yaml"))


@pytest.mark.parametrize("name", LAUNCH_FILES)
def test_every_launch_file_declares_autostart_true_and_gives_it_to_every_node(site, name):
    launched = evaluate(site, name)
    argument = launched.arguments["autostart"]
    assert argument.choices == ["true", "false"]
    assert [part.text for part in argument.default_value] == ["true"]
    for value, expected in (("true", True), ("false", False)):
        launched = evaluate(site, name, autostart=value)
        processes = launched.processes
        for process in processes:  # a -p rule before the parameters file (a file's wins)
            assert process.parameters["autostart"] is expected
            rules = [kind if kind != "p" else text.split(":=")[0] for kind, text in process.rules]
            assert rules.index("autostart") < rules.index("params-file")
        components = [c for _, found in launched.containers for c in found]
        for component in components:  # the first entry of the load request: the file's wins
            assert component.parameters[0] == {"autostart": expected}
        assert len(processes) + len(components) == (1 if "_fused" in name else len(NODES))


def test_a_launch_argument_outside_its_choices_is_refused(site):
    with pytest.raises(RuntimeError, match="autostart"):
        evaluate(site, "torch_pipeline.launch.py", autostart="maybe")
