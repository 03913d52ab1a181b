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


def test_ros_args_as_ros2_users_type_them_give_the_options_of_run_s_own_flags(monkeypatch):
    own = ["--remap", "preprocess/state:=/state", "--remap", "policy/action:=/cmd"]
    own += ["--namespace", "/robot1", "--params-file", str(PARAMS), "--log-level", "warn"]
    ros = ["--ros-args", "-r", "preprocess/state:=/state", "--remap", "policy/action:=/cmd"]
    ros += ["-r", "__ns:=/robot1", "--params-file", str(PARAMS), "--log-level", "WARN", "--"]
    assert run_options(monkeypatch, *ros, "--fused") == run_options(monkeypatch, *own, "--fused")
    # the remaps of --remap come first, then those of --ros-args
    both = run_options(monkeypatch, "--remap", "a:=/b", "--ros-args", "-r", "c:=/d")
    assert both.remaps == ("a:=/b", "c:=/d")


@pytest.mark.parametrize(
    ("ros_args", "says"),
    [
        (["-p", "firing:=timer"], "-p sets a parameter of one node; for a graph, write it in a"),
        (["-r", "__node:=policy"], "__node:=policy would give every node of the graph one name"),
        (["-e", "x"], "'-e' is not taken by leapp-ros run (it takes -r/--remap, --params-file"),
        (["-r"], "-r needs a value"),
        (["--log-level", "loud"], "--log-level loud: one of debug, info, warn, error, fatal"),
    ],
)
def test_ros_args_run_cannot_apply_to_a_graph_exit_2_saying_what_to_write(capsys, ros_args, says):
    with pytest.raises(SystemExit) as caught:
        cli.main(["run", "exports/anything", "--ros-args", *ros_args])
    assert caught.value.code == 2
    assert says in capsys.readouterr().err


def test_an_option_given_before_and_in_ros_args_is_refused_not_overridden(capsys):
    with pytest.raises(SystemExit) as caught:
        cli.main(["run", "x", "--log-level", "info", "--ros-args", "--log-level", "warn"])
    assert caught.value.code == 2
    assert "--log-level is given twice (before and after --ros-args)" in capsys.readouterr().err


def test_only_run_takes_ros_args(capsys):
    with pytest.raises(SystemExit) as caught:
        cli.main(["inspect", "exports/anything", "--ros-args", "-r", "a:=/b"])
    assert caught.value.code == 2
    assert "only 'run' takes ROS arguments, not 'inspect'" in capsys.readouterr().err
