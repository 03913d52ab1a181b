"""A camera frame reaches an ONNX node's model without a copy: a large input given as a
C-contiguous array of its port (a read-only view of a message's payload, as a node decodes a
raw Image) is bound where it lies; anything else is copied into the bound buffer. Results are
eager PyTorch's on fresh frames either way. Such a model keeps ONNX Runtime's memory arena."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import leapp
from leapp import TensorSemantics, annotate
from leapp.run.onnx_runner import DIRECT_BYTES, load_onnx, session_options, takes_frames
from leapp.spec import TensorSpec

SHAPE = (240, 320, 3)  # 230 400 bytes of rgb8


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(6, 4)

    def forward(self, frame):
        x = frame.float() / 255.0  # per channel: the brightest pixel and a row's mean
        return self.head(torch.cat([x.amax(dim=(0, 1)), x[17].mean(dim=0)]))


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    """The exported encoder node (ONNX) and its eager module."""
    torch.manual_seed(0)
    module = Encoder().eval()
    leapp.start(name="camera", save_path=tmp_path_factory.mktemp("camera"))
    with torch.no_grad():
        frame = annotate.input_tensors(
            "encoder",
            [
                TensorSemantics(
                    name="rgb",
                    ref=torch.zeros(SHAPE, dtype=torch.uint8),
                    kind="state/camera/image",
                )
            ],
        )
        annotate.output_tensors("encoder", {"latent": module(frame)}, export_with="onnx")
    leapp.stop()
    spec = leapp.spec.load(leapp.compile_graph().path)
    return load_onnx(spec, "encoder"), module


def payload_frame(seed: int) -> np.ndarray:
    """A frame as a node decodes a raw Image: a read-only view of the message's bytes."""
    pixels = np.random.default_rng(seed).integers(0, 256, SHAPE, dtype=np.uint8)
    return np.frombuffer(pixels.tobytes(), np.uint8).reshape(SHAPE)


def eager(module, frame: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return module(torch.from_numpy(frame.copy())).numpy()


def test_a_frame_sized_input_is_read_where_it_lies_not_copied(encoder):
    model, module = encoder
    assert model.bound is not None and np.prod(SHAPE) >= DIRECT_BYTES
    for seed in (1, 2, 3):  # each call binds its own frame
        frame = payload_frame(seed)
        assert not frame.flags.writeable
        (latent,) = model.call([frame])
        assert model.bound.last_inputs[0] is frame  # the payload's view itself: no copy
        np.testing.assert_allclose(latent, eager(module, frame), rtol=0, atol=1e-5)
    assert not np.shares_memory(model.bound.input_buffers[0], frame)


def test_a_frame_that_is_not_contiguous_is_copied_into_the_bound_buffer(encoder):
    model, module = encoder
    model.call([payload_frame(4)])  # bound where it lies first
    wide = np.random.default_rng(5).integers(0, 256, (240, 640, 3), dtype=np.uint8)
    frame = wide[:, ::2]  # every other column: a strided view
    (latent,) = model.call([frame])
    assert model.bound.last_inputs[0] is model.bound.input_buffers[0]
    np.testing.assert_array_equal(model.bound.input_buffers[0], frame)
    np.testing.assert_allclose(latent, eager(module, frame), rtol=0, atol=1e-5)


def test_after_a_frame_read_where_it_lay_a_run_reads_the_bound_buffers_again(encoder):
    """The torch entry (leapp.run.model) copies into the buffers and runs on them."""
    model, module = encoder
    model.call([payload_frame(6)])
    frame = payload_frame(7)
    np.copyto(model.bound.input_buffers[0], frame)
    model.bound.run()
    np.testing.assert_allclose(
        model.bound.output_buffers[0], eager(module, frame), rtol=0, atol=1e-5
    )


def test_a_model_taking_a_frame_keeps_the_memory_arena_a_policy_runs_without():
    frame = SimpleNamespace(
        inputs=(TensorSpec("rgb", "uint8", SHAPE), TensorSpec("x", "float32", (3,)))
    )
    policy = SimpleNamespace(inputs=(TensorSpec("obs", "float32", (48,)),))
    assert takes_frames(frame) and not takes_frames(policy)
    pooled, plain = session_options(frame), session_options(policy)
    assert pooled.enable_cpu_mem_arena and pooled.enable_mem_pattern
    assert not plain.enable_cpu_mem_arena and not plain.enable_mem_pattern
    assert (pooled.intra_op_num_threads, plain.intra_op_num_threads) == (1, 1)
