"""A simulated robot in the loop of a live graph, for ``leapp-ros sim``: the map between a
MuJoCo model and the graph (``sim_map``), the frame an Imu or an Odometry reads
(``imu_frame``), camera frames rendered offscreen (``camera_frames``), terrain heights by ray
casts (``height_scan``), the model as a robot (``mujoco_robot``: sensor messages, commands,
falls) and the lockstep loops through the graph and through ``leapp.Pipeline``
(``sim_loop``). Needs the ``sim`` extra (MuJoCo); imports it only when a robot is built."""
