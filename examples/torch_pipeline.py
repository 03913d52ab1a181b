"""The seed example: a two-node policy pipeline (normalization, then the policy).

Run it as is to export ``./torch_pipeline/``::

    python examples/torch_pipeline.py
"""

import torch

import leapp
from leapp import annotate

STATE_MEAN = torch.zeros(6)
STATE_STD = torch.full((6,), 0.5)


class Policy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(9, 6)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(obs))


def preprocess(state, velocity):
    state, velocity = annotate.input_tensors(
        "preprocess",
        {
            "state": state,
            "velocity": velocity,
        },
    )

    state_norm = torch.clamp((state - STATE_MEAN) / STATE_STD, -5.0, 5.0)
    obs = torch.cat([state_norm, velocity])

    annotate.output_tensors("preprocess", {"obs": obs}, export_with="jit")
    return obs


def run_policy(policy, obs):
    traced_obs = annotate.input_tensors("policy", {"obs": obs})
    action = policy(traced_obs.unsqueeze(0)).squeeze(0)
    annotate.output_tensors("policy", {"action": action}, export_with="onnx")
    return action


def main():
    policy = Policy().eval()

    leapp.start(name="torch_pipeline")
    obs = preprocess(torch.zeros(6), torch.zeros(3))
    run_policy(policy, obs)
    leapp.stop()
    leapp.compile_graph()


if __name__ == "__main__":
    main()
