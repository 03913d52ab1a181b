"""A real pretrained policy exported as the deploy pipeline its authors run: rl_sar's Unitree G1
"charleston" dance policy (``test/data/rl_sar_g1_charleston``, Apache-2.0, unchanged), traced
as three nodes the way rl_sar's deploy code uses it, exported with every backend and compared
with eager PyTorch (the same functions run outside a session, state carried in PyTorch) on
fresh random observations over 30 ticks.

The pipeline, after rl_sar's ``ComputeObservation``, ``ObservationBuffer`` and
``ComputeOutput`` (config.yaml gives the scales, clips, ``default_dof_pos``, ``action_scale``
and ``joint_mapping``):

- ``history``: one observation frame of 94 values (angular velocity, projected gravity, joint
  positions relative to the default pose, joint velocities, the last actions, the motion phase;
  scaled and clipped), pushed in front of the last four frames (explicit state ``frames``,
  newest first as ``observations_history_priority: time`` orders them); the last actions are the
  policy's output of the previous tick (a feedback edge);
- ``policy``: the loaded TorchScript module called on ``[1, 376]``, its actions clipped;
- ``targets``: the actions scaled around the default pose and scattered to the robot's joint
  order with ``joint_mapping``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
import yaml

import leapp
from leapp import annotate

DATA = Path(__file__).parents[1] / "data" / "rl_sar_g1_charleston"
POLICY_FILE = "dance_0605_aligned.pt"
CONFIG = yaml.safe_load((DATA / "config.yaml").read_text())["g1/robomimic/charleston"]
DOFS = CONFIG["num_of_dofs"]
FRAME = CONFIG["num_observations"]
FRAMES = len(CONFIG["observations_history"])
DEFAULT_DOF_POS = torch.tensor(CONFIG["default_dof_pos"])
ACTION_SCALE = torch.tensor(CONFIG["action_scale"])
JOINT_MAPPING = torch.tensor(CONFIG["joint_mapping"])
ACTIONS_LOWER = torch.tensor(CONFIG["clip_actions_lower"])
ACTIONS_UPPER = torch.tensor(CONFIG["clip_actions_upper"])
TICKS = 30
TRACED_TICKS = 2  # the second tick shows the feedback edge
# Tolerances. jit and pt2 run the graph's own ATen kernels: measured equal to eager to the bit.
# ONNX Runtime's float32 GEMMs sum the 380-, 512-, 256- and 128-wide products in another order:
# one tick from the same state is at most ~1.3e-6 apart (actions up to ~10). The last actions
# are fed back, and the policy amplifies that difference tick by tick: after 30 ticks, eager
# carrying its own state, up to 5e-5 relative (10 seeds measured). A wrong operation (a joint
# out of place, a frame shifted, a scale lost) is off by 1e-2 or more.
ONE_TICK = {"rtol": 1e-5, "atol": 1e-5}
OVER_TICKS = {
    "jit": {"rtol": 1e-6, "atol": 1e-6},
    "pt2": {"rtol": 1e-6, "atol": 1e-6},
    "onnx": {"rtol": 1e-4, "atol": 1e-4},
}


def observe(sensors: dict[str, torch.Tensor], last_actions, frames, backend: str):
    """The ``history`` node: one clipped observation frame pushed in front of the history."""
    ang_vel, gravity, dof_pos, dof_vel, phase, last_actions = annotate.input_tensors(
        "history", {**sensors, "last_actions": last_actions}
    )
    frames = annotate.state_tensors("history", {"frames": frames})
    frame = torch.cat(
        [
            ang_vel * CONFIG["ang_vel_scale"],
            gravity,
            (dof_pos - DEFAULT_DOF_POS) * CONFIG["dof_pos_scale"],
            dof_vel * CONFIG["dof_vel_scale"],
            last_actions.reshape(DOFS),
            phase,
        ]
    )
    frame = torch.clamp(frame, -CONFIG["clip_obs"], CONFIG["clip_obs"])
    frames = torch.cat([frame.unsqueeze(0), frames[:-1]])
    frames = annotate.update_state("history", {"frames": frames})
    obs_history = frames.reshape(1, FRAMES * FRAME)
    annotate.output_tensors("history", {"obs_history": obs_history}, export_with=backend)
    return obs_history, frames


def act(policy: torch.jit.ScriptModule, obs_history, backend: str):
    """The ``policy`` node: the pretrained module, its actions clipped."""
    obs_history = annotate.input_tensors("policy", {"obs_history": obs_history})
    actions = torch.clamp(policy(obs_history), ACTIONS_LOWER, ACTIONS_UPPER)
    annotate.output_tensors("policy", {"actions": actions}, export_with=backend)
    return actions


def joint_targets(actions, backend: str):
    """The ``targets`` node: position targets in the robot's joint order."""
    actions = annotate.input_tensors("targets", {"actions": actions})
    targets = torch.zeros(1, DOFS)
    targets[:, JOINT_MAPPING] = actions * ACTION_SCALE + DEFAULT_DOF_POS
    annotate.output_tensors("targets", {"dof_pos_target": targets}, export_with=backend)
    return targets


def deploy_tick(policy, sensors, last_actions, frames, backend: str = "jit"):
    """One tick of the three nodes: ``(outputs by "node/port", last actions, frames)``."""
    obs_history, frames = observe(sensors, last_actions, frames, backend)
    actions = act(policy, obs_history, backend)
    targets = joint_targets(actions, backend)
    outputs = {
        "history/obs_history": obs_history,
        "policy/actions": actions,
        "targets/dof_pos_target": targets,
    }
    return outputs, actions, frames


def deploy_loop(policy, observations, backend: str = "jit") -> list[dict[str, torch.Tensor]]:
    """Every tick's outputs, from an empty history and zero last actions (rl_sar's start);
    traced inside a session, eager outside one."""
    frames, last_actions, ticks = torch.zeros(FRAMES, FRAME), torch.zeros(1, DOFS), []
    with torch.no_grad():
        for sensors in observations:
            outputs, last_actions, frames = deploy_tick(
                policy, sensors, last_actions, frames, backend
            )
            ticks.append(outputs)
    return ticks


def fresh_observation(generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Sensor readings around the default pose; the phase also past 1, where the policy
    clamps it."""

    def noise(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator)

    gravity = noise(3) * 0.2 + torch.tensor([0.0, 0.0, -1.0])
    return {
        "ang_vel": 0.5 * noise(3),
        "gravity": gravity / gravity.norm(),
        "dof_pos": DEFAULT_DOF_POS + 0.1 * noise(DOFS),
        "dof_vel": 0.5 * noise(DOFS),
        "phase": torch.rand(1, generator=generator) * 1.5,
    }


@pytest.fixture
def policy_path(tmp_path) -> Path:
    """The vendored policy, copied under ``tmp_path`` (exports never land beside it)."""
    return Path(shutil.copy(DATA / POLICY_FILE, tmp_path / POLICY_FILE))


def export_deploy_pipeline(policy_path: Path, directory: Path, backend: str):
    generator = torch.Generator().manual_seed(7)
    leapp.start("charleston", save_path=directory)
    deploy_loop(
        torch.jit.load(str(policy_path)),
        [fresh_observation(generator) for _ in range(TRACED_TICKS)],
        backend,
    )
    leapp.stop()
    return leapp.compile_graph()


def assert_close(got, want, tolerance, what: str) -> None:
    for key, value in want.items():
        torch.testing.assert_close(
            got[key], value, **tolerance, msg=lambda m, k=key: f"{what}, {k}: {m}"
        )


@pytest.mark.parametrize("backend", ["jit", "onnx", "pt2"])
def test_the_charleston_policy_deploy_pipeline_matches_eager_over_30_ticks(
    tmp_path, policy_path, backend
):
    compiled = export_deploy_pipeline(policy_path, tmp_path / "export", backend)
    assert dict(compiled) == {"history": True, "policy": True, "targets": True}
    assert compiled.spec.pipeline.feedback_flow["policy/actions"] == ("history/last_actions",)
    assert {model.parameters.backend for model in compiled.spec.models} == {backend}

    generator = torch.Generator().manual_seed(2026)  # not the traced observations
    observations = [fresh_observation(generator) for _ in range(TICKS)]
    policy = torch.jit.load(str(policy_path))
    expected = deploy_loop(policy, observations)  # eager, carrying its own state
    pipeline = leapp.Pipeline.load(compiled.path)
    frames_key = next(key for key in pipeline.feedback if key.startswith("history/frames"))
    for tick, (sensors, want) in enumerate(zip(observations, expected, strict=True)):
        state = pipeline.feedback  # what this step feeds back: one eager tick from it
        with torch.no_grad():
            one_tick, _, _ = deploy_tick(
                policy, sensors, state["history/last_actions"], state[frames_key]
            )
        got = pipeline.step({f"history/{name}": value for name, value in sensors.items()})
        assert_close(got, one_tick, ONE_TICK, f"tick {tick} from the pipeline's state")
        assert_close(got, want, OVER_TICKS[backend], f"tick {tick}")
    assert expected[-1]["policy/actions"].abs().max() > 0.1  # the policy did act
