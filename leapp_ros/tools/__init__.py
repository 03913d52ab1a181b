"""What a user runs on an export: the ``leapp-ros`` command and what its subcommands do.

- :mod:`~leapp_ros.tools.cli`: ``leapp-ros run | generate | verify | inspect``;
- :mod:`~leapp_ros.tools.generate` and :mod:`~leapp_ros.tools.templates`: a deployable ament
  package from an export;
- :mod:`~leapp_ros.tools.verification` and :mod:`~leapp_ros.tools.reference`: the live graph
  compared with the export;
- :mod:`~leapp_ros.tools.inspection`: a plan as tables.

The top of ``leapp_ros``: may import every package below it, including
:mod:`leapp_ros.testing`.
"""
