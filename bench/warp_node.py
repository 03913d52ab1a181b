"""Benchmark a Warp node: the exported node's step against the eager Warp calls it replaces.

    python bench/warp_node.py [--repeat N] [--calls N]

Two nodes of examples/warp_gravity.py's kind, traced and exported here (jit and pt2):

- ``targets``: one kernel (from_torch, the launch, to_torch);
- ``kinematics``: the example's observation kernels and two more (five launches on quaternion,
  vec3 and scalar arrays, and the conversions around them).

For each, the eager Warp code (what the node ran before export) and the exported node are
timed in the same run, interleaved, as ``leapp.Pipeline.step`` (the reference runtime, with its
input checks) and as ``Model.call`` (what a leapp_ros node calls per message). The ratio
``step / eager`` is the figure to watch (target: at most 1.5); absolute times vary several-fold
between machines.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import warp as wp  # noqa: E402
import warp_gravity as example  # noqa: E402

import leapp  # noqa: E402
from leapp import annotate  # noqa: E402


def targets(action):
    default = wp.array(example.DEFAULT_POSE, dtype=wp.float32)
    target = wp.empty(example.JOINTS, dtype=wp.float32)
    wp.launch(
        example.joint_targets,
        dim=example.JOINTS,
        inputs=[wp.from_torch(action), default, example.ACTION_SCALE, *example.LIMITS],
        outputs=[target],
    )
    return (wp.to_torch(target),)


def kinematics(base_quat, joint_pos, joint_vel):
    quat = wp.from_torch(base_quat, dtype=wp.quat)
    gravity = wp.empty(1, dtype=wp.vec3)
    wp.launch(example.gravity_in_body, dim=1, inputs=[quat], outputs=[gravity])
    pos, vel = wp.from_torch(joint_pos), wp.from_torch(joint_vel)
    default = wp.array(example.DEFAULT_POSE, dtype=wp.float32)
    pos_rel, vel_scaled = wp.empty(example.JOINTS), wp.empty(example.JOINTS)
    scales = [example.POS_SCALE, example.VEL_SCALE]
    wp.launch(
        example.joint_state,
        example.JOINTS,
        inputs=[pos, vel, default, *scales],
        outputs=[pos_rel, vel_scaled],
    )
    target = wp.empty(example.JOINTS)
    limits = [example.ACTION_SCALE, *example.LIMITS]
    wp.launch(
        example.joint_targets,
        example.JOINTS,
        inputs=[pos_rel, default, *limits],
        outputs=[target],
    )
    again = wp.empty(example.JOINTS)
    wp.launch(
        example.joint_targets,
        example.JOINTS,
        inputs=[vel_scaled, default, *limits],
        outputs=[again],
    )
    body = wp.empty(1, dtype=wp.vec3)
    wp.launch(example.gravity_in_body, dim=1, inputs=[quat], outputs=[body])
    return wp.to_torch(gravity), wp.to_torch(target), wp.to_torch(again), wp.to_torch(body)


NODES = {
    "targets": (targets, lambda: {"action": torch.rand(example.JOINTS) * 2 - 1}),
    "kinematics": (
        kinematics,
        lambda: {
            "base_quat": example.random_state()[0].unsqueeze(0),
            "joint_pos": example.random_state()[2],
            "joint_vel": example.random_state()[3],
        },
    ),
}


def export(name: str, backend: str, save_path: Path) -> leapp.Pipeline:
    function, make_inputs = NODES[name]
    leapp.start(name, save_path=save_path / backend)
    traced = annotate.input_tensors(name, make_inputs())
    traced = traced if isinstance(traced, tuple) else (traced,)
    outputs = function(*traced)
    annotate.output_tensors(
        name, {f"out{i}": o for i, o in enumerate(outputs)}, export_with=backend
    )
    leapp.stop()
    return leapp.Pipeline.load(leapp.compile_graph().path)


def per_call_us(call, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return 1e6 * (time.perf_counter() - started) / calls


def measure(name: str, pipeline: leapp.Pipeline, repeat: int, calls: int) -> dict[str, float]:
    function, make_inputs = NODES[name]
    inputs = make_inputs()
    keyed = {f"{name}/{k}": v for k, v in inputs.items()}
    model = pipeline.models[name]
    ordered = [inputs[p.name] for p in model.inputs]
    runs = {
        "eager": lambda: function(*inputs.values()),
        "step": lambda: pipeline.step(keyed),
        "call": lambda: model.call(ordered),
    }
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {key: [] for key in runs}
    for _ in range(repeat):  # interleaved, so machine noise hits all alike
        for key, run in runs.items():
            times[key].append(per_call_us(run, calls))
    return {key: statistics.median(values) for key, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    worst = 0.0
    with tempfile.TemporaryDirectory() as folder:
        for name in NODES:
            for backend in ("jit", "pt2"):
                pipeline = export(name, backend, Path(folder))
                figures = measure(name, pipeline, args.repeat, args.calls)
                ratio = figures["step"] / figures["eager"]
                worst = max(worst, ratio)
                print(
                    f"{name:<10} {backend:<3} eager Warp {figures['eager']:6.1f} us | "
                    f"Pipeline.step {figures['step']:6.1f} us | Model.call "
                    f"{figures['call']:6.1f} us | step / eager {ratio:.2f} (target <= 1.5)"
                )
    print(f"worst step / eager: {worst:.2f} ({'ok' if worst <= 1.5 else 'over the target'})")
    return 0 if worst <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main())
