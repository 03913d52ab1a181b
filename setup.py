"""Build script of the ROS 2 package ``leapp_ros`` (ament_python), which also installs ``leapp``.

On a ROS 2 install ``colcon build`` runs this file; ``setup.cfg`` then puts the executables in
``<prefix>/lib/leapp_ros``. With pip (``scripts/setup.sh``) the same data files land under the
virtual environment's prefix, so ``ament_index_python`` and ``ros2 run`` find the package there.
"""

from __future__ import annotations

from glob import glob
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE_NAME = "leapp_ros"
HERE = Path(__file__).resolve().parent


def read_requirements(name: str) -> list[str]:
    """Return the requirement lines of ``name`` (next to this file), without comments."""
    lines = (HERE / name).read_text(encoding="utf-8").splitlines()
    return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]


setup(
    name=PACKAGE_NAME,
    version="0.1.0",
    description=(
        "Trace an annotated PyTorch policy pipeline node by node and run it as ROS 2 nodes"
    ),
    license="Apache-2.0",
    maintainer="leapp_ros maintainers",
    maintainer_email="leapp-ros@example.com",
    python_requires=">=3.10",
    classifiers=[
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
    ],
    packages=find_packages(include=["leapp", "leapp.*", "leapp_ros", "leapp_ros.*"]),
    # rclpy, std_msgs and launch come from the ROS 2 distribution (or from the ros-* wheels in
    # requirements-ros.txt), never from here: the PyPI package named "launch" is unrelated.
    install_requires=read_requirements("requirements.txt"),
    # pytest is the test runner: without it colcon test falls back to unittest and runs nothing.
    # warp: Warp kernels in nodes (pip install leapp_ros[warp]); everything else works without.
    # picture: the pipeline picture (compile_graph(visualize=True), leapp-ros inspect --picture).
    # sim: MuJoCo, for leapp-ros sim and closed-loop tests of a graph against a simulated robot.
    extras_require={
        "test": ["pytest>=8,<9"],
        "warp": ["warp-lang>=1.19"],
        "picture": ["pillow>=10.1"],
        "sim": ["mujoco>=3.2"],
    },
    zip_safe=True,
    data_files=[
        (
            "share/ament_index/resource_index/packages",
            [f"resource/{PACKAGE_NAME}"],
        ),
        (f"share/{PACKAGE_NAME}", ["package.xml"]),
        (f"share/{PACKAGE_NAME}/launch", sorted(glob("launch/*.py"))),
        (f"share/{PACKAGE_NAME}/config", sorted(glob("config/*.yaml"))),
    ],
    entry_points={
        "console_scripts": [
            # Add each one when its module exists (scripts/setup.sh links them into
            # <prefix>/lib/leapp_ros for `ros2 run` and launch_ros):
            "leapp-ros = leapp_ros.tools.cli:main",
            "leapp_node = leapp_ros.node.pipeline_node:main",
            "leapp_container = leapp_ros.run.container:main",
            "leapp_fused = leapp_ros.node.fused_node:main",
            "leapp_stand_in = leapp_ros.run.stand_in:main",
        ],
    },
)
