"""How a graph is started, as one value: the Deployment enum and GraphOptions, from Python, from
``leapp-ros run``'s options and from launch arguments (strings), each checked when made."""

from __future__ import annotations

from pathlib import Path

import pytest

from leapp_ros.plan.pipeline import PlanError
from leapp_ros.run.deployment import Deployment, GraphOptions
from leapp_ros.tools import cli

REPO = Path(__file__).resolve().parents[2]
PARAMS = REPO / "config" / "leapp_ros.yaml"


def run_options(monkeypatch, *arguments: str) -> GraphOptions:
    """The options ``leapp-ros run EXPORT arguments`` starts its graph with (nothing starts)."""
    seen = []
    monkeypatch.setattr(cli, "make_graph", lambda export, options, **_: seen.append(options))
    monkeypatch.setattr(cli, "serve", lambda graph: 0)
    assert cli.main(["run", "exports/anything", *arguments]) == 0
    return seen[0]


def test_a_deployment_is_named_as_on_the_command_line():
    assert [str(d) for d in Deployment] == ["processes", "composed", "fused"]
    assert Deployment.parse(" Fused ") is Deployment.FUSED
    assert GraphOptions("composed").deployment is Deployment.COMPOSED
    with pytest.raises(PlanError, match="unknown deployment 'both'; choose one of processes, "):
        GraphOptions("both")


def test_run_options_and_launch_arguments_give_the_same_options(monkeypatch):
    run = ["--deployment", "composed", "--namespace", "robot1/pipe", "--log-level", "WARN"]
    run += ["--params-file", str(PARAMS), "--cpu-latency-us", "0", "--pin-cpus"]
    run += ["--remap", "a:=/b", "--remap", "c:=/d", "--nodes", "policy", "--no-autostart"]
    launch = {"deployment": "composed", "namespace": "robot1/pipe", "log_level": "warn"}
    launch |= {"params_file": str(PARAMS), "cpu_latency_us": "0", "pin_cpus": "true"}
    launch |= {"remaps": "a:=/b c:=/d", "nodes": "policy", "autostart": "false"}
    from_run = run_options(monkeypatch, *run)
    from_launch = GraphOptions.from_arguments(launch)
    assert (
        from_run
        == from_launch
        == GraphOptions(
            Deployment.COMPOSED,
            namespace="/robot1/pipe",
            log_level="warn",
            params_file=PARAMS,
            cpu_latency_us=0,
            pin_cpus=True,
            remaps=("a:=/b", "c:=/d"),
            nodes=("policy",),
            autostart=False,
        )
    )


def test_no_option_and_empty_launch_arguments_are_the_defaults(monkeypatch):
    defaults = {"deployment": "processes", "pin_cpus": "false", "autostart": "true", "nodes": ""}
    assert run_options(monkeypatch) == GraphOptions.from_arguments(defaults) == GraphOptions()


@pytest.mark.parametrize("older", ["composed", "fused"])
def test_composed_and_fused_flags_are_older_forms_of_the_deployment(monkeypatch, older):
    assert run_options(monkeypatch, f"--{older}").deployment is Deployment(older)
    launch = GraphOptions.from_arguments({"deployment": "processes", older: "true"})
    assert launch.deployment is Deployment(older)


def test_two_deployments_in_launch_arguments_are_refused():
    with pytest.raises(PlanError, match=r"two deployments asked for \(composed and fused\)"):
        GraphOptions.from_arguments({"deployment": "fused", "composed": "true"})


def test_a_run_deployment_that_does_not_exist_exits_2_naming_the_choices(capsys):
    with pytest.raises(SystemExit) as caught:
        cli.main(["run", "exports/anything", "--deployment", "both"])
    assert caught.value.code == 2
    assert "unknown deployment 'both'; choose one of processes, composed, fused" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"pin_cpus": "yes"}, "pin_cpus must be true or false"),
        ({"cpu_latency_us": "fast"}, "cpu_latency_us must be a whole number"),
        ({"remaps": "preprocess/state"}, "remap rule 'preprocess/state' is not FROM:=TO"),
        ({"log_level": "loud"}, "unknown log level 'loud'"),
        ({"params_file": "/nowhere.yaml"}, "parameters file /nowhere.yaml does not exist"),
    ],
)
def test_a_launch_argument_that_does_not_fit_is_refused_naming_it(arguments, named):
    with pytest.raises(PlanError, match=named):
        GraphOptions.from_arguments(arguments)
