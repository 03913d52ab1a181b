"""Whether this install can make and serve composition_interfaces requests (the load_node,
unload_node and list_nodes services of a component container, which launch_ros's composed
launch files and ``ros2 component`` call).

With ROS 2 from pip, composition_interfaces comes from ../shared/ros2-launch as one build for
one distribution's libraries (Kilted's). Under another distribution's wheels (Jazzy's, CI's
second lane) it imports, but the first request serialized kills the process with "symbol
lookup error" (its calls into Fast CDR are not in Jazzy's Fast CDR). So the check serializes a
request in a child process, once per test run, and the tests that send requests skip where it
fails, saying why.
"""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest

__all__ = ["composition_skip_reason", "skip_unless_composition_works"]

NOT_INSTALLED = (
    "composition_interfaces is not installed (ROS 2 from pip has none); install it with "
    "../shared/ros2-launch/install.sh .venv (scripts/setup.sh does) or use a full ROS 2 install"
)
_SERIALIZE = (
    "from composition_interfaces.srv import LoadNode\n"
    "from rclpy.serialization import serialize_message\n"
    "serialize_message(LoadNode.Request())\n"
)


@functools.cache
def composition_skip_reason() -> str | None:
    """None where composition_interfaces serializes a request here; else why not."""
    try:
        import composition_interfaces.srv  # noqa: F401
    except ImportError:
        return NOT_INSTALLED
    done = subprocess.run(
        [sys.executable, "-c", _SERIALIZE],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode == 0:
        return None
    last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    return (
        "composition_interfaces is installed but cannot serialize a request under these ROS 2 "
        f"libraries (a build for another distribution's): {': '.join(last.split(': ')[-2:])}"
    )


def skip_unless_composition_works() -> None:
    """Skip the calling test where :func:`composition_skip_reason` gives a reason."""
    reason = composition_skip_reason()
    if reason is not None:
        pytest.skip(reason)
