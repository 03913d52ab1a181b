"""How soon a running graph's operations act: the input watchdog, the e-stop, a firing timer.

    python bench/reaction_time.py [--repeat N] [--mode processes|composed|fused]

The tests check what must hold however loaded the machine is (the safe action comes, and not
before the timeout by the node's own clock; a timer never fires faster than its rate); how soon
and how steadily is this bench's business. It runs the seed pipeline (examples/torch_pipeline.py)
isolated (:class:`leapp_ros.testing.GraphUnderTest`) with ``input_timeout_ms`` and a safe action
on ``action``, and a ``preprocess`` of its own on a timer, and prints medians over ``--repeat``:

- watchdog: the age of the last input set when the watchdog fired, by the node's clock (the
  ``last_set_age_s`` of the WARN it sends at once), over ``input_timeout_ms``; and, at the
  client, from the last command's arrival to the first safe action's;
- e-stop: from the ``~/enable`` request (false) to the first safe action at the client;
- timer: the node's ``firing_rate_hz`` (runs between its periodic reports, by its clock) over
  ``rate_hz``.

Figures depend on the machine and its load; nothing is compared with a figure from elsewhere.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
import yaml
from seed_export import export_seed

NAMESPACE = "/torch_pipeline"
TIMEOUT_MS = 200.0
SAFE = [0.1, -0.1, 0.2, -0.2, 0.0, 0.05]
RATE_HZ = 50.0
WAIT_S = 30.0


def _params(folder: Path) -> Path:
    path = folder / "params.yaml"
    parameters = {"input_timeout_ms": TIMEOUT_MS, "ports": {"action": {"safe_values": SAFE}}}
    path.write_text(yaml.safe_dump({"/**": {"ros__parameters": parameters}}), encoding="utf-8")
    return path


def _is_safe(message) -> bool:
    return torch.allclose(torch.tensor(list(message.data)), torch.tensor(SAFE), atol=1e-6)


def _diagnostics(graph, name: str):
    """Every ``/diagnostics`` status named ``name`` from now on (a list that grows)."""
    from diagnostic_msgs.msg import DiagnosticArray

    arrays = graph.probe.subscribe("/diagnostics", DiagnosticArray)
    return lambda: [s for a in arrays for s in a.status if s.name == name]


def _command(graph, inbox) -> float:
    """One input pair, until its command arrives; the client's clock at its arrival."""
    before = len(inbox)
    graph.publish({"preprocess/state": torch.randn(6), "preprocess/velocity": torch.randn(3)})
    graph.probe.spin_until(
        lambda: any(not _is_safe(m) for m in inbox[before:]), WAIT_S, "a command"
    )
    return time.monotonic()


def _first_safe(graph, inbox, before: int) -> float:
    graph.probe.spin_until(lambda: any(_is_safe(m) for m in inbox[before:]), WAIT_S, "safe")
    return time.monotonic()


def watchdog(graph, repeat: int) -> tuple[list[float], list[float]]:
    """Per round: the node's age of the last set at the timeout, the client's delay."""
    from diagnostic_msgs.msg import DiagnosticStatus

    inbox = graph.endpoints.output("policy/action")[2]
    reports = _diagnostics(graph, f"{NAMESPACE}/policy")
    ages, delays = [], []
    for _ in range(repeat):
        arrived = _command(graph, inbox)
        safe_at = _first_safe(graph, inbox, len(inbox))
        timeouts = str(graph.probe.spin_until(
            lambda: (s := graph.status()["policy"])["safe_action"] and s["timeouts"], WAIT_S,
            "the timeout counted",
        ))  # fmt: skip

        def age(timeouts=timeouts):
            values = [{kv.key: kv.value for kv in s.values} for s in reports()
                      if s.level == DiagnosticStatus.WARN]  # fmt: skip
            found = [float(v["last_set_age_s"]) for v in values if v["timeouts"] == timeouts]
            return min(found) if found else None

        ages.append(graph.probe.spin_until(age, WAIT_S, "the WARN of the timeout"))
        delays.append(safe_at - arrived)
    return ages, delays


def estop(graph, repeat: int) -> list[float]:
    """Per round: from the ``~/enable`` request (false) to the first safe action."""
    from std_srvs.srv import SetBool

    node = f"{NAMESPACE}/{'leapp_fused' if graph.fused else 'policy'}"
    client = graph.probe.node.create_client(SetBool, f"{node}/enable")
    graph.probe.spin_until(client.service_is_ready, WAIT_S, "the enable service")
    inbox = graph.endpoints.output("policy/action")[2]
    delays = []
    for _ in range(repeat):
        _command(graph, inbox)  # commanding: the watchdog has not fired
        before = len(inbox)
        asked = time.monotonic()
        future = client.call_async(SetBool.Request(data=False))
        delays.append(_first_safe(graph, inbox, before) - asked)
        graph.probe.spin_until(future.done, WAIT_S, "the answer")
        released = client.call_async(SetBool.Request(data=True))
        graph.probe.spin_until(released.done, WAIT_S, "the release")
    graph.probe.node.destroy_client(client)
    return delays


def timer_rates(export: Path, repeat: int) -> list[float]:
    """The ``firing_rate_hz`` a preprocess on a ``RATE_HZ`` timer reports, ``repeat`` times."""
    from leapp_ros.testing import GraphOptions, GraphUnderTest

    with tempfile.TemporaryDirectory() as folder:
        params = Path(folder) / "timer.yaml"
        section = {"ros__parameters": {"firing": "timer", "rate_hz": RATE_HZ}}
        params.write_text(yaml.safe_dump({f"{NAMESPACE}/preprocess": section}))
        with GraphUnderTest(export, GraphOptions(params_file=params)) as graph:
            reports = _diagnostics(graph, f"{NAMESPACE}/preprocess")
            graph.publish(
                {"preprocess/state": torch.randn(6), "preprocess/velocity": torch.randn(3)}
            )

            def rates():
                return [float(kv.value) for s in reports() for kv in s.values
                        if kv.key == "firing_rate_hz" and float(kv.value) > 0]  # fmt: skip

            graph.probe.spin_until(lambda: len(rates()) >= repeat, WAIT_S + repeat, "rates")
            return rates()[:repeat]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="rounds of each")
    parser.add_argument("--mode", default="processes", choices=["processes", "composed", "fused"])
    args = parser.parse_args(argv)

    from leapp_ros.testing import GraphOptions, GraphUnderTest

    with tempfile.TemporaryDirectory() as folder:
        export = export_seed(Path(folder)).spec_path
        params = _params(Path(folder))
        with GraphUnderTest(export, GraphOptions(args.mode, params_file=params)) as graph:
            ages, delays = watchdog(graph, args.repeat)
            stops = estop(graph, args.repeat)
        rates = timer_rates(export, args.repeat)
    timeout_s = TIMEOUT_MS / 1000
    age = statistics.median(ages)
    print(f"== {args.mode}, medians of {args.repeat} ==")
    print(f"watchdog: last set {age * 1000:.1f} ms old when it fired = {age / timeout_s:.2f}x "
          f"input_timeout_ms ({TIMEOUT_MS:g} ms), by the node's clock")  # fmt: skip
    print(f"watchdog: first safe action {statistics.median(delays) * 1000:.1f} ms after the "
          "last command, at the client")  # fmt: skip
    print(f"e-stop: first safe action {statistics.median(stops) * 1000:.1f} ms after the "
          "~/enable request, at the client")  # fmt: skip
    rate = statistics.median(rates)
    print(f"timer: {rate:.2f} Hz = {rate / RATE_HZ:.3f}x rate_hz ({RATE_HZ:g} Hz), by the "
          "node's clock")  # fmt: skip


if __name__ == "__main__":
    main()
