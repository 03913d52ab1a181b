"""Recorded data for a graph: rosbag2 folders read and written (``bag_file``), a bag as ticks
of a pipeline's inputs and outputs (``bag_ticks``), the recorder behind ``leapp-ros record``
(``recorder``) and the plot of deviations over time (``deviation_plot``). Uses ``rosbags``
(pure Python) for the files; rclpy only while recording."""
