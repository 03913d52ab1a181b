"""Processes of a graph: what to start, starting and supervising them, component containers.

- :mod:`~leapp_ros.run.processes`: the processes of a plan (for the runner and launch files);
- :mod:`~leapp_ros.run.runner` and :mod:`~leapp_ros.run.supervised_process`: start them
  without ``ros2 launch``, restart them, relay their output
  (:mod:`~leapp_ros.run.output_relay`);
- :mod:`~leapp_ros.run.container` (``leapp_container``) and
  :mod:`~leapp_ros.run.composition`: nodes as components, loaded through
  ``composition_interfaces`` services.

Imports the nodes, the messages and the plan, never the tools.
"""
