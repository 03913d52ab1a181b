"""A graph spread over two hosts: ``leapp-ros run EXPORT --nodes preprocess`` on host a and
``--nodes policy`` on host b, two network namespaces joined by a veth pair and nothing else
(test/support/netns.py), talking over DDS on UDPv4 only. A client on host a feeds the seed
pipeline and reads its actions (test/support/multi_host_client.py), once each, at the nodes'
deployed QoS; eager PyTorch is the oracle.

Skipped where namespaces cannot be made (not root, no ``ip``, not permitted).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from support.netns import HostsUnavailableError, TwoHosts, host_env
from support.ros import eager_seed
from support.runner import REPO, Command, pid_alive, reserve_domain_id

pytestmark = [pytest.mark.ros, pytest.mark.slow]

CLIENT = Path(__file__).parents[1] / "support" / "multi_host_client.py"
START_S = 60.0  # a node process is ready within this
ANSWER_S = 60.0  # a generous bound on one answer (discovery, a restart, a lease ending)


class Client:
    """multi_host_client.py on one host: one JSON command in, one JSON answer out."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path):
        self._log = log
        with open(log, "wb") as errors:
            self.process = subprocess.Popen(
                argv, env=env, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=errors, text=True, start_new_session=True,
            )  # fmt: skip
        self._answers: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self._next(START_S) == {"ready": True}

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._answers.put(line)
        self._answers.put(None)

    def _next(self, timeout_s: float) -> dict:
        try:
            line = self._answers.get(timeout=timeout_s)
        except queue.Empty:
            line = None
        if line is None:
            raise AssertionError(f"the client gave no answer; its stderr:\n{self.errors}")
        return json.loads(line)

    @property
    def errors(self) -> str:
        return self._log.read_text(errors="replace")[-3000:]

    def ask(self, command: dict, timeout_s: float) -> dict:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self._next(timeout_s)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)


@pytest.fixture(scope="module")
def hosts():
    hosts = TwoHosts()
    try:
        hosts.create()
    except HostsUnavailableError as e:
        pytest.skip(f"cannot make two hosts from network namespaces: {e}")
    yield hosts
    hosts.delete()


@pytest.fixture(scope="module")
def domain_id():
    with reserve_domain_id() as domain_id:
        yield domain_id


class Graph:
    """The two sides of the graph and the client, started and stopped by the test."""

    def __init__(self, hosts: TwoHosts, export: Path, domain_id: int, logs: Path):
        self.hosts, self.export, self.env, self.logs = hosts, export, host_env(domain_id), logs
        self.commands: list[Command] = []
        self.client: Client | None = None
        try:
            self.a = self.run("a", "--nodes", "preprocess")
            self.b = self.run("b", "--nodes", "policy", "--restart")
            for side in (self.a, self.b):
                side.wait_for(r"graph ready", START_S)
            argv = hosts.on("a", [sys.executable, str(CLIENT)])
            self.client = Client(argv, self.env, logs / "client.log")
        except BaseException:
            self.close()
            raise

    def run(self, host: str, *options: str) -> Command:
        """``leapp-ros run EXPORT options`` on ``host`` (not waited for)."""
        argv = [sys.executable, "-m", "leapp_ros.tools.cli", "run", str(self.export), *options]
        self.commands.append(Command(self.hosts.on(host, argv), self.env))
        return self.commands[-1]

    def ask(self, command: dict, timeout_s: float) -> dict:
        """The client's answer to ``command``."""
        assert self.client is not None
        return self.client.ask(command, timeout_s)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        for command in self.commands:
            command.kill()


@pytest.fixture(scope="module")
def graph(hosts, seed, domain_id, tmp_path_factory):
    graph = Graph(hosts, seed.path, domain_id, tmp_path_factory.mktemp("logs"))
    yield graph
    graph.close()


def fresh_inputs(seed, number: int) -> dict:
    """A command with fresh inputs (``number`` picks them) and the action eager PyTorch
    computes for them."""
    generator = torch.Generator().manual_seed(number)
    state, velocity = torch.randn(6, generator=generator), torch.randn(3, generator=generator)
    _, action = eager_seed(seed, state, velocity)
    return {"state": state.tolist(), "velocity": velocity.tolist(), "expect": action.tolist()}


def assert_answered_like_eager(graph: Graph, command: dict) -> dict:
    """The client's answer to ``command``, sent once: its action equal to eager PyTorch's."""
    answer = graph.ask({**command, "timeout_s": ANSWER_S}, ANSWER_S + 10)
    assert answer["action"] is not None, (
        f"no action equal to eager PyTorch within {ANSWER_S} s ({answer['why']}); last "
        f"received {answer['last']}\nhost a:\n{graph.a.output[-3000:]}\nhost b:\n"
        f"{graph.b.output[-3000:]}"
    )
    torch.testing.assert_close(torch.tensor(answer["action"]), torch.tensor(command["expect"]))
    return answer


def test_hosts_have_only_the_link_between_them(hosts):
    assert hosts.routes("a") == hosts.routes("b") == ["10.213.0.0/30"]


def test_each_host_runs_only_its_nodes(graph):
    assert set(graph.a.started_pids()) == {"preprocess"}
    assert set(graph.b.started_pids()) == {"policy"}


def test_actions_computed_across_the_link_equal_eager_pytorch(graph, seed):
    for number in range(3):
        assert_answered_like_eager(graph, fresh_inputs(seed, number))


def test_nothing_crosses_while_the_link_is_down_and_traffic_resumes_when_it_is_up(graph, seed):
    assert_answered_like_eager(graph, fresh_inputs(seed, 10))
    cut_off = fresh_inputs(seed, 11)
    graph.hosts.set_link("a", up=False)
    try:  # a pair with the link down: best effort, it is gone unless another way exists
        assert graph.ask({**cut_off, "publish_only": True}, 30) == {"published": True}
    finally:
        graph.hosts.set_link("a", up=True)
    assert pid_alive(graph.b.started_pids()["policy"]), "the policy node died meanwhile"
    # every action received from the cut-off pair until the next pair's answer: had the pair
    # found another way than the veth (shared memory), its answer would be among them
    answer = assert_answered_like_eager(graph, fresh_inputs(seed, 12))
    expected = torch.tensor(cut_off["expect"])
    crossed = [a for a in answer["actions"] if torch.allclose(torch.tensor(a), expected)]
    assert crossed == [], "an answer to inputs sent with the link down: not over the veth"


def test_a_killed_node_on_the_other_host_is_restarted_and_answers_again(graph, seed):
    assert_answered_like_eager(graph, fresh_inputs(seed, 20))
    old = graph.b.started_pids()["policy"]
    mark = len(graph.b.lines)
    # its endpoints stay matched until their lease ends: the client waits for them to go
    assert graph.ask({"forget": "policy"}, 30)["forgotten"] > 0
    os.kill(old, signal.SIGKILL)
    graph.b.wait_for(r"'policy' is ready again", START_S, mark)
    assert not pid_alive(old) and graph.b.started_pids()["policy"] != old
    assert_answered_like_eager(graph, fresh_inputs(seed, 21))


def test_the_other_host_stopped_and_started_again_composed_answers_again(graph, seed):
    os.kill(graph.b.process.pid, signal.SIGINT)
    assert graph.b.wait(30) == 0, graph.b.output
    graph.b = graph.run("b", "--nodes", "policy", "--composed")
    graph.b.wait_for(r"graph ready", START_S)
    assert_answered_like_eager(graph, fresh_inputs(seed, 30))


def test_both_hosts_composed_name_their_containers_apart_and_answer(graph, seed):
    pytest.importorskip("composition_interfaces.srv", reason="a container without it is unnamed")
    os.kill(graph.a.process.pid, signal.SIGINT)
    assert graph.a.wait(30) == 0, graph.a.output
    graph.a = graph.run("a", "--nodes", "preprocess", "--composed")
    graph.a.wait_for(r"graph ready", START_S)
    ready = r"component container (\S+) ready"
    names = {side.wait_for(ready, START_S).group(1) for side in (graph.a, graph.b)}
    assert names == {f"/torch_pipeline/leapp_container_{n}" for n in ("preprocess", "policy")}
    assert_answered_like_eager(graph, fresh_inputs(seed, 40))
