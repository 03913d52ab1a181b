"""The ROS 2 nodes that run a pipeline: one per pipeline node, or one for the whole pipeline.

- :mod:`~leapp_ros.node.pipeline_node`: ``leapp_node`` (:class:`PipelineNode`), one pipeline
  node over its topics;
- :mod:`~leapp_ros.node.fused_node`: ``leapp_fused``, every pipeline node in one ROS node;
- :mod:`~leapp_ros.node.fused_stages`: the pipeline nodes inside it, wired in tick order;
- :mod:`~leapp_ros.node.managed_node`: the lifecycle, e-stop, watchdog and safe action both
  share;
- :mod:`~leapp_ros.node.data_path`: the data path both share (decode, drop, count, fire);
- :mod:`~leapp_ros.node.input_sets`: a node's triggers, newest-value inputs and ticks;
- :mod:`~leapp_ros.node.output_topics`: one node's output publishers;
- :mod:`~leapp_ros.node.status_report`: the ``_leapp/status`` records and ``/diagnostics``;
- :mod:`~leapp_ros.node.estop_subscription`: the ``estop_topic`` subscriptions;
- :mod:`~leapp_ros.node.model`: loading and warming up a node's artifact;
- :mod:`~leapp_ros.node.partner_take`: one wake per input set;
- :mod:`~leapp_ros.node.intra_process`: handing values between nodes of one process;
- :mod:`~leapp_ros.node.cpu_placement`: a node's CPU pinning and CPU latency request;
- :mod:`~leapp_ros.node.executor`: the executor and the spin loop;
- :mod:`~leapp_ros.node.rate_limited_log`: at most one warning per kind and period.

Imports :mod:`leapp_ros.plan` and :mod:`leapp_ros.messages`, never the process layer.
"""
