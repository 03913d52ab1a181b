"""The ROS plan of a spec: which nodes, topics, messages, QoS and triggers a graph has.

Pure Python (no rclpy), so a plan can be made, inspected and tested anywhere:

- :mod:`~leapp_ros.plan.bindings`: which standard robot message carries a port, from its kind
  (with :mod:`~leapp_ros.plan.body_fields`: the fields of a body message;
  :mod:`~leapp_ros.plan.sensor_layout`: how an image or a cloud fills a port;
  :mod:`~leapp_ros.plan.port_override`: what ``ports.<port>.*`` says);
- :mod:`~leapp_ros.plan.graph_plan`: the plan's values: nodes, ports, topics, QoS, firing;
- :mod:`~leapp_ros.plan.pipeline`: the plan of a spec (:func:`~leapp_ros.plan.pipeline.make_plan`);
- :mod:`~leapp_ros.plan.selection`: which nodes one host runs, and its container's name;
- :mod:`~leapp_ros.plan.settings`: a node's ROS parameters and what they change in its plan;
- :mod:`~leapp_ros.plan.cpu_settings`: CPU pinning and idle-wakeup settings of a process.

Imports only :mod:`leapp` and :mod:`leapp_ros.ament`.
"""
