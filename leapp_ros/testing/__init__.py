"""Test an exported pipeline as a live ROS 2 graph, from pytest or any Python script.

The harness starts the export's graph of ROS 2 nodes isolated on this machine, talks to it
over its real topics from a private rclpy context, and stops it cleanly::

    import torch
    from leapp_ros.testing import GraphUnderTest

    def test_policy_answers_every_observation(tmp_path):
        with GraphUnderTest("exports/torch_pipeline", timeout_s=60) as graph:
            graph.expect_topics()            # names, types, publishers, subscribers
            out = graph.step({"preprocess/state": torch.randn(6),
                              "preprocess/velocity": torch.randn(3)}, timeout_s=5)
            assert out["policy/action"].shape == (6,)
            assert graph.status()["policy"]["errors"] == 0

What :class:`GraphUnderTest` does:

- **Isolation.** It reserves a ROS domain id no other test on this machine holds (lock files
  under the temporary folder) and keeps discovery on this machine
  (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``), for the nodes and for its own context.
- **Start.** It runs the graph with :mod:`leapp_ros.run.runner` (no ``ros2 launch`` needed),
  the processes ``leapp-ros run`` and ``pipeline.launch.py`` start for the same
  :class:`GraphOptions`: one process per node (default), every node in one process
  (``Deployment.COMPOSED``), or the whole pipeline in one node (``Deployment.FUSED``). It
  waits until every node published ``ready`` on ``_leapp/status`` and every hop is matched
  both ways, else raises :class:`GraphAssertionError` with the reason and the nodes' last
  output lines.
- **The deployed QoS.** The nodes run exactly as deployed: the harness changes none of their
  parameters, so their subscriptions stay best effort with depth 1 ("newest wins") and the
  watchdog, e-stop, limits and lifecycle are tested at the QoS a robot meets. The harness's
  own publishers are reliable (the nodes' publisher QoS) and its subscriptions reliable with
  deep queues; what keeps its messages from being lost or used twice is on its side
  (:mod:`leapp_ros.testing.delivery`): before the first step it waits until every hop is
  matched *both ways*, from the nodes' status records (``subscribers``: the subscriptions
  each output matched; ``publishers``: the publishers each input matched) and its own
  endpoints; it sends each message once, never again; and a step returns only once the
  nodes that fire on its inputs have published, having taken them, so the next step cannot
  overwrite them in a one-message queue. Every input is used exactly once and recurrent state
  evolves exactly as in the eager loop. A message lost nonetheless is a
  :class:`StepTimeoutError`, never a silent repeat.
- **Stepping.** :meth:`GraphUnderTest.step` publishes ``{"node/port": tensor}`` on the
  external input topics and waits for one new message on every output those inputs drive
  (every output of every node that fires), converted back to tensors. If one never comes it
  raises :class:`StepTimeoutError`, an ``AssertionError`` like ``no message on
  /pipe/policy/action within 5.0 s; received: /pipe/preprocess/obs (1)``. In a pipeline with
  feedback between nodes, a step also waits until the fed-back values have reached their
  consumers (their status counts them). Steps are meant for nodes that fire on their inputs
  (the default).
- **Events, not clocks.** :meth:`GraphUnderTest.publish` sends without waiting;
  :meth:`GraphUnderTest.wait_received` waits until every node's status counts every message
  sent so far on each of its inputs (``received_on``), after which the status is exact: a test
  that an input must *not* produce an output checks it then (same ``runs``, nothing in
  :meth:`~GraphUnderTest.received`), not after a pause. The nodes publish a status record
  soon after every change, so such waits take a fraction of a second.
- **Recorded data.** :meth:`GraphUnderTest.replay` sends a rosbag2 folder's input messages
  tick by tick, as recorded (a robot's JointState with its joints in any order), and compares
  every published tensor with ``leapp.Pipeline`` on the same inputs, or with the outputs
  recorded in the bag (``against="recorded"``): a :class:`~leapp_ros.testing.replay.ReplayReport`
  (:mod:`leapp_ros.testing.replay`). :meth:`GraphUnderTest.send` publishes prebuilt messages.
- **Inspection.** :meth:`~GraphUnderTest.expect_topics` compares the live ROS graph (rclpy
  graph API) with the plan: topic names, types, publishing and subscribing nodes, and the
  shape of the messages received; :meth:`~GraphUnderTest.status` has each node's latest
  status (runs, received, dropped, stale, errors); :meth:`~GraphUnderTest.received` every
  value an output published; :attr:`~GraphUnderTest.output` the nodes' last log lines.
- **Shutdown.** Leaving the ``with`` block stops every process (SIGINT, then SIGTERM, then
  SIGKILL), closes its context, releases the domain id, and raises
  :class:`GraphAssertionError` when a node died or did not exit with code 0 (unless the block
  is already raising). A node dying while the test waits raises at once.

In a pytest suite, start one graph per module (starting one takes seconds)::

    from leapp_ros.testing import Deployment, graph_fixture

    graph = graph_fixture(lambda request: request.getfixturevalue("export_path"),
                          deployments=list(Deployment))  # each test in each deployment

    def test_action_is_bounded(graph):
        out = graph.step({"preprocess/state": torch.zeros(6),
                          "preprocess/velocity": torch.zeros(3)})
        assert out["policy/action"].abs().max() <= 1

or write the fixture yourself::

    @pytest.fixture(scope="module")
    def graph(export_path):
        with GraphUnderTest(export_path) as graph:
            yield graph

Lower-level pieces for tests that start nodes themselves: :func:`reserve_domain_id`,
:func:`ros_env` and :class:`Probe` (a test-side node with publishers, inboxes, status watching
and bounded waits; :meth:`Probe.wait_connected` waits until its endpoints and the nodes are
matched both ways).

rclpy is imported only when a graph or probe starts, so importing this module is cheap.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from leapp_ros.plan.pipeline import PipelinePlan
from leapp_ros.run.deployment import Deployment, GraphOptions
from leapp_ros.run.processes import graph_options
from leapp_ros.testing.graph import GraphAssertionError, GraphUnderTest, StepTimeoutError
from leapp_ros.testing.probe import (
    DOMAIN_IDS,
    Probe,
    claim_domain_id,
    reserve_domain_id,
    ros_env,
)

__all__ = [
    "DOMAIN_IDS",
    "Deployment",
    "GraphAssertionError",
    "GraphOptions",
    "GraphUnderTest",
    "Probe",
    "StepTimeoutError",
    "claim_domain_id",
    "graph_fixture",
    "reserve_domain_id",
    "ros_env",
]

Export = PipelinePlan | str | os.PathLike[str]


def graph_fixture(
    export: Export | Callable[[Any], Export],
    *,
    scope: str = "module",
    options: GraphOptions | Deployment | None = None,
    deployments: Sequence[Deployment | str] | None = None,
    **settings: Any,
) -> Any:
    """A pytest fixture yielding a started :class:`GraphUnderTest`; assign it to a module or
    class attribute, whose name becomes the fixture's name.

    Args:
        export: the export (folder, YAML or plan), or a function of pytest's ``request``
            returning it, to build it from other fixtures (``request.getfixturevalue``).
        scope: the fixture's scope; the graph starts once per scope.
        options: how the graph starts (:class:`GraphOptions`, or a :class:`Deployment`).
        deployments: parametrizes the fixture, one graph per deployment (test ids their
            names: ``processes``, ``composed``, ``fused``), each with ``options`` otherwise.
        settings: further :class:`GraphUnderTest` arguments (``timeout_s``, ``output``...).

    Raises:
        PlanError: a deployment that does not exist.
    """
    import pytest

    base = graph_options(options)
    chosen = None if deployments is None else [Deployment.parse(d) for d in deployments]
    ids = None if chosen is None else [d.value for d in chosen]

    @pytest.fixture(scope=scope, params=chosen, ids=ids)
    def graph(request: Any) -> Any:
        source = export(request) if callable(export) else export
        started = base if chosen is None else replace(base, deployment=request.param)
        with GraphUnderTest(source, started, **settings) as running:
            yield running

    return graph
