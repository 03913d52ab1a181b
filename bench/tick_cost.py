"""What one tick of a node costs against the sum of its parts, with no middleware wake.

    python bench/tick_cost.py [--samples N] [--rounds R] [--idle-ms MS]

bench/ros_latency.py's floors add the model calls at what they cost in a loop of their own. This
bench shows how much of the gap between a graph and those floors has nothing to do with ROS
message passing: the fused node of the seed pipeline
(:class:`leapp_ros.node.fused_node.FusedPipelineNode`) and the hand-written single rclpy node of
the same shape (bench/hand_written_nodes.py) are built
on one ROS context that nobody spins, and their two subscription callbacks are called directly
with prebuilt ``state`` and ``velocity`` messages. A tick is then what the executor runs for a
message pair, minus the middleware's thread and wake-up: decode, checks, both model calls,
encode and publish the action (nobody subscribes, so the middleware only queues it). The fused
node gets the messages serialized, as its raw subscriptions do (typed with
``raw_messages: false``); the hand-written node gets rclpy messages.

Printed, medians of alternating rounds (bare_calls.time_interleaved, so the noise of a shared
machine hits all alike): each part of each tick timed in a loop of its own, their sum, the tick
itself in a loop, and tick / sum. A ratio well above 1 means calls made one after another cost
more than each in a loop of its own (the caches, TLBs and branch predictors each part warmed are
cold again when its turn comes); no graph that makes those calls per message can reach a floor
that adds them at their hot-loop cost. The parts of the fused tick leave out its bookkeeping
(arrival times, pending inputs, counters), so its ratio is an upper bound.

With ``--idle-ms MS`` each call is made instead the way a node at a steady rate makes it: on a
thread woken by another one after the process idled ``MS`` milliseconds (2: one period at
500 Hz, the rate of bench/ros_latency.py's CPU figure; bare_calls.time_handed_over), each part
on its own wake too, so the parts' sum counts the wake-up's cold start once per part.
"""

from __future__ import annotations

import argparse
import array
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bare_calls import time_handed_over, time_interleaved
from hand_written_nodes import load_calls, make_hand_written_node, single_of
from ros_latency import export_seed, parameters

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 80))

FUSED_TICK = "leapp fused node: tick"
HAND_TICK = "hand-written node: tick"


def messages() -> tuple:
    from std_msgs.msg import Float32MultiArray

    state = Float32MultiArray(data=array.array("f", [0.3, -0.2, 0.1, 0.5, -0.4, 0.2]))
    velocity = Float32MultiArray(data=array.array("f", [0.05, -0.1, 0.2]))
    return state, velocity


def by_topic(node, entities) -> dict[str, object]:
    """``entities`` (subscriptions or publishers) of ``node`` by their topic's last part."""
    return {entity.topic_name.rsplit("/", 1)[-1]: entity for entity in entities}


def tick_of(node, state, velocity) -> Callable[[], None]:
    """One tick of ``node``: its ``state`` then its ``velocity`` subscription callback, called
    with those messages; called once here, so every input has a value from then on."""
    subscriptions = by_topic(node, node.subscriptions)
    on_state, on_velocity = subscriptions["state"].callback, subscriptions["velocity"].callback

    def tick() -> None:
        on_state(state)
        on_velocity(velocity)

    tick()
    return tick


def fused_parts(node, state, velocity) -> tuple[Callable, dict[str, Callable]]:
    """The fused node's tick and its parts, each a callable."""
    from leapp_ros.messages.topic_io import nonfinite

    tick = tick_of(node, state, velocity)
    readers = {reader.topic.rsplit("/", 1)[-1]: reader for reader in node._readers}
    preprocess, policy = node._stages
    _, publisher, writer = policy.publish_now[0]
    raw = isinstance(state, bytes)  # the node's raw CDR path (parameter raw_messages)
    read = {name: (r.read_raw if raw else r.read) for name, r in readers.items()}
    decoded = read["state"](state) + read["velocity"](velocity)
    obs = preprocess.call(preprocess.values)
    policy.values[0] = obs[0]
    action = policy.call(policy.values)
    message = writer.write(action[0])
    parts = {
        "decode both messages": lambda: (read["state"](state), read["velocity"](velocity)),
        "NaN/inf checks of the inputs": lambda: nonfinite(decoded, range(len(decoded))),
        "preprocess (TorchScript)": lambda: preprocess.call(preprocess.values),
        "policy (ONNX)": lambda: policy.call(policy.values),
        "NaN/inf checks of the outputs": lambda: (nonfinite(obs, (0,)), nonfinite(action, (0,))),
        "encode the action": lambda: writer.write(action[0]),
        "publish the action": lambda: publisher.publish(message),
    }
    return tick, parts


def hand_written_parts(node, artifacts, state, velocity) -> tuple[Callable, dict[str, Callable]]:
    """The hand-written node's tick and its parts (its calls loaded again, the same way)."""
    import numpy as np
    from std_msgs.msg import Float32MultiArray

    tick = tick_of(node, state, velocity)
    call = load_calls(artifacts)
    arrays = [np.frombuffer(state.data, np.float32), np.frombuffer(velocity.data, np.float32)]
    action = call(arrays)
    publisher = next(p for p in node.publishers if p.topic_name.endswith("/action"))
    message = Float32MultiArray(data=array.array("f", action.tobytes()))
    parts = {
        "decode both messages": lambda: [
            np.frombuffer(given.data, np.float32) for given in (state, velocity)
        ],
        "both model calls": lambda: call(arrays),
        "encode the action": lambda: Float32MultiArray(data=array.array("f", action.tobytes())),
        "publish the action": lambda: publisher.publish(message),
    }
    return tick, parts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20000, help="timed calls of each")
    parser.add_argument("--rounds", type=int, default=20, help="alternating rounds of them")
    parser.add_argument(
        "--idle-ms", type=float, default=0.0, help="idle before each call, on a woken thread"
    )
    args = parser.parse_args(argv)

    import rclpy

    import leapp.spec
    from leapp_ros.node.fused_node import FusedPipelineNode
    from leapp_ros.plan.pipeline import make_plan

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(os.environ["ROS_DOMAIN_ID"]))
    with tempfile.TemporaryDirectory() as folder:
        path = export_seed(Path(folder))
        spec = leapp.spec.load(path)
        plan = make_plan(spec, namespace="/tick_fused")
        fused = FusedPipelineNode(
            node_name="leapp_fused",
            namespace=plan.namespace,
            context=context,
            spec=spec,
            parameter_overrides=parameters(path, -1),
        )
        single = single_of(make_plan(spec, namespace="/tick_hand"), spec.directory)
        hand = make_hand_written_node(single, "/tick_hand", context)
        state, velocity = messages()
        if fused._raw:  # its subscriptions take serialized messages
            from rclpy.serialization import serialize_message

            fused_tick, fused_each = fused_parts(
                fused, serialize_message(state), serialize_message(velocity)
            )
        else:
            fused_tick, fused_each = fused_parts(fused, state, velocity)
        hand_tick, hand_each = hand_written_parts(hand, single.artifacts, state, velocity)
        calls = {
            FUSED_TICK: fused_tick,
            HAND_TICK: hand_tick,
            **{f"leapp fused node: {label}": call for label, call in fused_each.items()},
            **{f"hand-written node: {label}": call for label, call in hand_each.items()},
        }
        if args.idle_ms > 0:  # each wake costs the idle time: fewer samples
            samples = max(100, args.samples // 20)
            timings = time_handed_over(calls, samples, idle_s=args.idle_ms / 1000.0)
        else:
            timings = time_interleaved(calls, args.samples, args.rounds)
        fused.destroy_node()
        hand.destroy_node()
    context.try_shutdown()

    how = f"after {args.idle_ms:g} ms idle, on a woken thread" if args.idle_ms > 0 else "in loops"
    print(
        "one tick of the seed pipeline's node, callbacks called directly (no middleware wake), "
        + how
    )
    print(f"  {'median / p99 (us)':<66}{'median':>9} {'p99':>9}")
    for tick, each in ((FUSED_TICK, fused_each), (HAND_TICK, hand_each)):
        owner = tick.split(":")[0]
        total = 0.0
        for label in each:
            timing = timings[f"{owner}: {label}"]
            total += timing.median
            print(f"    {owner + ': ' + label:<64}{timing.median:9.1f} {timing.p99:9.1f}")
        ticked = timings[tick]
        each_own = "on a wake of its own" if args.idle_ms > 0 else "in a loop of its own"
        print(f"    {owner + ': sum of the parts, each ' + each_own:<64}{total:9.1f}")
        print(
            f"    {tick:<64}{ticked.median:9.1f} {ticked.p99:9.1f}"
            f"   = {ticked.median / total:.2f}x the sum of its parts"
        )
    ratio = timings[FUSED_TICK].median / timings[HAND_TICK].median
    print(f"  leapp fused tick / hand-written tick: {ratio:.2f}x")


if __name__ == "__main__":
    main()
