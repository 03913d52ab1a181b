"""Tensors to ROS messages and back, for the ports of a plan.

- :mod:`~leapp_ros.messages.multiarray`: the ``std_msgs`` MultiArray codec of each dtype;
- :mod:`~leapp_ros.messages.robot_codecs`: JointState, Imu, Twist, PoseStamped, Odometry in,
  controller commands out; :mod:`~leapp_ros.messages.image_codec` (Image) and
  :mod:`~leapp_ros.messages.cloud_codec` (PointCloud2 heights) for it;
- :mod:`~leapp_ros.messages.topic_io`: one node's readers and writers, one per topic.

Imports :mod:`leapp_ros.plan` (the ports to encode), never the nodes.
"""
