"""The ``--deployment`` option of the ``leapp-ros`` commands that start a graph (``run``,
``verify``, ``sim``), with its older forms ``--composed`` and ``--fused``: each sets
``args.deployment`` to a :class:`~leapp_ros.run.deployment.Deployment`."""

from __future__ import annotations

import argparse

from leapp.errors import LeappError
from leapp_ros.run.deployment import Deployment

__all__ = ["add_deployment_option"]


def add_deployment_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--deployment {processes,composed,fused}`` (default processes) to ``parser``, and
    ``--composed`` / ``--fused`` as short forms of it; at most one of them."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--deployment",
        type=_deployment,
        metavar="{" + ",".join(d.value for d in Deployment) + "}",
        default=Deployment.PROCESSES,
        help="processes: one process per node (default); composed: every node in one process "
        "(one executor); fused: the whole pipeline in one node, tick by tick (fewest hops; "
        "intermediate topics still published unless publish_intermediate is false in the "
        "parameters file)",
    )
    group.add_argument(
        "--composed",
        dest="deployment",
        action="store_const",
        const=Deployment.COMPOSED,
        help="the same as --deployment composed",
    )
    group.add_argument(
        "--fused",
        dest="deployment",
        action="store_const",
        const=Deployment.FUSED,
        help="the same as --deployment fused",
    )


def _deployment(text: str) -> Deployment:
    try:
        return Deployment.parse(text)
    except LeappError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
