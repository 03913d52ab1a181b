"""leapp_node and leapp_container over real DDS (rclpy + Fast DDS, localhost, a domain per
graph) at their deployed QoS: results equal eager PyTorch, one output per input, every dtype
on a topic, state, feedback, malformed messages, timer firing, stale inputs, startup errors and
clean shutdown. Each test sends every message once, on hops matched both ways
(:meth:`~leapp_ros.testing.Probe.wait_connected`), and checks that something did not happen
only after the nodes' statuses count the input it is about
(:meth:`~leapp_ros.testing.Probe.wait_received`)."""

from __future__ import annotations

import collections
import contextlib
import shutil
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from support.ros import (
    eager_seed,
    exited,
    node_args,
    ros_graph,
    run_to_exit,
    startup_error_line,
)

import leapp
from leapp import annotate
from leapp import session as session_module
from leapp.spec import load
from leapp_ros.messages.multiarray import SUPPORTED_DTYPES, PortCodec
from leapp_ros.plan.pipeline import make_plan
from leapp_ros.testing import reserve_domain_id

pytestmark = pytest.mark.ros

SEED_NS = "/torch_pipeline"


def codec(dtype: str, *shape: int) -> PortCodec:
    return PortCodec(dtype, shape)


F32 = {n: codec("float32", n) for n in (1, 3, 6, 9)}
I64 = codec("int64", 1)


# --- the seed pipeline, one process per node and in one container ---------------------------


def seed_endpoints(probe, namespace: str = SEED_NS):
    from std_msgs.msg import Float32MultiArray

    return SimpleNamespace(
        probe=probe,
        namespace=namespace,
        state=probe.publisher(f"{namespace}/preprocess/state", Float32MultiArray),
        velocity=probe.publisher(f"{namespace}/preprocess/velocity", Float32MultiArray),
        obs=probe.subscribe(f"{namespace}/preprocess/obs", Float32MultiArray),
        actions=probe.subscribe(f"{namespace}/policy/action", Float32MultiArray),
        sent=collections.Counter(),  # messages published per topic
    )


def publish(graph, publisher, message) -> None:
    """Publish ``message`` once and count it in ``graph.sent``."""
    publisher.publish(message)
    graph.sent[publisher.topic_name] += 1


def send_seed(graph, state, velocity) -> None:
    publish(graph, graph.state, F32[6].to_message(state))
    publish(graph, graph.velocity, F32[3].to_message(velocity))


def taken(graph, namespace=None):
    """The statuses once the nodes took every message ``graph`` sent."""
    return graph.probe.wait_received(namespace or graph.namespace, graph.sent)


@pytest.fixture(scope="class", params=["process_per_node", "container"])
def seed_graph(request, seed, tmp_path_factory):
    if request.param == "container":
        starts = [("leapp_ros.run.container", [str(seed.path)])]
    else:
        starts = [
            ("leapp_ros.node.pipeline_node", node_args(seed.path, node, SEED_NS))
            for node in ("preprocess", "policy")
        ]
    with ros_graph(tmp_path_factory.mktemp(request.param), starts) as (probe, processes, _):
        graph = seed_endpoints(probe)
        graph.processes = processes
        probe.wait_connected(SEED_NS, ["preprocess", "policy"], check=exited(processes))
        yield graph


class TestSeedPipeline:
    def test_topics_and_types_are_those_of_the_plan(self, seed_graph, seed):
        expected = dict(make_plan(load(seed.path)).topics())
        expected[f"{SEED_NS}/_leapp/status"] = "std_msgs/msg/String"
        assert set(expected) == {
            f"{SEED_NS}/{topic}"
            for topic in (
                "preprocess/state",
                "preprocess/velocity",
                "preprocess/obs",
                "policy/action",
                "_leapp/status",
            )
        }

        def found():
            graph = dict(seed_graph.probe.node.get_topic_names_and_types())
            return {name: graph.get(name) for name in expected}

        seed_graph.probe.spin_until(
            lambda: all(found().values()), 10, f"topics {sorted(expected)}"
        )
        assert found() == {name: [kind] for name, kind in expected.items()}

    def test_each_input_pair_yields_exactly_one_action_equal_to_eager(self, seed_graph, seed):
        graph = seed_graph
        for index in range(20):
            state, velocity = torch.randn(6) * 3, torch.randn(3)
            send_seed(graph, state, velocity)
            graph.probe.spin_until(
                lambda i=index: len(graph.actions) > i and len(graph.obs) > i,
                10,
                f"action {index}",
            )
            obs, action = eager_seed(seed, state, velocity)
            got_obs = F32[9].from_message(graph.obs[index])
            got_action = F32[6].from_message(graph.actions[index])
            torch.testing.assert_close(got_obs, obs, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(got_action, action, rtol=1e-5, atol=1e-5)
        taken(graph)  # every input taken: nothing more can come of them
        assert (len(graph.obs), len(graph.actions)) == (20, 20)

    def test_signal_stops_every_node_with_exit_code_0_and_a_stopping_status(self, seed_graph):
        latest = seed_graph.probe.watch_status(SEED_NS)
        codes = [process.stop(signal.SIGINT) for process in seed_graph.processes]
        assert codes == [0] * len(codes), [p.output for p in seed_graph.processes]
        seed_graph.probe.spin_until(
            lambda: all(latest[n]["state"] == "stopping" for n in ("preprocess", "policy")),
            5,
            "stopping status",
        )
        assert latest["policy"]["runs"] >= 20


# --- a diamond: A -> B, A -> C, (B, C) -> D ---------------------------------------------------


def diamond(x):
    x = annotate.input_tensors("a", {"x": x})
    y = x * 2 + 1
    annotate.output_tensors("a", {"y": y}, export_with="jit")
    u = annotate.input_tensors("b", {"y": y})
    u = annotate.output_tensors("b", {"u": torch.sin(u)}, export_with="jit")
    v = annotate.input_tensors("c", {"y": y})
    v = annotate.output_tensors("c", {"v": torch.cos(v) * 3}, export_with="onnx")
    u, v = annotate.input_tensors("d", {"u": u, "v": v})
    z = u * v + u
    annotate.output_tensors("d", {"z": z}, export_with="jit")
    return z


class TestDiamond:
    @pytest.fixture(scope="class")
    def graph(self, tmp_path_factory):
        from std_msgs.msg import Float32MultiArray

        session_module._active = None
        leapp.start("diamond", save_path=tmp_path_factory.mktemp("diamond"))
        diamond(torch.randn(3))
        leapp.stop()
        path = leapp.compile_graph().path
        starts = [("leapp_ros.run.container", [str(path)])]
        with ros_graph(tmp_path_factory.mktemp("diamond_run"), starts) as (probe, processes, _):
            x = probe.publisher("/diamond/a/x", Float32MultiArray)
            z = probe.subscribe("/diamond/d/z", Float32MultiArray)
            probe.wait_connected("/diamond", ["a", "b", "c", "d"], check=exited(processes))
            sent = collections.Counter()
            yield SimpleNamespace(probe=probe, namespace="/diamond", x=x, z=z, sent=sent)

    def test_one_output_of_d_per_input_of_a(self, graph):
        for index in range(20):
            x = torch.randn(3)
            publish(graph, graph.x, F32[3].to_message(x))
            graph.probe.spin_until(lambda i=index: len(graph.z) > i, 10, f"output {index}")
            with torch.no_grad():
                expected = diamond(x)
            torch.testing.assert_close(F32[3].from_message(graph.z[index]), expected)
        status = taken(graph)  # every input taken by every node: nothing more can come
        assert len(graph.z) == status["d"]["runs"] == 20


# --- every dtype on a topic, recurrent state, malformed messages ------------------------------

OPS = {
    "bool": torch.logical_not,
    "uint8": lambda x: x + 1,
    "uint16": torch.clone,
    "uint32": torch.clone,
    "uint64": torch.clone,
}
INITIAL_H = torch.full((3,), 0.5)


def dtype_op(dtype):
    if dtype in OPS:
        return OPS[dtype]
    if getattr(torch, dtype).is_floating_point:
        return lambda x: x * 2 + 1
    return lambda x: x + 3


def sample(dtype, shape):
    if dtype == "bool":
        return torch.rand(shape) > 0.5
    if getattr(torch, dtype).is_floating_point:
        return torch.randn(shape).to(getattr(torch, dtype))
    return torch.randint(0, 100, shape).to(getattr(torch, dtype))


def trace_dtypes_and_state():
    for dtype in SUPPORTED_DTYPES:
        node = f"n_{dtype}"
        scalar, cube = annotate.input_tensors(
            node, {"scalar": sample(dtype, ()), "cube": sample(dtype, (2, 3, 4))}
        )
        op = dtype_op(dtype)
        annotate.output_tensors(node, {"scalar_out": op(scalar), "cube_out": op(cube)})
    h = INITIAL_H.clone()
    for _ in range(2):  # a recurrent accumulator: h <- h + x
        x = annotate.input_tensors("acc", {"x": torch.randn(3)})
        h_in = annotate.state_tensors("acc", {"h": h})
        h = annotate.update_state("acc", {"h": h_in + x})
        annotate.output_tensors("acc", {"total": h.sum()})


class TestDtypesStateAndMalformed:
    @pytest.fixture(scope="class")
    def graph(self, tmp_path_factory):
        session_module._active = None
        leapp.start("dtypes", save_path=tmp_path_factory.mktemp("dtypes"))
        with torch.no_grad():
            trace_dtypes_and_state()
        leapp.stop()
        path = leapp.compile_graph().path
        starts = [("leapp_ros.run.container", [str(path)])]
        with ros_graph(tmp_path_factory.mktemp("dtypes_run"), starts) as (probe, processes, _):
            nodes = [f"n_{dtype}" for dtype in SUPPORTED_DTYPES] + ["acc"]
            ports = {}
            for dtype in SUPPORTED_DTYPES:
                for port, shape in (("scalar", ()), ("cube", (2, 3, 4))):
                    port_codec = PortCodec(dtype, shape)
                    topic = f"/dtypes/n_{dtype}/{port}"
                    ports[dtype, port] = SimpleNamespace(
                        codec=port_codec,
                        publisher=probe.publisher(topic, port_codec.message_class),
                        inbox=probe.subscribe(f"{topic}_out", port_codec.message_class),
                    )
            acc_x = probe.publisher("/dtypes/acc/x", F32[3].message_class)
            acc_h = probe.subscribe("/dtypes/acc/h", F32[3].message_class)
            status = probe.wait_connected("/dtypes", nodes, check=exited(processes))
            sent = collections.Counter()
            graph = SimpleNamespace(probe=probe, namespace="/dtypes", ports=ports, status=status,
                                    x=acc_x, h=acc_h, sent=sent, processes=processes)  # fmt: skip
            yield graph

    def send(self, graph, dtype, scalar, cube):
        for port, value in (("scalar", scalar), ("cube", cube)):
            entry = graph.ports[dtype, port]
            publish(graph, entry.publisher, entry.codec.to_message(value))

    def receive(self, graph, dtype, count=1):
        inboxes = [graph.ports[dtype, port].inbox for port in ("scalar", "cube")]
        graph.probe.spin_until(
            lambda: all(len(inbox) >= count for inbox in inboxes), 10, f"{dtype} outputs"
        )
        return [
            graph.ports[dtype, port].codec.from_message(inbox[count - 1])
            for port, inbox in zip(("scalar", "cube"), inboxes, strict=True)
        ]

    @pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
    def test_every_dtype_round_trips_through_a_topic(self, graph, dtype):
        scalar, cube = sample(dtype, ()), sample(dtype, (2, 3, 4))
        self.send(graph, dtype, scalar, cube)
        got_scalar, got_cube = self.receive(graph, dtype)
        op = dtype_op(dtype)
        assert got_scalar.dtype == got_cube.dtype == getattr(torch, dtype)
        torch.testing.assert_close(got_scalar, op(scalar))
        torch.testing.assert_close(got_cube, op(cube))

    def test_state_input_starts_from_the_initial_value_and_carries_over(self, graph):
        xs = [torch.randn(3) for _ in range(3)]
        for index, x in enumerate(xs):
            publish(graph, graph.x, F32[3].to_message(x))
            graph.probe.spin_until(lambda i=index: len(graph.h) > i, 10, f"acc output {index}")
        expected = INITIAL_H + torch.cumsum(torch.stack(xs), 0)
        got = torch.stack([F32[3].from_message(message) for message in graph.h])
        torch.testing.assert_close(got, expected)

    @pytest.mark.parametrize(
        ("dtype", "malformed"),
        [("float64", "wrong_length"), ("int32", "wrong_layout"), ("uint8", "data_offset")],
    )
    def test_malformed_message_is_dropped_counted_and_the_next_good_one_runs(
        self, graph, dtype, malformed
    ):
        entry = graph.ports[dtype, "cube"]
        good = sample(dtype, (2, 3, 4))
        bad = entry.codec.to_message(good)
        if malformed == "wrong_length":
            bad.data = bad.data[:-1]
        elif malformed == "wrong_layout":
            bad.layout = PortCodec(dtype, (4, 3, 2)).to_message(good.reshape(4, 3, 2)).layout
        else:
            bad.layout.data_offset = 2
        before = len(entry.inbox)
        node = f"n_{dtype}"
        counted = taken(graph)[node]
        publish(graph, entry.publisher, bad)
        assert taken(graph)[node]["dropped"] == counted["dropped"] + 1
        # the bad cube's partner completes its set, which is dropped whole, not answered
        partner = graph.ports[dtype, "scalar"]
        publish(graph, partner.publisher, partner.codec.to_message(sample(dtype, ())))
        status = taken(graph)[node]
        assert status["incomplete_sets"] == counted["incomplete_sets"] + 1
        assert status["runs"] == counted["runs"] and len(entry.inbox) == before
        scalar = sample(dtype, ())
        self.send(graph, dtype, scalar, good)
        _, got_cube = self.receive(graph, dtype, before + 1)
        torch.testing.assert_close(got_cube, dtype_op(dtype)(good))
        assert graph.status[node]["state"] == "ready" and graph.status[node]["errors"] == 0

    def test_malformed_messages_are_logged_at_most_once_a_second_per_topic(self, graph):
        entry = graph.ports["int8", "cube"]
        line = "dropped a message on /dtypes/n_int8/cube"
        logged = graph.processes[0].output.count(line)
        dropped = taken(graph)["n_int8"]["dropped"]
        started = time.monotonic()
        for count in range(1, 6):  # one at a time: a second one could replace the first
            publish(graph, entry.publisher, entry.codec.message_class())  # no elements at all
            assert taken(graph)["n_int8"]["dropped"] == dropped + count
        seconds = time.monotonic() - started  # at least the time the node took them in
        # the node logs in the callback that drops, before its status counts the drop
        warnings = graph.processes[0].output.count(line) - logged
        assert 1 <= warnings <= 1 + int(seconds), f"{warnings} warnings in {seconds:.2f} s"


# --- feedback between nodes, exceptions inside a model ----------------------------------------

TABLE = torch.tensor([10.0, 20.0, 30.0, 40.0])
INITIAL_FB = 0.25


def export_feedback_and_pick(save_path: Path) -> Path:
    """p(x, fb) -> out, q(out) -> y = 2 * out fed back to p/fb on the next tick; pick(index)
    -> TABLE[index], which fails for an index out of range. The feedback edge is added to the
    exported spec by hand, as an export with feedback_flow between two nodes would have it."""
    from safetensors.torch import save_file

    from leapp import spec as spec_file

    session_module._active = None
    leapp.start("fb", save_path=save_path)
    with torch.no_grad():
        x, fb = annotate.input_tensors("p", {"x": torch.randn(3), "fb": torch.randn(3)})
        out = annotate.output_tensors("p", {"out": x + fb})
        y = annotate.input_tensors("q", {"out": out})
        annotate.output_tensors("q", {"y": y * 2})
        index = annotate.input_tensors("pick", {"index": torch.tensor([1])})
        annotate.output_tensors("pick", {"value": TABLE.index_select(0, index)})
    leapp.stop()
    spec = leapp.compile_graph().spec
    save_file({"p/fb": torch.full((3,), INITIAL_FB)}, str(spec.directory / "fb_initial.st"))
    pipeline = replace(
        spec.pipeline,
        inputs={"p": ("x",), "pick": ("index",)},
        outputs={"pick": ("value",)},
        feedback_flow={"q/y": ("p/fb",)},
        initial_values="fb_initial.st",
    )
    return spec_file.dump(replace(spec, pipeline=pipeline), spec.path).directory


class TestFeedbackAndModelErrors:
    @pytest.fixture(scope="class")
    def graph(self, tmp_path_factory):
        path = export_feedback_and_pick(tmp_path_factory.mktemp("fb"))
        starts = [("leapp_ros.run.container", [str(path)])]
        with ros_graph(tmp_path_factory.mktemp("fb_run"), starts) as (probe, processes, _):
            graph = SimpleNamespace(
                probe=probe,
                namespace="/fb",
                sent=collections.Counter(),
                x=probe.publisher("/fb/p/x", F32[3].message_class),
                out=probe.subscribe("/fb/p/out", F32[3].message_class),
                y=probe.subscribe("/fb/q/y", F32[3].message_class),
                index=probe.publisher("/fb/pick/index", I64.message_class),
                value=probe.subscribe("/fb/pick/value", F32[1].message_class),
            )
            graph.status = probe.wait_connected("/fb", ["p", "q", "pick"], check=exited(processes))
            yield graph

    def test_feedback_starts_from_the_initial_value_and_never_triggers(self, graph):
        probe = graph.probe
        fed_back = torch.full((3,), INITIAL_FB)
        for index in range(5):
            x = torch.randn(3)
            publish(graph, graph.x, F32[3].to_message(x))
            probe.spin_until(lambda i=index: len(graph.y) > i, 10, f"output {index}")
            taken(graph)  # p took the fed-back y before the next x reaches it
            torch.testing.assert_close(F32[3].from_message(graph.out[index]), x + fed_back)
            fed_back = F32[3].from_message(graph.y[index])
            torch.testing.assert_close(fed_back, 2 * F32[3].from_message(graph.out[index]))
        status = taken(graph)
        # one run of p per x: the fed-back values it took (one per run of q) never fired it
        assert status["p"]["runs"] == status["q"]["runs"] == 5
        assert status["p"]["received_on"]["/fb/q/y"] == 5
        assert len(graph.out) == len(graph.y) == 5

    def test_exception_in_the_model_is_counted_and_the_node_keeps_running(self, graph):
        probe = graph.probe
        errors = taken(graph)["pick"]["errors"]
        publish(graph, graph.index, I64.to_message(torch.tensor([7])))  # out of range: raises
        status = taken(graph)["pick"]
        assert status["errors"] == errors + 1 and graph.value == []
        publish(graph, graph.index, I64.to_message(torch.tensor([2])))
        probe.spin_until(lambda: graph.value, 5, "the next output")
        assert F32[1].from_message(graph.value[0]).tolist() == [30.0]
        assert taken(graph)["pick"]["state"] == "ready"


# --- firing on a timer, stale inputs, SIGTERM -------------------------------------------------


MAX_AGE_S = 2.0  # generous: a fresh pair must reach the node within it, however loaded


class TestTimerAndStaleness:
    @pytest.fixture(scope="class")
    def graph(self, seed, tmp_path_factory):
        starts = [
            ("leapp_ros.node.pipeline_node", node_args(seed.path, "preprocess", "/timed",
                                         "-p", "firing:=timer", "-p", "rate_hz:=50")),
            ("leapp_ros.node.pipeline_node", node_args(seed.path, "preprocess", "/aged",
                                         "-p", f"max_input_age:={MAX_AGE_S}")),
        ]  # fmt: skip
        with ros_graph(tmp_path_factory.mktemp("timer"), starts) as (probe, processes, _):
            graphs = {ns: seed_endpoints(probe, f"/{ns}") for ns in ("timed", "aged")}
            for ns in graphs:
                probe.wait_connected(f"/{ns}", ["preprocess"], check=exited(processes))
            yield SimpleNamespace(probe=probe, processes=processes, **graphs)

    def test_timer_fires_at_rate_hz_on_the_latest_inputs(self, graph, seed):
        from diagnostic_msgs.msg import DiagnosticArray

        timed, probe = graph.timed, graph.probe
        reports = probe.subscribe("/diagnostics", DiagnosticArray)
        state, velocity = torch.randn(6), torch.randn(3)
        send_seed(timed, state, velocity)
        # one pair, many runs: the timer fires on the latest inputs, not on their arrival
        probe.spin_until(lambda: len(timed.obs) >= 10, 20, "10 outputs of one input pair")
        expected, _ = eager_seed(seed, state, velocity)
        for message in timed.obs:
            torch.testing.assert_close(F32[9].from_message(message), expected)

        def rates() -> list[float]:  # as the node measures it, between its periodic reports
            return [float(value.value) for report in reports for status in report.status
                    if status.name == "/timed/preprocess" for value in status.values
                    if value.key == "firing_rate_hz" and float(value.value) > 0]  # fmt: skip

        probe.spin_until(rates, 20, "a firing rate in the node's diagnostics")
        # never faster than rate_hz (a loaded machine may make it slower: no lower bound here)
        assert all(rate <= 50 * 1.1 for rate in rates()), rates()
        new_state = torch.randn(6)
        publish(timed, timed.state, F32[6].to_message(new_state))  # only one input changes
        expected, _ = eager_seed(seed, new_state, velocity)
        probe.spin_until(
            lambda: torch.allclose(F32[9].from_message(timed.obs[-1]), expected),
            5,
            "an output computed from the latest state",
        )

    def test_inputs_older_than_max_input_age_are_skipped_and_counted_stale(self, graph, seed):
        aged, probe = graph.aged, graph.probe
        publish(aged, aged.state, F32[6].to_message(torch.randn(6)))
        taken(aged)  # the node holds the state from now on (or earlier)
        probe.spin_for(MAX_AGE_S + 0.5)  # what is tested: the state grows older than allowed
        publish(aged, aged.velocity, F32[3].to_message(torch.randn(3)))
        status = taken(aged)["preprocess"]
        assert (status["stale"], status["runs"]) == (1, 0) and aged.obs == []
        # the skipped run left only the state pending: a new velocity waits for a new state
        state, velocity = torch.randn(6), torch.randn(3)
        publish(aged, aged.velocity, F32[3].to_message(velocity))
        status = taken(aged)["preprocess"]
        assert status["runs"] == 0 and aged.obs == []
        publish(aged, aged.state, F32[6].to_message(state))
        probe.spin_until(lambda: aged.obs, 5, "an output from fresh inputs")
        torch.testing.assert_close(
            F32[9].from_message(aged.obs[0]), eager_seed(seed, state, velocity)[0]
        )

    def test_sigterm_stops_a_node_with_exit_code_0(self, graph):
        latest = graph.probe.watch_status("/timed")
        assert graph.processes[0].stop(signal.SIGTERM) == 0, graph.processes[0].output
        graph.probe.spin_until(
            lambda: latest["preprocess"]["state"] == "stopping", 5, "stopping status"
        )


@pytest.mark.parametrize("module", ["leapp_ros.node.pipeline_node", "leapp_ros.run.container"])
def test_sigint_repeated_while_stopping_still_exits_0(seed, tmp_path, module):
    """A terminal's Ctrl-C under ros2 launch reaches a node twice (from the terminal, then from
    launch): the second SIGINT must not kill the process while it exits."""
    one_node = module == "leapp_ros.node.pipeline_node"
    args = node_args(seed.path, "preprocess", SEED_NS) if one_node else [str(seed.path)]
    with ros_graph(tmp_path, [(module, args)]) as (probe, processes, _):
        process = processes[0]
        nodes = ["preprocess"] if one_node else ["preprocess", "policy"]
        probe.wait_ready(SEED_NS, nodes, check=exited(processes))
        while process.running():  # SIGINT every 0.1 s until the process has ended
            process.process.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.process.wait(0.1)
        assert process.wait(15) == 0, process.output


# --- startup problems -------------------------------------------------------------------------


def test_missing_spec_exits_2_with_a_clear_message(tmp_path):
    result = run_to_exit(
        "leapp_ros.node.pipeline_node", node_args(tmp_path / "nope", "preprocess", "/x")
    )
    line = startup_error_line(result, "leapp_node")
    assert str(tmp_path / "nope") in line and "no such export folder" in line


def test_unknown_pipeline_node_exits_2_naming_the_nodes(seed):
    result = run_to_exit("leapp_ros.node.pipeline_node", node_args(seed.path, "planner", "/x"))
    line = startup_error_line(result, "leapp_node")
    assert "has no node 'planner'" in line and "its nodes are preprocess, policy" in line
    assert "-r __node:=<node> or -p pipeline_node:=<node>" in line


def test_corrupted_model_file_exits_2_naming_the_file(seed, tmp_path):
    export = Path(shutil.copytree(seed.path, tmp_path / "export"))
    artifact = export / "preprocess.pt"
    artifact.write_bytes(artifact.read_bytes()[:-10] + b"corrupted!")
    result = run_to_exit("leapp_ros.node.pipeline_node", node_args(export, "policy", "/x"))
    line = startup_error_line(result, "leapp_node")
    assert "preprocess.pt" in line and "sha256" in line


def test_container_with_unknown_nodes_exits_2(seed):
    result = run_to_exit("leapp_ros.run.container", [str(seed.path), "--nodes", "policy,planner"])
    assert "--nodes names ['planner']" in startup_error_line(result, "leapp_container")


def test_feedback_input_without_initial_value_refuses_to_start(tmp_path, capsys, monkeypatch):
    from leapp_ros.node.pipeline_node import main

    export = export_feedback_and_pick(tmp_path)
    (export / "fb_initial.st").unlink()
    with reserve_domain_id() as domain_id:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(domain_id))
        code = main(["leapp_node", *node_args(export, "p", "/fb")])
    assert code == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("leapp_node: error: node 'p': feedback/state input(s) ['fb'] need")
    assert "fb_initial.st' does not exist" in error


def test_container_with_an_invalid_namespace_exits_2(seed, capsys, monkeypatch):
    from leapp_ros.run.container import main

    with reserve_domain_id() as domain_id:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(domain_id))
        code = main(["leapp_container", str(seed.path), "--namespace", "my robot"])
    assert code == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("leapp_container: error: namespace token 'my robot' is not a valid")
