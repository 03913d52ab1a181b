"""Running some nodes of a graph on this host (``GraphOptions(nodes=...)``, ``leapp-ros run
--nodes``, the launch argument ``nodes:=``): the choice, without DDS. test_multi_host.py runs a
graph split this way over two network namespaces."""

from __future__ import annotations

import pytest
from support.runner import export_seed

from leapp_ros.plan.pipeline import PlanError
from leapp_ros.plan.selection import container_name, node_names
from leapp_ros.run.deployment import Deployment, GraphOptions
from leapp_ros.run.processes import load_plan, plan_processes

COMPOSED = Deployment.COMPOSED


def processes_of(plan, deployment=Deployment.PROCESSES, *, nodes=None):
    return plan_processes(plan, GraphOptions(deployment, nodes=nodes))


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    return load_plan(export_seed(tmp_path_factory.mktemp("export")))


def test_node_names_read_comma_lists_and_repeated_options_in_order():
    assert node_names(["policy", " preprocess, filter,,"]) == ("policy", "preprocess", "filter")
    assert node_names("preprocess") == ("preprocess",)
    assert node_names("") == ()


def test_nodes_start_only_the_named_nodes_in_pipeline_order(plan):
    processes = processes_of(plan, nodes=["policy", "preprocess", "policy"])
    assert [p.label for p in processes] == ["preprocess", "policy"]
    (policy,) = processes_of(plan, nodes=["policy"])
    assert policy.pipeline_nodes == ("policy",)
    assert ("pipeline_node", "policy") in policy.parameters


def test_no_choice_starts_every_node(plan):
    assert [p.label for p in processes_of(plan)] == ["preprocess", "policy"]


def test_composed_nodes_preload_only_the_named_nodes_in_one_container(plan):
    (container,) = processes_of(plan, COMPOSED, nodes=["policy"])
    assert container.pipeline_nodes == ("policy",)
    assert container.arguments[-2:] == ("--nodes", "policy")


def test_containers_of_disjoint_shares_get_different_names(plan):
    (a,) = processes_of(plan, COMPOSED, nodes=["preprocess"])
    (b,) = processes_of(plan, COMPOSED, nodes=["policy"])
    assert (a.node_name, b.node_name) == ("leapp_container_preprocess", "leapp_container_policy")
    assert "__node:=leapp_container_policy" in b.argv("python")


def test_a_container_of_the_whole_graph_keeps_the_name_leapp_container(plan):
    for nodes in (None, ["policy", "preprocess"]):
        (container,) = processes_of(plan, COMPOSED, nodes=nodes)
        assert container.node_name == "leapp_container"


def test_container_name_depends_on_the_set_held_not_on_the_order_named():
    pipeline = ("preprocess", "filter", "policy")
    assert container_name(pipeline, ["policy", "filter"]) == "leapp_container_filter"
    assert container_name(pipeline, ["filter", "policy"]) == "leapp_container_filter"
    assert container_name(pipeline, ["policy", "preprocess", "filter"]) == "leapp_container"
    with pytest.raises(ValueError, match="not none"):
        container_name(pipeline, [])


def test_an_unknown_node_is_refused_naming_the_pipelines_nodes(plan):
    with pytest.raises(PlanError) as raised:
        processes_of(plan, nodes=["preprocess", "filter"])
    assert str(raised.value) == (
        "pipeline 'torch_pipeline' has no node 'filter'; choose among its nodes: "
        "preprocess, policy"
    )


def test_an_empty_choice_is_refused_rather_than_running_every_node(plan):
    with pytest.raises(PlanError, match=r"names none.*preprocess, policy"):
        processes_of(plan, COMPOSED, nodes=[])


def test_run_with_an_unknown_node_exits_2_naming_the_pipelines_nodes(plan, capsys):
    from leapp_ros.tools.cli import main

    assert main(["run", str(plan.spec_path), "--nodes", "preprocess", "--nodes", "plicy"]) == 2
    assert capsys.readouterr().err == (
        "leapp-ros run: pipeline 'torch_pipeline' has no node 'plicy'; choose among its "
        "nodes: preprocess, policy\n"
    )


def launch_pipeline(monkeypatch, *, as_plans: bool = True, **arguments: str) -> list:
    """What pipeline.launch.py's description (leapp_ros.run.launch_description) gives for
    ``arguments`` (the others at their defaults): each process as its ProcessPlan, or with
    ``as_plans=False`` as its launch_ros action (the log line before each is left out)."""
    pytest.importorskip("launch.actions", reason="ROS 2 launch is not installed (pip-only ROS)")
    pytest.importorskip("launch_ros.actions", reason="launch_ros is not installed")
    from launch.actions import LogInfo
    from launch.launch_context import LaunchContext

    from leapp_ros.run import launch_description

    if as_plans:
        monkeypatch.setattr(launch_description, "process_action", lambda process: process)
    context = LaunchContext()
    for argument in launch_description.pipeline_launch_description().get_launch_arguments():
        defaults = argument.default_value or []
        context.launch_configurations[argument.name] = "".join(
            part.perform(context) for part in defaults
        )
    context.launch_configurations.update(arguments)
    actions = launch_description.launch_graph(context)
    return [action for action in actions if not isinstance(action, LogInfo)]


def test_launch_argument_nodes_launches_only_the_named_nodes(plan, monkeypatch):
    (process,) = launch_pipeline(monkeypatch, pipeline=str(plan.spec_path), nodes=" policy ")
    assert process.pipeline_nodes == ("policy",)


@pytest.mark.launch
def test_launch_argument_nodes_composed_preloads_only_the_named_nodes_in_a_container_of_theirs(
    plan, monkeypatch
):
    arguments = {"pipeline": str(plan.spec_path), "nodes": "policy", "deployment": "composed"}
    (container,) = launch_pipeline(monkeypatch, as_plans=False, **arguments)
    assert container._Node__node_name == "leapp_container_policy"  # launch_ros keeps it as is
    texts = ["".join(getattr(part, "text", "") for part in item) for item in container.cmd]
    assert texts[texts.index("--nodes") + 1] == "policy"
