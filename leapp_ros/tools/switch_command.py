"""``leapp-ros switch``: switch every node of a running graph to another export's policy.

::

    leapp-ros run exports/arm_policy &                       # or ros2 launch, on the robot
    leapp-ros switch exports/arm_policy exports/arm_policy_v2
    leapp-ros switch exports/arm_policy exports/arm_policy_v2 --carry-state h --timeout 30

It joins the graph in the ROS domain of the environment, as ``ros2 param`` does, and:

1. checks here that the new export fits the running one (checksums, ports and wiring of every
   node: :func:`leapp_ros.plan.switch_check.switch_differences`): differences are printed and
   nothing is asked of the graph (exit code 2);
2. finds the graph's ROS nodes from their status records (``_leapp/status``: one node per
   pipeline node, or the fused node) and sets each one's ``load`` parameter to the new export
   (with ``carry_state``, in one atomic request: :mod:`leapp_ros.node.policy_switch`);
3. waits for each node's outcome in its status records: ``switched`` once the new policy
   took over and passed its probation; ``refused``, ``failed`` or ``rolled_back`` otherwise.

Exit code 0 when every node switched. When one did not (or gave no outcome within
``--timeout`` seconds: a node takes over at its next run, so inputs must be flowing), the
nodes that did switch are switched back to ``RUNNING_EXPORT``, each node's outcome is printed,
and the exit code is 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["FINAL_STATES", "add_switch", "switch_graph"]

FINAL_STATES = ("switched", "refused", "failed", "rolled_back", "abandoned")
EXIT_FAILED, EXIT_REFUSED = 1, 2
_SLICE_S = 0.05


def add_switch(commands: argparse._SubParsersAction) -> None:
    """Register ``switch`` with the ``leapp-ros`` subcommands."""
    switch = commands.add_parser(
        "switch",
        help="switch a running graph to another export's policy, at a tick boundary",
        description=(
            "Check that NEW_EXPORT has the ports and wiring of RUNNING_EXPORT, ask every node "
            "of the running graph to load it beside the running policy and take over at its "
            "next run, and wait for each node's outcome (switched, or refused / rolled back: "
            "then the nodes that switched go back to RUNNING_EXPORT). Exit code 0 when every "
            "node switched."
        ),
    )
    switch.add_argument("running", type=Path, help="the export the graph runs (folder or YAML)")
    switch.add_argument("new", type=Path, help="the export to switch to (folder or YAML)")
    switch.add_argument("--namespace", help="ROS namespace of the graph (default: pipeline name)")
    switch.add_argument(
        "--carry-state",
        nargs="+",
        default=[],
        metavar="PORT",
        help="state inputs that keep their value (<port> or <node>/<port>); the others start "
        "from the new export's initial values",
    )
    switch.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the outcome (60)"
    )
    switch.set_defaults(handler=_switch)


def _switch(args: argparse.Namespace) -> int:
    from leapp import spec as spec_file
    from leapp_ros.plan.switch_check import switch_differences
    from leapp_ros.run.processes import load_plan
    from leapp_ros.tools.verification import find_export

    running, new = find_export(args.running), find_export(args.new)
    plan = load_plan(running, args.namespace)
    old_spec = spec_file.load(running, verify_checksums=True)
    new_spec = spec_file.load(new, verify_checksums=True)
    names = [model.name for model in old_spec.models]
    differences = switch_differences(old_spec, new_spec, names, whole=True)
    if differences:
        print(f"leapp-ros switch: {args.new} does not fit {args.running}:", file=sys.stderr)
        for line in differences:
            print(f"  {line}", file=sys.stderr)
        return EXIT_REFUSED
    outcomes = switch_graph(
        plan.namespace,
        [node.name for node in plan.nodes],
        str(Path(new).resolve()),
        back_to=str(Path(running).resolve()),
        carry=list(args.carry_state),
        timeout_s=args.timeout,
    )
    for node, record in outcomes.items():
        print(f"leapp-ros switch: {node}: {_describe(record)}")
    sys.stdout.flush()
    ok = all(r is not None and r["state"] == "switched" for r in outcomes.values())
    return 0 if ok else EXIT_FAILED


def _describe(record: dict[str, Any] | None) -> str:
    if record is None:
        return "no outcome within the timeout (are inputs flowing? it takes over at a run)"
    state = record["state"]
    if state == "switched":
        runs = record.get("first_run") or {}
        tick = record.get("tick")
        at = ", ".join(f"{n} at run {r}" for n, r in runs.items())
        text = f"switched to {record['export']} ({at}{'' if tick is None else f', tick {tick}'})"
        if "switched_back" not in record:
            return text
        if record["switched_back"]:
            return f"{text}, then back to {record['previous']} (another node did not switch)"
        return f"{text}; switching it back to {record['previous']} FAILED: check it"
    return f"{state.replace('_', ' ')}: {record.get('reason')}"


def switch_graph(
    namespace: str,
    pipeline_nodes: list[str],
    export: str,
    *,
    back_to: str | None = None,
    carry: list[str] | None = None,
    timeout_s: float = 60.0,
    context: Any = None,
) -> dict[str, dict[str, Any] | None]:
    """Ask every ROS node running ``pipeline_nodes`` under ``namespace`` to switch to
    ``export`` and wait for the outcomes (by ROS node; None: none within ``timeout_s``). If
    one did not switch, the nodes that did are switched back to ``back_to`` (their record
    then has ``"switched_back": true``)."""
    import rclpy

    own = context is None
    if own:
        from rclpy.context import Context

        context = Context()
        rclpy.init(context=context)
    node = rclpy.create_node("leapp_switch", context=context, start_parameter_services=False)
    try:
        client = _GraphClient(node, namespace, context)
        deadline = time.monotonic() + timeout_s
        nodes = client.find_nodes(pipeline_nodes, deadline)
        outcomes = client.switch(nodes, export, carry or [], deadline)
        failed = [n for n, r in outcomes.items() if r is None or r["state"] != "switched"]
        switched = [n for n, r in outcomes.items() if r is not None and r["state"] == "switched"]
        if failed and switched and back_to is not None:
            back = client.switch(switched, back_to, [], time.monotonic() + timeout_s)
            for name in switched:
                record = back.get(name)
                outcomes[name] = {**outcomes[name], "switched_back": bool(record) and
                                  record["state"] == "switched"}  # fmt: skip
        return outcomes
    finally:
        node.destroy_node()
        if own:
            context.try_shutdown()


class _GraphClient:
    """The status records of a graph and the parameter services of its nodes."""

    def __init__(self, node: Any, namespace: str, context: Any):
        from std_msgs.msg import String

        from leapp_ros.plan.pipeline import METADATA_QOS, STATUS_TOPIC
        from leapp_ros.plan.settings import qos_profile

        self._node, self._namespace = node, namespace.rstrip("/")
        self._records: dict[str, dict[str, Any]] = {}  # by ROS node, the newest with a switch
        self._names: dict[str, str] = {}  # pipeline node -> ROS node
        topic = f"{self._namespace}/{STATUS_TOPIC}"
        node.create_subscription(String, topic, self._on_status, qos_profile(METADATA_QOS))
        from rclpy.executors import SingleThreadedExecutor

        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(node)

    def _on_status(self, message: Any) -> None:
        import json

        record = json.loads(message.data)
        ros_node = record.get("fused") or f"{self._namespace}/{record['node']}"
        self._names[record["node"]] = ros_node
        self._records[ros_node] = record

    def _spin_until(self, done: Any, deadline: float) -> bool:
        while not done():
            if time.monotonic() > deadline:
                return False
            self._executor.spin_once(timeout_sec=_SLICE_S)
        return True

    def find_nodes(self, pipeline_nodes: list[str], deadline: float) -> list[str]:
        """The ROS nodes running ``pipeline_nodes``, from their status records."""
        from leapp.errors import LeappError

        if not self._spin_until(lambda: set(pipeline_nodes) <= set(self._names), deadline):
            missing = sorted(set(pipeline_nodes) - set(self._names))
            raise LeappError(
                f"no status record of pipeline node(s) {missing} under {self._namespace!r}: "
                "is the graph running in this ROS domain (ROS_DOMAIN_ID), in this namespace?"
            )
        return list(dict.fromkeys(self._names[name] for name in pipeline_nodes))

    def switch(
        self, nodes: list[str], export: str, carry: list[str], deadline: float
    ) -> dict[str, dict[str, Any] | None]:
        """Set ``load`` on each of ``nodes``; their outcomes (None: none by ``deadline``)."""
        before = {n: (self._records[n].get("switch") or {}).get("request", 0) for n in nodes}
        outcomes: dict[str, dict[str, Any] | None] = dict.fromkeys(nodes)
        for name in nodes:
            reason = self._request(name, export, carry, deadline)
            if reason is not None:
                outcomes[name] = {"state": "refused", "reason": reason, "export": export}

        def outcome(name: str) -> dict[str, Any] | None:
            switch = self._records[name].get("switch") or {}
            new = switch.get("request", 0) > before[name] and switch.get("export") == export
            return switch if new and switch["state"] in FINAL_STATES else None

        def finished() -> bool:
            for name in nodes:
                if outcomes[name] is None:
                    outcomes[name] = outcome(name)
            return all(record is not None for record in outcomes.values())

        self._spin_until(finished, deadline)
        return outcomes

    def _request(self, name: str, export: str, carry: list[str], deadline: float) -> str | None:
        """Set ``carry_state`` and ``load`` of ROS node ``name`` at once; None, or why not."""
        from rcl_interfaces.srv import SetParametersAtomically
        from rclpy.parameter import Parameter

        client = self._node.create_client(
            SetParametersAtomically, f"{name}/set_parameters_atomically"
        )
        try:
            if not self._spin_until(client.service_is_ready, deadline):
                return f"its parameter service {client.srv_name} did not answer"
            request = SetParametersAtomically.Request(
                parameters=[
                    Parameter(
                        "carry_state", Parameter.Type.STRING_ARRAY, carry
                    ).to_parameter_msg(),
                    Parameter("load", Parameter.Type.STRING, export).to_parameter_msg(),
                ]
            )
            future = client.call_async(request)
            if not self._spin_until(future.done, deadline):
                return "no answer to the request within the timeout"
            result = future.result().result
            return None if result.successful else result.reason
        finally:
            self._node.destroy_client(client)
