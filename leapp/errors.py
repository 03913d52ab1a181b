"""The exceptions raised by leapp.

Every message says what happened, where (the node, tensor, file or the user's source line) and
what to do next. Catch :class:`LeappError` to handle all of them.
"""

from __future__ import annotations

__all__ = [
    "DependencyError",
    "ExportError",
    "GraphError",
    "LeappError",
    "PipelineError",
    "PortNameError",
    "PortTypeError",
    "SemanticsError",
    "SessionError",
    "SpecError",
    "TraceError",
    "ValidationError",
]


class LeappError(Exception):
    """Base class of every error leapp raises on purpose."""


class SessionError(LeappError):
    """The tracing session was used out of order (compile before stop, node left open, ...)."""


class TraceError(LeappError):
    """User code did something that cannot be recorded faithfully into a graph."""


class GraphError(LeappError):
    """The recorded pipeline is inconsistent (duplicate names, mismatched edges, ...)."""


class PortTypeError(TraceError, TypeError):
    """A port was given a value of the wrong type (a bare tensor where a dict of named tensors
    belongs, TensorSemantics mixed with raw tensors, a nested state, ...).

    Also a ``TypeError``, as NVIDIA LEAPP raises for the same mistakes.
    """


class SemanticsError(TraceError, ValueError):
    """A ``TensorSemantics`` or ``TemporalAxis`` holds a value that cannot describe its tensor
    (element names that do not fit its shape, a non-positive period, ...).

    Also a ``ValueError``, as NVIDIA LEAPP raises for the same mistakes.
    """


class PortNameError(GraphError, ValueError):
    """Two ports of one node got the same name (two TensorSemantics with one name, or a
    flattened container entry that collides with another port).

    Also a ``ValueError``, as NVIDIA LEAPP raises for duplicate TensorSemantics names.
    """


class DependencyError(LeappError, ImportError):
    """An optional package that the requested feature needs is not installed (Pillow for the
    pipeline picture, ...); the message says what to install.

    Also an ``ImportError``, as a missing import raises.
    """


class ExportError(LeappError):
    """A node could not be written as the requested artifact."""


class SpecError(LeappError):
    """A spec file or export folder is missing, malformed, or fails its checksums.

    ``problems`` lists every finding as ``"<yaml path>: <what is wrong>"``.
    """

    def __init__(self, message: str, problems: tuple[str, ...] = ()):
        super().__init__(message)
        self.problems = tuple(problems)


class ValidationError(LeappError):
    """An exported artifact does not reproduce the values captured while tracing."""


class PipelineError(LeappError):
    """The reference runtime was given inputs it cannot run (missing, wrong shape or dtype)."""
