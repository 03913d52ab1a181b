"""The text of every file of a generated ROS 2 package, one module per kind of file.

:func:`render_package` returns them all as ``{path relative to the package: text}``; the
export files (spec, models, examples) are copied by :mod:`leapp_ros.tools.generate`, not rendered.
Everything here is a pure function of :class:`PackageInfo`: the same input always gives the
same bytes (no timestamps, no absolute paths, iteration in pipeline order or sorted).
"""

from __future__ import annotations

from leapp_ros.run.deployment import Deployment
from leapp_ros.tools.templates.build_files import (
    init_py,
    main_py,
    package_xml,
    resource_marker,
    setup_cfg,
    setup_py,
)
from leapp_ros.tools.templates.launch_files import launch_py
from leapp_ros.tools.templates.package_info import PackageInfo
from leapp_ros.tools.templates.parameters import parameters_yaml
from leapp_ros.tools.templates.readme import readme_md
from leapp_ros.tools.templates.topic_test import topic_test_py

__all__ = ["PackageInfo", "render_package"]


def render_package(info: PackageInfo) -> dict[str, str]:
    """Every generated text file of the package, by its path inside the package."""
    return {
        "package.xml": package_xml(info),
        "setup.py": setup_py(info),
        "setup.cfg": setup_cfg(info),
        f"resource/{info.name}": resource_marker(info),
        f"{info.name}/__init__.py": init_py(info),
        f"{info.name}/__main__.py": main_py(info),
        f"config/{info.params_file}": parameters_yaml(info),
        **{f"launch/{info.launch_file_of(d)}": launch_py(info, d) for d in Deployment},
        f"test/{info.test_file}": topic_test_py(info),
        "README.md": readme_md(info),
    }
