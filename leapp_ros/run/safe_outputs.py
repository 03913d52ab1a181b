"""The command outputs a graph's stand-in covers when a process dies: :func:`plan_safe_outputs`.

A pipeline node publishes the safe action of an output (``ports.<port>.safe_action``:
``hold`` or ``values``; :mod:`leapp_ros.plan.limits`) when it stops commanding; a process
killed or crashing publishes nothing. The stand-in (:mod:`leapp_ros.run.stand_in`) publishes
it in the dead process's place, from the same parameters: a :class:`SafeOutput` per output
whose safe action is not ``silent``, read from the graph's parameters file the way the node
reads it (the ``/**`` section, then the node's own), with the period the node publishes its
safe action at (``1 / rate_hz``, else the pipeline's frequency, else ``input_timeout_ms``,
else 0.1 s). A fused node publishes the safe action of the pipeline's outputs only (those no
other node consumes), so its stand-in does too. No rclpy import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from leapp.errors import LeappError
from leapp_ros.plan.limits import LIMIT_PARAMETERS, OutputLimits, output_limits
from leapp_ros.plan.param_sections import node_parameters
from leapp_ros.plan.pipeline import NodePlan, OutputPlan, PipelinePlan, PlanError
from leapp_ros.plan.selection import select_nodes
from leapp_ros.run.deployment import Deployment, GraphOptions

__all__ = ["DEFAULT_PERIOD_S", "SafeOutput", "plan_safe_outputs"]

DEFAULT_PERIOD_S = 0.1  # as a node without a rate or a watchdog (managed_node)
FUSED_NODE = "leapp_fused"


@dataclass(frozen=True)
class SafeOutput:
    """One output whose safe action the stand-in publishes while its process is dead.

    ``node`` is the pipeline node (its status records say whether it is active and in which
    process), ``output`` the port's plan (relative topic, message, QoS), ``limits`` its safe
    action (``hold`` or ``values``), ``period_s`` how often it is published.
    """

    node: str
    output: OutputPlan
    limits: OutputLimits
    period_s: float

    @property
    def action(self) -> str:
        return self.limits.safe_action


def plan_safe_outputs(plan: PipelinePlan, options: GraphOptions) -> tuple[SafeOutput, ...]:
    """The outputs of the pipeline nodes ``options`` runs on this host whose safe action is
    ``hold`` or ``values`` (see the module documentation), in pipeline and port order.

    Raises:
        PlanError: the parameters file cannot be read, or a safe action in it is invalid
            (the message names the node and the parameter).
    """
    document = _document(options.params_file)
    chosen = select_nodes(plan, options.nodes)
    fused = options.deployment is Deployment.FUSED
    consumed = {i.source for node in plan.nodes for i in node.inputs if i.source is not None}
    found: list[SafeOutput] = []
    for node in plan.nodes:
        if node not in chosen:
            continue
        parameters = node_parameters(document, FUSED_NODE if fused else node.name, plan.namespace)
        period_s = _period(node, parameters)
        for output in node.outputs:
            if fused and f"{node.name}/{output.port}" in consumed:
                continue
            limits = _limits(node, output, parameters, fused)
            if limits is None or limits.safe_action == "silent":
                continue
            if limits.safe_values is not None:  # the port's dtype, as its messages carry it
                limits = replace(limits, safe_values=limits.safe_values.astype(output.dtype))
            found.append(SafeOutput(node.name, output, limits, period_s))
    return tuple(found)


def _document(path: Path | None) -> Mapping[str, Any]:
    if path is None:
        return {}
    import yaml

    try:
        document = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise PlanError(f"parameters file {str(path)!r}: {e}") from e
    if not isinstance(document, Mapping):
        raise PlanError(f"parameters file {str(path)!r} is not a mapping of node sections")
    return document


def _limits(
    node: NodePlan, output: OutputPlan, parameters: Mapping[str, Any], fused: bool
) -> OutputLimits | None:
    given = {name: parameters.get(f"ports.{output.port}.{name}") for name, _ in LIMIT_PARAMETERS}
    if all(value is None for value in given.values()):
        return None
    owner = FUSED_NODE if fused else node.name
    try:
        return output_limits(
            f"node {owner!r}: parameter ports.{output.port}", output.port, output.shape, given
        )
    except LeappError as e:
        raise PlanError(str(e)) from None


def _period(node: NodePlan, parameters: Mapping[str, Any]) -> float:
    """How often the node publishes its safe action (``ManagedNode._safe_period``)."""
    rate = _number(parameters.get("rate_hz")) or node.firing.rate_hz
    if rate:
        return 1.0 / rate
    timeout_ms = _number(parameters.get("input_timeout_ms"))
    return timeout_ms / 1000.0 if timeout_ms else DEFAULT_PERIOD_S


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return float(value)
