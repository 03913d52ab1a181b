"""The robot's own launch file: the quadruped's graph on the robot's topics, as the robot
bring-up would include it (next to its drivers and controllers)::

    ros2 launch examples/quadruped/robot.launch.py pipeline:=exports/quadruped
"""

from pathlib import Path

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.substitutions import FindPackageShare

ROBOT_TOPICS = {
    "observe/joint_states": "/joint_states",
    "observe/imu": "/imu/data",
    "observe/cmd_vel": "/cmd_vel",
    "policy/joint_targets": "/joint_group_position_controller/commands",
}


def generate_launch_description():
    pipeline = PathJoinSubstitution(
        [FindPackageShare("leapp_ros"), "launch", "pipeline.launch.py"]
    )
    remaps = " ".join(f"{graph}:={robot}" for graph, robot in ROBOT_TOPICS.items())
    return LaunchDescription([
        DeclareLaunchArgument("pipeline", description="the quadruped's export folder"),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(pipeline),
            launch_arguments={
                "pipeline": LaunchConfiguration("pipeline"),
                "params_file": str(Path(__file__).with_name("robot_params.yaml")),
                "remaps": remaps,
            }.items(),
        ),
    ])  # fmt: skip
