"""How a pipeline node is operated: :class:`ManagedNode`, the lifecycle node that
:class:`~leapp_ros.node.pipeline_node.PipelineNode` and the fused node are.

Lifecycle (``rclpy.lifecycle``; ``ros2 lifecycle get|set /<ns>/<node>``):

- *configure* loads and verifies the spec and the model, warms it up and creates the topics;
  the node then publishes ``"state": "ready"`` on ``_leapp/status`` and logs
  ``leapp node '<name>' ready``. A failure is logged, the node stays unconfigured.
- *activate* starts commanding: the first command answers the first input set gathered
  after activation (with a stand-in, after it watches this process:
  :mod:`leapp_ros.node.stand_in_handshake`).
- *deactivate* publishes the safe action once and stops commanding.
- *cleanup* / *shutdown* destroy the topics, timers and the model's state; *shutdown* of a
  configured node also publishes ``"state": "stopping"`` (its goodbye: the stand-in,
  :mod:`leapp_ros.run.stand_in`, covers only a node that died without one).

``autostart`` (default true) configures and activates in the constructor (a configure failure
is then a :class:`StartupError`, exit code 2). Whatever the state, the node offers
``~/enable`` (``std_srvs/SetBool``: false engages the e-stop, true releases it), listens to
``estop_topic`` when set (:mod:`leapp_ros.node.estop_subscription`), and publishes
``_leapp/status`` (once configured) and ``/diagnostics``
(:mod:`leapp_ros.node.status_report`). E-stop, ``input_timeout_ms`` and the safe action follow
:class:`~leapp_ros.node.safety.CommandGate`; while either holds, the node publishes its safe
action once per period it would fire (``1 / rate_hz``, else the timeout, else 0.1 s). The safe
action halts the outputs played out at their own rates
(:mod:`leapp_ros.node.target_player`) at once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from std_srvs.srv import SetBool

from leapp.errors import LeappError
from leapp_ros.messages.topic_io import raw_path
from leapp_ros.node.command_safety import CommandSafety
from leapp_ros.node.estop_subscription import EstopSubscription
from leapp_ros.node.policy_switch import PolicySwitch
from leapp_ros.node.rate_limited_log import RateLimitedLog, one_line
from leapp_ros.node.safety import CommandGate
from leapp_ros.node.stand_in_handshake import StandInHandshake
from leapp_ros.node.status_report import StatusReport, status_record
from leapp_ros.plan.settings import StartupError, declare_parameters

__all__ = ["ManagedNode"]

STOP_ACK_TIMEOUT_S = 0.5
_SUCCESS, _FAILURE = TransitionCallbackReturn.SUCCESS, TransitionCallbackReturn.FAILURE


class ManagedNode(CommandSafety, LifecycleNode):
    """The lifecycle, e-stop, watchdog and health reporting of a pipeline node (see the
    module documentation). Subclasses call :meth:`_start` at the end of their constructor
    and provide the data path: ``_configure``, ``_data_paths``, ``_publish_safe_values``,
    ``_reset_sets``, ``_last_set_time`` and ``_status_records``."""

    # --- startup ------------------------------------------------------------------------

    def _start(self, spec: Any) -> None:
        self._warnings = RateLimitedLog(self.get_logger())
        self._spec_given = spec
        self._lifecycle = "unconfigured"
        self._configure_error: str | None = None
        self._configured_entities: list[tuple[Any, Any]] = []
        self._guard_timer: Any = None
        self._leapp_timers: list[Any] = getattr(self, "_leapp_timers", [])
        self.settings = settings = declare_parameters(self)
        self._switch = PolicySwitch(self)  # parameter load: another policy, at a tick boundary
        self._expected_active = bool(settings["autostart"])  # until an operator says otherwise
        self.pipeline_node = str(settings["pipeline_node"] or self.get_name())
        self._raw = raw_path(settings["raw_messages"], self.get_logger())  # CDR bytes on topics
        timeout = settings["input_timeout_ms"] / 1000.0 or None
        self._gate = CommandGate(timeout)
        self._report = StatusReport(
            self,
            records=self._status_records,
            health=self._health_records,
            live=lambda: self._lifecycle in ("inactive", "active"),
        )
        self.create_service(SetBool, "~/enable", self._on_enable)
        if settings["estop_topic"]:
            EstopSubscription(self, settings["estop_topic"], self._set_estop)
        self._stand_in = None  # the graph's stand-in (commands wait until it watches us)
        if settings["stand_in"]:
            self._stand_in = StandInHandshake(self, self._ready_names, self._on_stand_in)
        if settings["autostart"]:
            if self.trigger_configure() != _SUCCESS:
                raise StartupError(self._configure_error or "configure failed")
            self.trigger_activate()
        else:
            self.get_logger().info(
                f"leapp node '{self.get_name()}' unconfigured (autostart: false): waiting for "
                f"ros2 lifecycle set {self.get_fully_qualified_name()} configure"
            )

    def declare_parameter(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """As rclpy's, but a parameter declared already (by an earlier configure) is returned
        as it is: a node configures again after a cleanup."""
        if self.has_parameter(name):
            return self.get_parameter(name)
        return super().declare_parameter(name, *args, **kwargs)

    def destroy_node(self) -> None:
        """Destroy the node and its lifecycle state machine (which holds the node handle:
        without this the node would stay in the ROS graph until garbage collection)."""
        super().destroy_node()
        machine = getattr(self, "_state_machine", None)
        if machine is not None:
            machine.destroy_when_not_in_use()

    # --- lifecycle ----------------------------------------------------------------------

    def on_configure(self, state: Any) -> TransitionCallbackReturn:
        before = self._entities()
        try:
            self._configure(self._spec_given, self.settings)
            self._create_guard_topic()
        except Exception as e:
            self._configured_entities = [e for e in self._entities() if e not in before]
            self._release()
            self._configure_error = str(e) if isinstance(e, LeappError) else one_line(e)
            if not isinstance(e, LeappError):
                self._configure_error = f"node {self.pipeline_node!r}: {self._configure_error}"
            if not self.settings["autostart"]:
                self.get_logger().error(f"configure failed: {self._configure_error}")
            self._report_change()
            return _FAILURE
        self._configured_entities = [e for e in self._entities() if e not in before]
        self._configure_error = None
        self._lifecycle = "inactive"
        self._publish_status("ready")
        for name in self._ready_names():
            self.get_logger().info(f"leapp node '{name}' ready")
        self._report_change()
        return _SUCCESS

    def on_activate(self, state: Any) -> TransitionCallbackReturn:
        self._expected_active = True
        self._reset_sets()
        if self._gate.latched:
            self.get_logger().info("latch released (activate): commanding from a fresh set")
        self._gate.activate(time.monotonic())
        if self._stand_in is not None and not self._stand_in.clear():
            self._gate.hold()  # until the stand-in watches this process (_on_stand_in)
        self._begin_blends()
        self._lifecycle = "active"
        self._update_guard_timer()
        self._publish_status("ready")
        self._report_change()
        if not self.settings["autostart"]:
            self.get_logger().info("active: commanding from the next input set")
        return _SUCCESS

    def on_deactivate(self, state: Any) -> TransitionCallbackReturn:
        self._expected_active = False  # an operator's choice: a warning, not an error
        self._publish_safe_action()
        self._gate.deactivate()
        self._lifecycle = "inactive"
        self._update_guard_timer()
        self._publish_status("ready")
        self._report_change()
        self.get_logger().info("inactive: published the safe action, not commanding")
        return _SUCCESS

    def on_cleanup(self, state: Any) -> TransitionCallbackReturn:
        self._expected_active = False
        self._release()
        self._lifecycle = "unconfigured"
        self._report_change()
        return _SUCCESS

    def on_shutdown(self, state: Any) -> TransitionCallbackReturn:
        self._expected_active = False
        if self._gate.active:
            self._publish_safe_action()
        self._gate.deactivate()
        if self._lifecycle in ("inactive", "active"):  # a goodbye: the stand-in stays quiet
            self._publish_status("stopping")
        self._release()
        self._lifecycle = "finalized"
        self._report_change()
        return _SUCCESS

    def on_error(self, state: Any) -> TransitionCallbackReturn:
        self._gate.deactivate()
        self._release()
        self._lifecycle = "unconfigured"
        return _SUCCESS

    def _entities(self) -> list[tuple[Any, Any]]:
        return [
            *((e, self.destroy_subscription) for e in self.subscriptions),
            *((e, self.destroy_publisher) for e in self.publishers),
            *((e, self.destroy_timer) for e in self.timers),
        ]

    def _release(self) -> None:
        """Destroy what configure created (topics, timers) and leave the intra-process bus."""
        self._drop_guard_timer()
        for entity, destroy in self._configured_entities:
            destroy(entity)
        self._configured_entities = []
        self._leapp_timers = []
        self._guard_publisher = self._guard_links = None
        self._switch.reset()
        self._release_data_path()

    def _release_data_path(self) -> None:
        """What a subclass drops on cleanup besides the entities (overridden)."""

    # --- status and diagnostics -----------------------------------------------------------

    def _operation(self) -> dict[str, Any]:
        """The status fields of the node's operating state and firing rule (``firing``:
        ``inputs`` or ``timer``, and its ``rate_hz``; null before configure)."""
        firing = getattr(self, "firing", None)
        return {
            "lifecycle": self._lifecycle,
            "estop": self._gate.estop,
            "safe_action": self._gate.safe,
            "held": self._gate.held,  # active, waiting for the stand-in to watch this process
            **self._guard_fields(),
            "firing": None if firing is None else firing.mode,
            "rate_hz": None if firing is None else firing.rate_hz,
        }

    def _status_record(
        self, data: Any, publishers: Sequence[Any], inputs: Sequence[Any], state: str
    ) -> dict[str, Any]:
        """The record of ``data`` (a data path) with this node's operating state, CPU
        placement, its ramp-in (``blending``: per port in a blend, its progress) and its last
        out-of-domain value, and the last policy switch (:mod:`leapp_ros.node.policy_switch`)."""
        operation, cpu = self._operation(), self._cpu.status()
        record = status_record(data, publishers, inputs, state, operation, cpu)
        record["blending"] = {} if data.guard is None else data.guard.blending()
        record["last_out_of_domain"] = data.last_violation
        record["switch"] = self._switch.record()
        if data.measured:
            record["measured_on"] = data.measured_on()
        return record

    def _health_records(self) -> list[dict[str, Any]]:
        extra = {
            "expected_active": self._expected_active,
            "configure_error": self._configure_error,
            "hardware_id": self._hardware_id(),
        }
        if self._lifecycle in ("unconfigured", "finalized"):
            names = self._unconfigured_names()
            return [{"node": name, **self._operation(), **extra} for name in names]
        last = self._last_set_time()
        age = None if last is None else max(time.monotonic() - last, 0.0)
        return [
            {**record, **extra, "last_set_age_s": age} for record in self._status_records("ready")
        ]

    def _unconfigured_names(self) -> list[str]:
        """The pipeline nodes the diagnostics name before configure (or after cleanup)."""
        return [self.pipeline_node]

    def _hardware_id(self) -> str:
        spec = getattr(self, "spec", None) or self._spec_given
        if spec is not None:
            return spec.name
        return Path(str(self.settings["spec_path"])).stem

    def _report_change(self) -> None:
        self._report.report_change()

    def _publish_status(self, state: str) -> None:
        self._report.publish(state)

    def stop(self) -> None:
        """Stop firing and publish the ``stopping`` status (call before destroying the node)."""
        for timer in [*self._leapp_timers, *self._report.timers]:
            timer.cancel()
        self._drop_guard_timer()
        if self._lifecycle not in ("inactive", "active"):
            return
        if self._gate.active:  # the process ends (SIGINT, unload): last word is the safe action
            self._publish_safe_action()
            self._gate.deactivate()
        self._publish_status("stopping")
        # reliable: give subscribers (a supervisor) a moment to acknowledge the last word
        self._report.wait_acknowledged(STOP_ACK_TIMEOUT_S)
        for record in self._status_records("stopping"):
            self.get_logger().info(f"leapp node '{record['node']}' stopping: {record}")

    def _warn(self, key: str, text: str) -> None:
        """Log ``text`` unless ``key`` was logged less than a second ago."""
        self._warnings.warning(key, text)
