"""A ROS 2 parameters file checked as the nodes of an export would read it at startup, without
starting them: every section names a node of the export (``/<namespace>/<node>``, or ``/**``),
every parameter is one a pipeline node declares (a misspelt key fails, as
``refuse_unknown_parameters`` makes the node fail), the values pass the nodes' own checks
(``declare_parameters``, ``declare_output_limits``, ``declare_input_bounds``,
``declare_output_rates`` and
``output_rates``, ``declare_port_overrides``: a limit of the wrong length fails), every
``ports.<port>`` of a node's section names a port of its node and every one of ``/**`` a port
of some node (it reaches the nodes that have it), and the plan (``make_plan`` with the file's
port overrides, ``file_firing`` with its firing rules) and the outputs each node plays out at
a rate of their own are what comes back."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

from leapp import spec as spec_module
from leapp_ros.plan.domain import declare_input_bounds
from leapp_ros.plan.firing_settings import file_firing
from leapp_ros.plan.graph_plan import PipelinePlan
from leapp_ros.plan.limits import declare_output_limits
from leapp_ros.plan.output_rates import (
    OutputRate,
    consumed_outputs,
    declare_output_rates,
    output_rates,
)
from leapp_ros.plan.param_sections import flat_parameters
from leapp_ros.plan.pipeline import make_plan
from leapp_ros.plan.settings import (
    declare_parameters,
    declare_port_overrides,
    port_overrides,
    refuse_unknown_parameters,
)

__all__ = ["CheckedParams", "check_params_file"]


class _Logger:
    def __init__(self, where: str):
        self.where = where

    def warning(self, text: str) -> None:
        raise AssertionError(f"{self.where}: {text}")

    info = debug = warning


class _StartingNode:
    """What the checks above ask of a starting rclpy node: parameter values given in a file."""

    def __init__(self, given: dict[str, Any], where: str):
        self._parameter_overrides = given
        self.declared: set[str] = set()
        self.where = where

    def declare_parameter(self, name: str, default: Any, descriptor: Any = None):
        self.declared.add(name)
        return SimpleNamespace(value=self._parameter_overrides.get(name, default))

    def has_parameter(self, name: str) -> bool:
        return name in self.declared

    def get_logger(self) -> _Logger:
        return _Logger(self.where)


@dataclass(frozen=True)
class CheckedParams:
    """What a parameters file gives the nodes of an export."""

    plan: PipelinePlan  # with the file's port overrides and firing rules
    rates: dict[str, tuple[OutputRate, ...]]  # the outputs each node plays out at a rate


def _ports(model: Any) -> set[str]:
    return {port.name for port in (*model.inputs, *model.outputs)}


def check_params_file(path: Path, export: Path) -> CheckedParams:
    """Check ``path`` against the export folder ``export`` (see the module docs)."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    spec = spec_module.load(export)
    models = {model.name: model for model in spec.models}
    namespace = f"/{spec.name}"
    assert isinstance(document, dict) and document, f"{path}: no sections"
    for key, section in document.items():
        node = str(key).rsplit("/", 1)[-1]
        assert key == "/**" or (key == f"{namespace}/{node}" and node in models), (
            f"{path}: section {key!r} names no node of {namespace} ({sorted(models)})"
        )
        assert set(section) == {"ros__parameters"}, f"{path}: {key}: {sorted(section)}"
    everywhere = flat_parameters((document.get("/**") or {}).get("ros__parameters", {}))
    every_port = set().union(*map(_ports, models.values()))
    for key in everywhere:
        port = key.split(".")[1] if key.startswith("ports.") else None
        assert port is None or port in every_port, (
            f"{path}: section '/**': parameter {key} names no port of any node of "
            f"{namespace} ({sorted(every_port)})"
        )
    ports = port_overrides(document, list(models), namespace)
    plan = file_firing(make_plan(spec, namespace=namespace, ports=ports), document)
    rates = {}
    for name, model in models.items():
        # a "/**" port parameter reaches the nodes that have the port (the others warn)
        given = {k: v for k, v in everywhere.items()
                 if not k.startswith("ports.") or k.split(".")[1] in _ports(model)}  # fmt: skip
        own = (document.get(f"{namespace}/{name}") or {}).get("ros__parameters", {})
        given.update(flat_parameters(own))
        where = f"{path}: node {namespace}/{name}"
        node = _StartingNode(given, where)
        settings = declare_parameters(node)
        declare_output_limits(node, model)  # in the order the node declares them
        declare_input_bounds(node, model, default_action=settings["on_out_of_domain"])
        played = declare_output_rates(node, model)
        declare_port_overrides(node, model)
        refuse_unknown_parameters(node, where)
        node_plan = plan.node(name)
        consumed = consumed_outputs(plan, name)
        rates[name] = output_rates(played, node_plan, node_plan.firing, consumed, where)
    return CheckedParams(plan=plan, rates=rates)
