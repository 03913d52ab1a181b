"""The first values of a node's feedback and state inputs, from the export's
``pipeline.initial_values`` safetensors file (:func:`initial_values`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from leapp_ros.plan.pipeline import NodePlan
from leapp_ros.plan.settings import StartupError

__all__ = ["initial_values"]


def initial_values(path: Path | None, plan: NodePlan) -> dict[int, Any]:
    """First values of the feedback and state inputs, by input index, as NumPy arrays (torch
    tensors for bfloat16, which NumPy lacks)."""
    needed = {i: port for i, port in enumerate(plan.inputs) if port.kind in ("feedback", "state")}
    if not needed:
        return {}
    ports = [port.port for port in needed.values()]
    where = f"node {plan.name!r}: feedback/state input(s) {ports} need initial values, but"
    if path is None:
        raise StartupError(
            f"{where} the spec names no pipeline.initial_values file; add a safetensors file "
            "with keys '<node>/<port>' and name it there"
        )
    if not path.is_file():
        raise StartupError(f"{where} the initial values file {str(path)!r} does not exist")
    tensors = _load_safetensors(path, any(port.dtype == "bfloat16" for port in needed.values()))
    values = {}
    for index, port in needed.items():
        key = f"{plan.name}/{port.port}"
        value = tensors.get(key)
        if value is None:
            raise StartupError(f"{where} {str(path)!r} has no tensor {key!r}")
        dtype = str(value.dtype).removeprefix("torch.")
        if (dtype, tuple(value.shape)) != (port.dtype, tuple(port.shape)):
            raise StartupError(
                f"node {plan.name!r}: initial value {key!r} in {str(path)!r} is "
                f"{dtype} {list(value.shape)}, the port is {port.dtype} {list(port.shape)}"
            )
        values[index] = value
    return values


def _load_safetensors(path: Path, bfloat16: bool) -> Mapping[str, Any]:
    """The tensors of a safetensors file: NumPy arrays, or torch tensors where NumPy lacks a
    dtype (bfloat16) and torch is needed anyway."""
    if bfloat16:
        from safetensors.torch import load_file as load_tensors

        return load_tensors(str(path))
    from safetensors.numpy import load_file as load_arrays

    try:
        return {key: np.ascontiguousarray(value) for key, value in load_arrays(str(path)).items()}
    except (TypeError, ValueError):  # a bfloat16 tensor of another node
        from safetensors.torch import load_file as load_tensors

        return load_tensors(str(path))
