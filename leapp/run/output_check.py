"""The check of a loaded artifact's outputs against its spec: their count, dtypes and shapes.

One check for both runtimes: :class:`leapp.run.model.Model` hands it torch tensors,
:class:`leapp.run.onnx_runner.OnnxModel` NumPy arrays; each gives the dtypes its own runtime
expects (:meth:`output_dtypes`), so this module imports neither torch nor NumPy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from leapp.errors import PipelineError
from leapp.spec import TensorSpec

__all__ = ["Artifact", "check_outputs"]


class Artifact(Protocol):
    """A loaded node artifact, as the check sees it."""

    name: str
    path: Any
    outputs: Sequence[TensorSpec]

    def output_dtypes(self) -> list[Any]:
        """The dtype of each output port, as this runtime's results carry them."""
        ...


def check_outputs(artifact: Artifact, results: Sequence[Any], on: str) -> None:
    """Raise :class:`PipelineError` unless ``results`` (of a run on ``on``, such as ``"zeros of
    its input shapes"``) have the count, dtypes and shapes of the spec's outputs."""
    dtypes = artifact.output_dtypes()
    ports = artifact.outputs
    name, path = artifact.name, str(artifact.path)
    if len(results) != len(ports):
        raise PipelineError(
            f"node {name!r}: the artifact {path!r} returns {len(results)} outputs, the spec "
            f"lists {len(ports)} {[p.name for p in ports]}; re-export the node"
        )
    for port, dtype, value in zip(ports, dtypes, results, strict=True):
        if value.dtype != dtype:
            raise PipelineError(
                f"node {name!r}: output {port.name!r} of {path!r} is {_name(value.dtype)}, the "
                f"spec says {_name(dtype)}; re-export the node"
            )
        shape = tuple(int(size) for size in port.shape)
        if tuple(value.shape) != shape:
            found = f"{_name(value.dtype)} {list(value.shape)}"
            cause = (
                "either the artifact is not the one this spec describes (re-export the node), "
                "or its output shape depends on the input values (nonzero, masked_select, "
                "unique, ...), which a spec with fixed shapes cannot describe: compute a "
                "fixed-size result instead (a mask, torch.where, a padded tensor)"
                if on.startswith("zeros")
                else "re-export the node"
            )
            raise PipelineError(
                f"node {name!r}: output {port.name!r} of {path!r} is {found} on {on}, the spec "
                f"says {_name(dtype)} {list(shape)}; {cause}"
            )


def _name(dtype: Any) -> str:
    """``float32`` for ``torch.float32`` and ``np.dtype("float32")`` alike."""
    return str(dtype).removeprefix("torch.")
