"""ROS 2 side of leapp: run an exported pipeline as a graph of ROS 2 nodes.

Importing this package makes a pip-installed copy visible to ``ament_index_python`` (see
:mod:`leapp_ros.ament`).
"""

from leapp_ros.ament import register_prefix

register_prefix()
