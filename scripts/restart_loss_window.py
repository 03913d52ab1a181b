"""Measure whether a subscriber that replaces a SIGKILLed one loses the first best-effort
message a long-lived publisher sends it after both matched (plain rclpy, no leapp_ros node).

    python scripts/restart_loss_window.py [--rounds N] [--after S] [--udp] [--sigint]

Each round starts a subscriber process (best effort, depth 1: the deployed QoS of a leapp_ros
input), waits for its match event, waits ``--after`` seconds more, has the publisher process
(reliable, depth 1, alive for the whole run) send three single messages 2 s apart, and ends the
subscriber with SIGKILL (``--sigint``: SIGINT, a clean exit); the next round's subscriber is the
"restarted node", started while the killed one is still in the publisher's discovery data (its
lease, about 20 s, has not ended). It prints which of the three messages each round got, and how
many restarted subscribers lost the first. ``--udp`` restricts Fast DDS to UDPv4
(``FASTDDS_BUILTIN_TRANSPORTS``).

Measured on one shared 2-core machine, 1 s after the match, restarted subscribers that lost the
first message after SIGKILL: Jazzy (Fast DDS 2.14), default transports: 3 of 5, 6 of 9, 4 of 7,
3 of 6; Jazzy, UDPv4 only: 0 of 5, 3 of 6, 3 of 8; Kilted (Fast DDS 3.2): 4 of 5, 5 of 6. Once
the first two were lost (1 s and 3 s after the match); the third (5 s) always came. After
SIGINT: 0 of 7 (Jazzy). A fresh subscriber (round 0) never lost one. 22 s after the match (the
killed one's lease ended): 0 of 4 on Jazzy and on Kilted.
"""

from __future__ import annotations

import argparse
import array
import os
import queue
import signal
import subprocess
import sys
import threading
import time


def node(role: str) -> None:
    """``pub``: one message on /restart_window per stdin line (its number); ``sub``: prints
    ``match`` and ``got N`` lines."""
    import rclpy
    from rclpy.event_handler import SubscriptionEventCallbacks
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from std_msgs.msg import Float32MultiArray

    rclpy.init()
    ros_node = rclpy.create_node(f"window_{role}")
    if role == "pub":
        reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        publisher = ros_node.create_publisher(Float32MultiArray, "/restart_window", reliable)

        def read() -> None:
            for line in sys.stdin:
                message = Float32MultiArray()
                message.data = array.array("f", [float(line)] * 9)
                publisher.publish(message)

        threading.Thread(target=read, daemon=True).start()
    else:
        ros_node.create_subscription(
            Float32MultiArray,
            "/restart_window",
            lambda message: print(f"got {int(message.data[0])}", flush=True),
            QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT),
            event_callbacks=SubscriptionEventCallbacks(
                matched=lambda status: print(f"match {status.current_count}", flush=True)
            ),
        )
    rclpy.spin(ros_node)


class Process:
    """This script run as a node in a process group of its own, its stdout lines queued."""

    def __init__(self, role: str, env: dict[str, str]):
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--node", role],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.strip())

    def line(self, prefix: str, timeout_s: float) -> str | None:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return None
            if line.startswith(prefix):
                return line
        return None

    def send(self, number: int) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{number}\n")
        self.process.stdin.flush()

    def signal(self, signum: int) -> None:
        os.killpg(self.process.pid, signum)
        self.process.wait(10)


def measure(rounds: int, after_s: float, udp: bool, stop: int = signal.SIGKILL) -> int:
    from leapp_ros.testing.probe import reserve_domain_id, ros_env

    lost = 0
    with reserve_domain_id() as domain_id:
        env = ros_env(domain_id)
        if udp:
            env["FASTDDS_BUILTIN_TRANSPORTS"] = "UDPv4"
        print(f"domain {domain_id}, {'UDPv4 only' if udp else 'default transports'}")
        publisher, number = Process("pub", env), 0
        try:
            for round_ in range(rounds):
                subscriber = Process("sub", env)
                if subscriber.line("match", 60) is None:
                    raise SystemExit(f"round {round_}: no match within 60 s")
                time.sleep(after_s)
                arrived = []
                for _ in range(3):
                    number += 1
                    publisher.send(number)
                    arrived.append(subscriber.line(f"got {number}", 2.0) is not None)
                print(f"round {round_}{' (fresh)' if round_ == 0 else ''}: arrived {arrived}")
                lost += round_ > 0 and not arrived[0]
                subscriber.signal(stop)
        finally:
            publisher.signal(signal.SIGINT)
    print(f"restarted subscribers that lost the first message: {lost} of {rounds - 1}")
    return lost


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--after", type=float, default=1.0, help="seconds after the match")
    parser.add_argument("--udp", action="store_true", help="Fast DDS on UDPv4 only")
    parser.add_argument(
        "--sigint", action="store_true", help="end each subscriber with SIGINT, not SIGKILL"
    )
    parser.add_argument("--node", choices=("pub", "sub"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.node:
        node(arguments.node)
        return 0
    stop = signal.SIGINT if arguments.sigint else signal.SIGKILL
    measure(arguments.rounds, arguments.after, arguments.udp, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
