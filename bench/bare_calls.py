"""The seed pipeline's artifacts called by hand, without leapp, and a timer that interleaves.

bench/export.py compares ``leapp.Pipeline.step`` with what the same two artifacts cost when
called directly, measured in the same run (never with a figure of another machine).
Two forms, both with one thread (``torch.set_num_threads(1)``, ONNX Runtime 1 intra-op and 1
inter-op thread):

- "hand-written": what a hand-written node does: the TorchScript module called with tensors
  under ``torch.no_grad()``, then ``InferenceSession.run`` on its output;
- "cheapest": the cheapest entries: the module's ``forward`` under ``torch.inference_mode()``,
  its output copied into a preallocated buffer bound to the session once (I/O binding with
  preallocated ``OrtValue`` inputs and outputs), run through the C session's
  ``run_with_iobinding``, which skips the Python wrapper's per-call checks.

:func:`time_interleaved` times several callables in alternating rounds, so that the noise of a
shared machine hits all of them alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

HAND_WRITTEN = "hand-written: jit under no_grad + InferenceSession.run"
CHEAPEST = "cheapest: jit forward under inference_mode + ORT I/O binding"


@dataclass(frozen=True)
class Timing:
    """Median and 99th percentile of one callable, in microseconds."""

    median: float
    p99: float
    samples: int


def percentiles(samples_us: list[float]) -> Timing:
    ordered = sorted(samples_us)
    return Timing(statistics.median(ordered), ordered[int(len(ordered) * 0.99)], len(ordered))


def time_interleaved(
    calls: Mapping[str, Callable[[], object]],
    samples: int,
    rounds: int = 10,
    warmup: int = 200,
    each_round: Callable[[], None] | None = None,
) -> dict[str, Timing]:
    """Time each call ``samples`` times, in ``rounds`` rounds that alternate between them;
    ``each_round`` (another measurement, e.g. in another process) runs after each round."""
    for call in calls.values():
        for _ in range(warmup):
            call()
    times: dict[str, list[float]] = {label: [] for label in calls}
    per_round = max(1, samples // rounds)
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for label, call in calls.items():
            record = times[label].append
            for _ in range(per_round):
                began = clock()
                call()
                record((clock() - began) / 1000.0)
        if each_round is not None:
            each_round()
    return {label: percentiles(values) for label, values in times.items()}


def load_bare_calls(spec_path: str | Path) -> dict[str, Callable[[], object]]:
    """The seed's ``preprocess`` (TorchScript) then ``policy`` (ONNX), in both forms, on
    fixed random inputs; each callable returns the action."""
    import numpy as np
    import onnxruntime
    import torch

    import leapp.spec

    spec = leapp.spec.load(spec_path)
    preprocess, policy = spec.model("preprocess"), spec.model("policy")
    torch.set_num_threads(1)
    module = torch.jit.load(str(spec.directory / preprocess.parameters.model_path)).eval()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        str(spec.directory / policy.parameters.model_path),
        options,
        providers=["CPUExecutionProvider"],
    )
    (obs_port,), (action_port,) = policy.inputs, policy.outputs
    state, velocity = (torch.randn(port.shape) for port in preprocess.inputs)

    def hand_written() -> object:
        with torch.no_grad():
            obs = module(state, velocity)
        return session.run(None, {obs_port.name: obs.numpy()})[0]

    obs_buffer = np.zeros(obs_port.shape, np.float32)
    action_buffer = np.zeros(action_port.shape, np.float32)
    obs_value = onnxruntime.OrtValue.ortvalue_from_numpy(obs_buffer)
    action_value = onnxruntime.OrtValue.ortvalue_from_numpy(action_buffer)
    binding = session.io_binding()
    binding.bind_ortvalue_input(obs_port.name, obs_value)
    binding.bind_ortvalue_output(action_port.name, action_value)
    run, iobinding, run_options = (
        session._sess.run_with_iobinding,
        binding._iobinding,
        onnxruntime.RunOptions(),
    )
    forward, obs_tensor = module.forward, torch.from_numpy(obs_buffer)

    def cheapest() -> object:
        with torch.inference_mode():
            obs = forward(state, velocity)
        obs_tensor.copy_(obs)
        run(iobinding, run_options)
        return action_buffer

    if not np.array_equal(hand_written(), cheapest()):
        raise RuntimeError("the two forms of the bare calls disagree; the bench is wrong")
    cheapest.keep = (obs_value, action_value, binding)  # the buffers outlive the binding
    return {HAND_WRITTEN: hand_written, CHEAPEST: cheapest}
