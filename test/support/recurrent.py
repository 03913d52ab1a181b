"""Two small recurrent pipelines, traced inside a session and run eagerly outside one: a GRU
policy with explicit state ``h`` and a two-node loop that feeds its previous action back."""

from __future__ import annotations

import torch

import leapp
from leapp import annotate

torch.manual_seed(3)
GRU = torch.nn.GRUCell(4, 6).eval()
HEAD = torch.nn.Linear(6, 2).eval()
ENCODER = torch.nn.Linear(5 + 2, 5).eval()


def gru_policy(obs, h, backend="jit"):
    """One tick of a recurrent policy with explicit state ``h``."""
    obs = annotate.input_tensors("policy", {"obs": obs})
    h = annotate.state_tensors("policy", {"h": h})
    h_next = GRU(obs.unsqueeze(0), h.unsqueeze(0)).squeeze(0)
    action = torch.tanh(HEAD(h_next))
    h_next = annotate.update_state("policy", {"h": h_next})
    annotate.output_tensors("policy", {"action": action}, export_with=backend)
    return action, h_next


def gru_loop(observations, backend="jit"):
    """``[(action, h)]`` of the GRU loop from h = 0 (traced inside a session, else eager)."""
    h, results = torch.zeros(6), []
    with torch.no_grad():
        for obs in observations:
            action, h = gru_policy(obs, h, backend)
            results.append((action, h))
    return results


def export_gru(tmp_path, backend, ticks=3):
    leapp.start("gru", save_path=tmp_path)
    gru_loop([torch.randn(4) for _ in range(ticks)], backend)
    leapp.stop()
    return leapp.compile_graph()


def preprocess(state, previous_action):
    state, previous_action = annotate.input_tensors(
        "preprocess", {"state": state, "previous_action": previous_action}
    )
    obs = ENCODER(torch.cat([state, previous_action * 0.5]))
    annotate.output_tensors("preprocess", {"obs": obs}, export_with="jit")
    return obs


def act(obs):
    obs = annotate.input_tensors("act", {"obs": obs})
    action = torch.tanh(obs[:2] * 2.0)
    annotate.output_tensors("act", {"action": action}, export_with="onnx")
    return action


def feedback_loop(states, first_action):
    action, actions = first_action, []
    with torch.no_grad():
        for state in states:
            action = act(preprocess(state, action))
            actions.append(action)
    return actions
