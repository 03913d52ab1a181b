"""Each node at its own rate: one graph runs a node on every input, a policy on a timer of its
own (the spec's ``pipeline.configs.node_frequency``) with the newest encoder output, and an
output node on another timer (the parameters file), over real DDS.

The plan (``leapp-ros inspect``, the runner, launch and generated packages all take it from
:func:`~leapp_ros.run.processes.load_plan`) and each node's status record name its rule; the
live graph shows it through events: one frame makes the encoder run once, while the two timer
nodes keep answering on the newest values, every answer as eager PyTorch computes it. A fused
node runs every node per tick, at one rate: it refuses a spec whose nodes have rates of their
own unless it is given its rate, and then runs the chain at that rate.
"""

from __future__ import annotations

import pytest
import torch
import yaml
from support.rates import POLICY_HZ, eager_chain, export_chain

from leapp.errors import LeappError
from leapp_ros.plan.settings import StartupError
from leapp_ros.run.processes import load_plan, plan_processes
from leapp_ros.testing import Deployment, GraphOptions, GraphUnderTest
from leapp_ros.tools.inspection import describe_plan

POST_HZ = 20.0  # the output node's rate, from the parameters file
FUSED_HZ = 25.0
ANSWERS = 4  # answers of each timer node to one frame


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    return export_chain(tmp_path_factory.mktemp("chain"))


def _params(folder, sections: dict) -> object:
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump({node: {"ros__parameters": s} for node, s in sections.items()}))
    return path


@pytest.fixture(scope="module")
def params(tmp_path_factory):
    return _params(
        tmp_path_factory.mktemp("params"),
        {
            "/chain/post": {"firing": "timer", "rate_hz": POST_HZ},
            "/chain/leapp_fused": {"firing": "timer", "rate_hz": FUSED_HZ},
        },
    )


def test_the_plan_has_each_nodes_rate_from_the_spec_and_the_parameters_file(chain, params):
    plan = load_plan(chain, params_file=params)
    rules = {node.name: (node.firing.mode, node.firing.rate_hz) for node in plan.nodes}
    assert rules == {
        "encoder": ("inputs", 10.0),
        "policy": ("timer", POLICY_HZ),
        "post": ("timer", POST_HZ),
    }
    assert {p.label: p.describe_firing() for p in plan_processes(plan)} == {
        "encoder": "encoder: inputs",
        "policy": "policy: timer at 50 Hz",
        "post": "post: timer at 20 Hz",
    }
    assert load_plan(chain).node("post").firing.mode == "inputs", "the file made it a timer"
    nodes = describe_plan(plan).split("\n\n")[1].splitlines()  # leapp-ros inspect's table
    assert [line.split()[3:5] for line in nodes[2:]] == [
        ["inputs", "10"],
        ["timer", "50"],
        ["timer", "20"],
    ]


def test_a_generated_packages_parameters_file_says_how_each_node_runs(chain):
    from leapp_ros.tools.templates.package_info import PackageInfo
    from leapp_ros.tools.templates.parameters import parameters_yaml

    info = PackageInfo("chain_ros", "chain", load_plan(chain), "chain.yaml", ("chain.yaml",))
    runs = [line.strip() for line in parameters_yaml(info).splitlines() if "# runs:" in line]
    assert runs == ["# runs: inputs", "# runs: timer at 50 Hz", "# runs: inputs"]


def test_the_parameters_file_can_put_a_spec_rated_node_back_on_its_inputs(chain, tmp_path):
    params = _params(tmp_path, {"/**": {"firing": "inputs"}})
    assert {node.firing.mode for node in load_plan(chain, params_file=params).nodes} == {"inputs"}


def test_a_firing_parameter_the_node_would_refuse_is_a_plan_error(chain, tmp_path):
    params = _params(tmp_path, {"/chain/policy": {"firing": "timer", "triggers": ["feature"]}})
    with pytest.raises(LeappError, match=r"params.yaml.*'policy'.*unset one of them"):
        load_plan(chain, params_file=params)


def test_a_node_frequency_naming_no_node_is_refused(chain, tmp_path):
    spec = yaml.safe_load(chain.read_text())
    spec["pipeline"]["configs"]["node_frequency"] = {"polcy": 50}
    broken = chain.parent / "broken.yaml"
    broken.write_text(yaml.safe_dump(spec))
    with pytest.raises(LeappError, match=r"node_frequency names 'polcy'.*\['encoder'"):
        load_plan(broken)


def test_a_fused_node_refuses_nodes_of_different_rates_without_a_rate_of_its_own(chain):
    from leapp_ros.node.fused_stages import tick_firing
    from leapp_ros.plan.settings import PARAMETERS

    settings = {name: default for name, default, _ in PARAMETERS} | {"triggers": None}
    with pytest.raises(StartupError, match=r"runs every node\s+per tick, at one rate"):
        tick_firing(load_plan(chain), settings)
    with pytest.raises(StartupError, match=r"-p firing:=timer -p rate_hz:=<Hz>"):
        tick_firing(load_plan(chain), settings | {"rate_hz": 30.0})  # which rule, then?
    given = tick_firing(load_plan(chain), settings | {"firing": "timer", "rate_hz": 30.0})
    assert (given.mode, given.rate_hz) == ("timer", 30.0)
    given = tick_firing(load_plan(chain), settings | {"firing": "inputs"})
    assert (given.mode, given.rate_hz) == ("inputs", 10.0), "the pipeline's frequency"


@pytest.fixture(scope="module", params=list(Deployment))
def graph(request, chain, params):
    with GraphUnderTest(chain, GraphOptions(request.param, params_file=params)) as started:
        yield started


@pytest.mark.ros
def test_one_frame_runs_the_encoder_once_and_the_timer_nodes_again_and_again(graph):
    rules = {
        name: (record["firing"], record["rate_hz"]) for name, record in graph.status().items()
    }
    if graph.fused:
        assert set(rules.values()) == {("timer", FUSED_HZ)}, "one tick runs every node"
    else:
        assert rules == {
            "encoder": ("inputs", 10.0),
            "policy": ("timer", POLICY_HZ),
            "post": ("timer", POST_HZ),
        }
    frame = torch.randn(4)
    graph.publish({"encoder/frame": frame})
    expected = eager_chain(frame)
    graph.probe.spin_until(
        lambda: all(
            len(graph.received(key)) >= ANSWERS for key in ("policy/action", "post/command")
        ),
        graph.timeout_s,
        f"{ANSWERS} answers of policy and post to one frame",
    )
    for key in ("encoder/feature", "policy/action", "post/command"):
        for value in graph.received(key):
            torch.testing.assert_close(value, expected[key], rtol=1e-5, atol=1e-6)
    if not graph.fused:
        runs = graph.probe.spin_until(
            lambda: graph.status()["encoder"]["runs"] or None, graph.timeout_s, "encoder run"
        )
        assert runs == 1 and len(graph.received("encoder/feature")) == 1
