"""ROS 2 composition in rclpy: the services that make ``leapp_container`` a component container.

rclpy has no component API, so :class:`ComponentContainer` serves composition_interfaces'
services itself, with the semantics of rclcpp_components' ``ComponentManager``; every tool that
talks to a C++ container talks to this one too (``ros2 component list | load | unload``,
launch_ros's ``ComposableNodeContainer`` and ``LoadComposableNodes``). The container node
(named by :func:`leapp_ros.plan.selection.container_name`, or ``-r __node:=``) serves:

``~/_container/load_node`` (``LoadNode``)
    Creates a :class:`~leapp_ros.node.pipeline_node.PipelineNode` from the request (checked by
    :mod:`leapp_ros.run.load_request`: plugin ``leapp_ros::PipelineNode`` of ``leapp_ros``
    only; its remap rules, name, namespace, parameters, log level and extra arguments, never
    the container's own ROS arguments, whose ``__node`` / ``__ns`` remaps would rename it) and
    adds it to the running executor. A parameter the node does not have is ignored with a
    warning (QoS overrides of topics it does not use silently); ``use_intra_process_comms``
    puts it on the container's :class:`~leapp_ros.node.intra_process.IntraProcessBus`, so
    values between it and the other nodes on it skip the middleware. The response has the
    node's unique id (1, 2, ..., never reused) and its full name (``/ns/name``).
``~/_container/unload_node`` (``UnloadNode``)
    Stops the node with that id (it publishes its ``stopping`` status), removes it from the
    executor and destroys it.
``~/_container/list_nodes`` (``ListNodes``)
    The unique ids and full names of the nodes in the container, in id order.

A request that cannot be served gets ``success=False`` and an ``error_message`` saying what is
wrong and what to do; the container logs it too. Nothing of the failed node is left, and the
container and its other nodes go on undisturbed. Refused: another package or plugin, a node
name or remap rule that rcl rejects, a full name already in the container, a parameter of the
wrong type, a ``spec_path`` that is unset or does not load (missing, invalid, checksums), an
unknown ``pipeline_node``, a bad ``log_level`` or extra argument, and a ``cpu_affinity`` other
than that of the nodes already in the process (they share it; a load that fails after pinning
puts the process's CPUs back). Unloading a node does not unpin the process.

As in rclcpp, a node is created in the service callback, on the executor's thread: the container
does nothing else while a model loads and warms up.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Sequence
from typing import Any

from leapp.errors import LeappError
from leapp_ros.node.intra_process import IntraProcessBus
from leapp_ros.run.load_request import (
    CompositionError,
    check_plugin,
    cpus_asked,
    intra_process_asked,
    log_level_of,
    node_arguments,
    one_line,
    parameters_of,
)

__all__ = ["INSTALL_HINT", "ComponentContainer", "composition_available"]

NODE_NAME = "leapp_node"  # the name of a loaded node whose request names none
INSTALL_HINT = (
    "install the ROS 2 package composition_interfaces (it comes with a ROS 2 install, e.g. "
    "apt's ros-<distro>-composition-interfaces; with ROS 2 from pip, scripts/setup.sh installs "
    "it along with launch)"
)


def composition_available() -> bool:
    """Whether composition_interfaces can be imported (the container's services need it)."""
    try:
        import composition_interfaces.srv  # noqa: F401
    except ImportError:
        return False
    return True


class ComponentContainer:
    """The component services of one container process, on its container node.

    Args:
        node: the container node, which serves the services once :meth:`serve` is called.
        nodes: every node of the process (the list :func:`leapp_ros.node.executor.run_nodes` stops
            and destroys at shutdown); loaded nodes are appended, unloaded ones removed.
    """

    def __init__(self, node: Any, nodes: list[Any]):
        self.node = node
        self._nodes = nodes
        self._components: dict[int, Any] = {}
        self._last_id = 0
        self.bus = IntraProcessBus()  # of the nodes loaded with use_intra_process_comms

    def add(self, component: Any) -> int:
        """Register a node created otherwise (an EXPORT's pipeline node); its unique id."""
        self._last_id += 1
        self._components[self._last_id] = component
        return self._last_id

    def listing(self) -> list[tuple[int, str]]:
        """``(unique id, full node name)`` of every node in the container, in id order."""
        return [(i, node.get_fully_qualified_name()) for i, node in self._components.items()]

    def serve(self) -> None:
        """Create the ``~/_container/{load_node,unload_node,list_nodes}`` services."""
        from composition_interfaces.srv import ListNodes, LoadNode, UnloadNode

        create = self.node.create_service
        create(LoadNode, "~/_container/load_node", self._on_load)
        create(UnloadNode, "~/_container/unload_node", self._on_unload)
        create(ListNodes, "~/_container/list_nodes", self._on_list)

    # --- load ---------------------------------------------------------------------------

    def load(self, request: Any) -> tuple[int, str]:
        """Create the node a ``LoadNode`` request describes and add it to the executor.

        Returns:
            Its unique id and full node name.

        Raises:
            CompositionError: the request cannot be served (see the module documentation).
        """
        check_plugin(request.package_name, request.plugin_name)
        intra_process = intra_process_asked(request.extra_arguments)
        level = log_level_of(request.log_level)
        parameters = parameters_of(request.parameters)
        arguments = node_arguments(request.remap_rules, request.node_name, request.node_namespace)
        full_name, logger_name = self._resolve_name(arguments)
        self._check_cpus(full_name, parameters)
        if level is not None:
            from rclpy.logging import set_logger_level

            set_logger_level(logger_name, level)
        bus = self.bus if intra_process else None
        component = self._create(full_name, parameters, arguments, bus)
        self._nodes.append(component)
        self.node.executor.add_node(component)
        ignored = sorted(
            {p.name for p in parameters if not component.has_parameter(p.name)}
            - {p.name for p in parameters if p.name.startswith("qos_overrides.")}  # other topics
        )
        if ignored:
            self.node.get_logger().warning(
                f"{full_name} has no parameter(s) {', '.join(ignored)}; ignored them (see "
                "config/leapp_ros.yaml of leapp_ros for the parameters of a pipeline node)"
            )
        return self.add(component), full_name

    def _resolve_name(self, arguments: Sequence[str]) -> tuple[str, str]:
        """The full name and logger name a node with ``arguments`` gets, as rcl resolves
        them (a bare rclpy node is created and destroyed at once); refuses duplicates."""
        from rclpy.node import Node

        try:
            probe = Node(
                NODE_NAME,
                context=self.node.context,
                cli_args=list(arguments),
                use_global_arguments=False,
                enable_rosout=False,
                start_parameter_services=False,
            )
        except Exception as e:  # rcl rejected a remap rule, a name or a namespace
            raise CompositionError(
                f"invalid node name, namespace or remap rule in {list(arguments)[1:]}: "
                f"{one_line(e)}; use ROS names (letters, digits, _) and rules 'from:=to'"
            ) from e
        try:
            full_name, logger_name = probe.get_fully_qualified_name(), probe.get_logger().name
        finally:
            probe.destroy_node()
        if full_name in {name for _, name in self.listing()}:
            raise CompositionError(
                f"a node named {full_name} is already in this container; unload it first "
                "(ros2 component unload) or give this one another name or namespace"
            )
        return full_name, logger_name

    def _check_cpus(self, full_name: str, parameters: Sequence[Any]) -> None:
        asked = cpus_asked(parameters)
        pinned = {}
        for component in self._components.values():
            cpus = _affinity_of(component)
            if cpus:
                pinned[component.get_fully_qualified_name()] = cpus
        if asked is None or not pinned or set(pinned.values()) == {asked}:
            return
        listed = ", ".join(f"{name} {list(cpus)}" for name, cpus in pinned.items())
        raise CompositionError(
            f"cannot load {full_name}: it asks for CPUs {list(asked)} (cpu_affinity), but the "
            f"nodes of this container run on other CPUs ({listed}) and they share one process; "
            "give it the same cpu_affinity, or load it into another container"
        )

    def _create(
        self, full_name: str, parameters: list[Any], arguments: list[str], bus: Any
    ) -> Any:
        from rclpy.exceptions import ParameterException

        from leapp_ros.node.pipeline_node import PipelineNode

        cpus = _process_cpus()
        try:
            return PipelineNode(
                NODE_NAME,
                context=self.node.context,
                parameter_overrides=parameters,
                cli_args=arguments,
                use_global_arguments=False,
                bus=bus,
            )
        except Exception as e:
            _restore_cpus(cpus)
            if isinstance(e, LeappError):
                problem = str(e)
            elif isinstance(e, ParameterException):
                problem = f"{one_line(e)}; check the parameters of the request"
            else:
                self.node.get_logger().debug(traceback.format_exc())
                problem = f"{type(e).__name__}: {one_line(e)}"
            raise CompositionError(f"cannot load {full_name}: {problem}") from e

    # --- unload -------------------------------------------------------------------------

    def unload(self, unique_id: int) -> str:
        """Stop, remove and destroy the node with ``unique_id``; its full name.

        Raises:
            CompositionError: no node in this container has that id.
        """
        component = self._components.pop(unique_id, None)
        if component is None:
            loaded = ", ".join(f"{i} {name}" for i, name in self.listing()) or "none"
            raise CompositionError(
                f"no node with unique id {unique_id} in this container (its nodes: {loaded}); "
                "ros2 component list shows the ids"
            )
        full_name = component.get_fully_qualified_name()
        try:
            stop = getattr(component, "stop", None)
            if stop is not None:
                stop()
        finally:
            self.node.executor.remove_node(component)
            if component in self._nodes:
                self._nodes.remove(component)
            component.destroy_node()
        return full_name

    # --- service callbacks (an exception escaping one would end the container) ----------

    def _on_load(self, request: Any, response: Any) -> Any:
        try:
            response.unique_id, response.full_node_name = self.load(request)
            response.success = True
        except Exception as e:
            response.success = False
            response.error_message = self._failure("load_node", e)
        return response

    def _on_unload(self, request: Any, response: Any) -> Any:
        try:
            full_name = self.unload(request.unique_id)
            response.success = True
            self.node.get_logger().info(f"unloaded {request.unique_id} {full_name}")
        except Exception as e:
            response.success = False
            response.error_message = self._failure("unload_node", e)
        return response

    def _on_list(self, request: Any, response: Any) -> Any:
        listed = self.listing()
        response.unique_ids = [i for i, _ in listed]
        response.full_node_names = [name for _, name in listed]
        return response

    def _failure(self, service: str, error: Exception) -> str:
        if isinstance(error, CompositionError):
            message = str(error)
        else:  # a bug of ours: say so, keep serving
            self.node.get_logger().debug(traceback.format_exc())
            message = f"unexpected {type(error).__name__}: {one_line(error)} (a leapp_ros bug)"
        self.node.get_logger().error(f"{service}: {message}")
        return message


def _affinity_of(node: Any) -> tuple[int, ...] | None:
    """The CPUs a pipeline node asks for (cpu_affinity: it pins them when it configures)."""
    settings = getattr(node, "settings", None)
    cpus = settings.get("cpu_affinity") if isinstance(settings, dict) else None
    return tuple(sorted(cpus)) if cpus else None


def _process_cpus() -> set[int] | None:
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None


def _restore_cpus(cpus: set[int] | None) -> None:
    """Pin the process back to ``cpus`` if a failed load changed its CPUs."""
    if cpus is None or _process_cpus() == cpus:
        return
    from leapp_ros.plan.cpu_settings import pin_process

    pin_process(cpus)
