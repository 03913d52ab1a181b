"""Processes of a graph: what to start, starting and supervising them, component containers.

- :mod:`~leapp_ros.run.deployment`: how a graph is started (:class:`Deployment`,
  :class:`GraphOptions`);
- :mod:`~leapp_ros.run.processes`: the processes of a plan with those options, the one
  description the runner and every launch file start;
- :mod:`~leapp_ros.run.runner` and :mod:`~leapp_ros.run.supervised_process`: start them
  without ``ros2 launch``, restart them, relay their output
  (:mod:`~leapp_ros.run.output_relay`), know when they are ready from the nodes' status
  records (:mod:`~leapp_ros.run.status_watch`);
- :mod:`~leapp_ros.run.launch_description`: the same processes as launch_ros actions, for
  ``pipeline.launch.py`` and the launch files of generated packages (needs launch);
- :mod:`~leapp_ros.run.container` (``leapp_container``),
  :mod:`~leapp_ros.run.composition` and :mod:`~leapp_ros.run.load_request`: nodes as
  components, loaded through ``composition_interfaces`` services;
- :mod:`~leapp_ros.run.stand_in` (``leapp_stand_in``), :mod:`~leapp_ros.run.safe_outputs`,
  :mod:`~leapp_ros.run.coverage` and :mod:`~leapp_ros.run.process_watch`: the safe action of
  a node whose process died, published in its place until it is back and active.

Imports the nodes, the messages and the plan, never the tools.
"""
