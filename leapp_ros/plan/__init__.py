"""The ROS plan of a spec: which nodes, topics, messages, QoS and triggers a graph has.

Pure Python (no rclpy), so a plan can be made, inspected and tested anywhere:

- :mod:`~leapp_ros.plan.bindings`: which standard robot message carries a port, from its kind;
- :mod:`~leapp_ros.plan.graph_plan`: the plan's values: nodes, ports, topics, QoS, firing;
- :mod:`~leapp_ros.plan.pipeline`: the plan of a spec (:func:`~leapp_ros.plan.pipeline.make_plan`);
- :mod:`~leapp_ros.plan.selection`: which nodes one host runs, and its container's name;
- :mod:`~leapp_ros.plan.settings`: a node's ROS parameters and what they change in its plan;
- :mod:`~leapp_ros.plan.cpu_settings`: CPU pinning and idle-wakeup settings of a process.

Imports only :mod:`leapp` and :mod:`leapp_ros.ament`.
"""
