"""A TorchScript policy that reads sizes in ``forward`` (``B = obs.size(0)``, an observation
history sliced into frames by a size it computes, joints picked with a constant index tensor)
exports to every backend and equals eager PyTorch on fresh inputs: traced with
``torch.jit.trace``, its size reads are ``prim::NumToTensor`` / arithmetic / ``int()`` on
tensors, which the recording takes as the constants they are (shapes are fixed per port); a
number read out of the data is still refused."""

from __future__ import annotations

import pytest
import torch

import leapp
from leapp import annotate
from leapp import session as session_module

FRAMES, JOINTS = 3, 4
OBS = FRAMES * JOINTS
TICKS = 30


class HistoryPolicy(torch.nn.Module):
    """rsl_rl-style: an observation history of FRAMES frames of JOINTS joints."""

    def __init__(self):
        super().__init__()
        self.register_buffer("joint_order", torch.tensor([2, 0, 3, 1]))
        self.net = torch.nn.Sequential(
            torch.nn.Linear(OBS + JOINTS, 16), torch.nn.ELU(), torch.nn.Linear(16, JOINTS)
        )

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        batch = obs.size(0)  # B = obs.size(0)
        n = obs.size(1) // 3  # frame length, computed from a size
        frames = [obs[:, i * n : (i + 1) * n] for i in range(3)]
        newest = frames[-1][:, self.joint_order]
        history = torch.stack(frames, dim=1).reshape(batch, -1)
        return self.net(torch.cat([history, newest], dim=-1)) + 0.1 * (batch + n)


def _policies(tmp_path):
    torch.manual_seed(0)
    module = HistoryPolicy().eval()
    traced = torch.jit.trace(module, torch.randn(1, OBS))
    torch.jit.save(traced, str(tmp_path / "policy.pt"))  # a pretrained policy.pt, as shipped
    return torch.jit.load(str(tmp_path / "policy.pt")), module


def _export(tmp_path, policy, backend):
    leapp.start("history", save_path=tmp_path / backend)
    with torch.no_grad():
        for _ in range(2):
            obs = annotate.input_tensors("policy", {"obs": torch.randn(1, OBS)})
            annotate.output_tensors("policy", {"action": policy(obs)}, export_with=backend)
    leapp.stop()
    return leapp.compile_graph()


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("policy")
    _policies(folder)
    return folder / "policy.pt"


def test_the_traced_policy_reads_its_sizes_through_tensors(policy_file):
    code = torch.jit.load(str(policy_file)).code
    assert "NumToTensor" in code and "int(" in code  # the pattern this file is about


@pytest.mark.parametrize("backend", ["jit", "onnx", "pt2"])
def test_a_size_reading_traced_policy_exports_and_matches_eager_over_30_ticks(
    tmp_path, policy_file, backend
):
    session_module._active = None
    compiled = _export(tmp_path, torch.jit.load(str(policy_file)), backend)
    assert dict(compiled) == {"policy": True}
    eager = torch.jit.load(str(policy_file))
    pipeline = leapp.Pipeline.load(compiled.path)
    with torch.no_grad():
        for tick in range(TICKS):
            obs = torch.randn(1, OBS)
            got = pipeline.step({"policy/obs": obs})["policy/action"]
            torch.testing.assert_close(
                got, eager(obs), rtol=1e-5, atol=1e-5, msg=lambda m, t=tick: f"tick {t}: {m}"
            )


def test_the_same_scripted_policy_exports_to_onnx_and_matches_eager(tmp_path):
    torch.manual_seed(1)
    scripted = torch.jit.script(HistoryPolicy().eval())
    compiled = _export(tmp_path, scripted, "onnx")
    pipeline = leapp.Pipeline.load(compiled.path)
    with torch.no_grad():
        for _ in range(TICKS):
            obs = torch.randn(1, OBS)
            got = pipeline.step({"policy/obs": obs})["policy/action"]
            torch.testing.assert_close(got, scripted(obs), rtol=1e-5, atol=1e-5)


@pytest.mark.ros
def test_the_size_reading_policy_over_the_live_graph_equals_eager(tmp_path, policy_file):
    pytest.importorskip("rclpy")
    from leapp_ros.testing import Deployment, GraphUnderTest

    compiled = _export(tmp_path, torch.jit.load(str(policy_file)), "onnx")
    eager = torch.jit.load(str(policy_file))
    with GraphUnderTest(compiled.path.parent, Deployment.COMPOSED) as graph, torch.no_grad():
        for tick in range(10):
            obs = torch.randn(1, OBS)
            got = graph.step({"policy/obs": obs})["policy/action"]
            close = {"rtol": 0, "atol": 1e-5, "msg": lambda m, t=tick: f"tick {t}: {m}"}
            torch.testing.assert_close(got, eager(obs), **close)


@torch.jit.script
def _first_k(obs: torch.Tensor) -> torch.Tensor:
    k = obs.sum().clamp(1, 3)  # a value of the data, not a size
    return obs[:, : int(k)] * 2.0


def test_a_number_read_from_the_data_is_still_refused(tmp_path):
    leapp.start("data", save_path=tmp_path)
    obs = annotate.input_tensors("policy", {"obs": torch.ones(1, OBS)})
    with pytest.raises(leapp.TraceError, match="turns a tensor into a Python value"):
        _first_k(obs)
