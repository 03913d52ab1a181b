import torch

from leapp_ros.testing import GraphUnderTest


def test_the_policy_answers_like_pytorch():
    with GraphUnderTest("exports/torch_pipeline", timeout_s=60) as graph:
        graph.expect_topics()  # names, types, publishers, subscribers
        state, velocity = torch.randn(6), torch.randn(3)
        out = graph.step({"preprocess/state": state, "preprocess/velocity": velocity})
        assert out["policy/action"].shape == (6,)
        assert graph.status()["policy"]["errors"] == 0
