"""What the annotations accept as the tensors of a node, turned into flat named ports.

``annotate.input_tensors`` / ``output_tensors`` / ``state_tensors`` / ``update_state`` take:

- a dict ``{name: value}``, where a value is a tensor (or NumPy array) or, except for states,
  any nesting of dicts, lists and tuples of them: one port per tensor, named by its path
  (:func:`leapp.trace.ports.flatten`: ``{"group": {"x": a}}`` is the port ``group_x``);
- a :class:`~leapp.semantics.TensorSemantics`, or a list of them: ``name`` is the port,
  ``ref`` its value, and the rest the port's semantics, written into the spec.

:func:`read_payload` checks the payload and returns a :class:`Payload`: the flat ports, their
semantics, and how to hand values back in the structure the user passed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from leapp.errors import PortNameError, PortTypeError, TraceError
from leapp.semantics import TensorSemantics, split_semantics
from leapp.trace.location import user_location
from leapp.trace.ports import Leaf, flatten, is_container, rebuild

__all__ = ["Payload", "read_payload"]


@dataclass(frozen=True)
class Payload:
    """One annotation's tensors: the top-level entries as given and the ports they make."""

    entries: Mapping[str, Any]  # name -> value, as the user passed them (refs for semantics)
    leaves: Mapping[str, tuple[str, Leaf]]  # port -> (entry name, leaf inside that entry)
    semantics: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # port -> fields

    @property
    def ports(self) -> dict[str, Any]:
        """``{port: tensor}`` in order."""
        return {port: leaf.value for port, (_, leaf) in self.leaves.items()}

    def given(self) -> Any:
        """The entries' values as given: one value for one entry, else a tuple in order."""
        return _one_or_tuple(list(self.entries.values()))

    def restructured(self, values: Sequence[Any]) -> Any:
        """``values`` (one per port, in order) in the structure the user passed: one entry's
        value (a tensor, or its rebuilt dict/list/tuple), else a tuple of them."""
        replacements: dict[str, dict[tuple[Any, ...], Any]] = {name: {} for name in self.entries}
        for (name, leaf), value in zip(self.leaves.values(), values, strict=True):
            replacements[name][leaf.path] = value
        rebuilt = [rebuild(value, replacements[name]) for name, value in self.entries.items()]
        return _one_or_tuple(rebuilt)


def read_payload(api: str, node: Any, payload: Any, *, nested: bool = True) -> Payload:
    """Check what ``annotate.<api>(node, payload)`` was given and name its ports.

    ``nested=False`` (states) refuses containers. Raises :class:`PortTypeError` for a payload
    of the wrong type and :class:`PortNameError` when two entries flatten to one port name.
    """
    if not isinstance(node, str):
        raise TraceError(f"annotate.{api}: the node name must be a str, got {node!r}.")
    where = f"annotate.{api}({node!r}, ...) at {user_location()}"
    semantics: dict[str, Any] = {}
    if isinstance(payload, TensorSemantics) or (
        isinstance(payload, (list, tuple))
        and any(isinstance(item, TensorSemantics) for item in payload)
    ):
        payload, semantics = split_semantics(payload, where)
    if isinstance(payload, (torch.Tensor, np.ndarray)):
        raise PortTypeError(
            f"{where}: got a bare {type(payload).__name__}; name it: pass a dict "
            "{'name': tensor} or TensorSemantics(name='name', ref=tensor)."
        )
    if not isinstance(payload, Mapping) or not payload:
        raise PortTypeError(
            f"{where}: pass a non-empty dict {{name: tensor}}, a TensorSemantics or a list of "
            f"TensorSemantics, got {type(payload).__name__}."
        )
    if not nested:
        _refuse_nesting(api, node, where, payload)
    leaves: dict[str, tuple[str, Leaf]] = {}
    for name, value in payload.items():
        if not isinstance(name, str):
            raise PortTypeError(f"{where}: port names are strings, got the key {name!r}.")
        for leaf in flatten(value, name):
            if leaf.port in leaves:
                first, other = leaves[leaf.port]
                raise PortNameError(
                    f"{where}: {other.where(first)} and {leaf.where(name)} both become the "
                    f"port {leaf.port!r} of node {node!r} (containers are flattened to "
                    "<name>_<key or index>); rename one of them."
                )
            leaves[leaf.port] = (name, leaf)
    return Payload(dict(payload), leaves, semantics)


def _refuse_nesting(api: str, node: str, where: str, payload: Mapping[str, Any]) -> None:
    for name, value in payload.items():
        if is_container(value):
            raise PortTypeError(
                f"{where}: {api}() for node {node!r} does not support nested state "
                f"structures: state {name!r} is a {type(value).__name__}. List each state as "
                f"its own named tensor ({{'{name}_0': ..., '{name}_1': ...}}), or pass the "
                "container through annotate.input_tensors and feed the outputs back."
            )


def _one_or_tuple(values: list[Any]) -> Any:
    return values[0] if len(values) == 1 else tuple(values)
