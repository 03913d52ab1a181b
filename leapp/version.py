"""The version of leapp, written into every spec's ``system information``."""

__version__ = "0.1.0"
