"""The pipeline spec: typed view of ``<name>.yaml`` (LEAPP config 1.3 compatible).

An export folder holds one YAML file with three top-level sections: ``models`` (one entry per
node: its input and output ports and the artifact that computes it), ``pipeline`` (how the
nodes connect) and ``system information``. :func:`load` reads such a file into frozen
dataclasses, :func:`dump` writes one back in the exact layout NVIDIA's leapp 0.7.2 uses, and
:func:`file_checksums` / :func:`system_information` are the helpers the exporter needs.

Keys this package does not know are kept in the ``extra`` mappings and written back unchanged,
so files written by other LEAPP versions survive a load/dump round trip.

Example::

    from leapp import spec

    s = spec.load("exports/torch_pipeline")  # the folder, or the YAML file itself
    for model in s.models:
        print(model.name, [p.name for p in model.inputs], model.parameters.backend)

Modules: :mod:`~leapp.spec.schema` (the dataclasses), :mod:`~leapp.spec.yaml_file` (load,
dump), :mod:`~leapp.spec.document` (the YAML), :mod:`~leapp.spec.parser` and
:mod:`~leapp.spec.wiring` (the checks), :mod:`~leapp.spec.order` (the order the nodes run in),
:mod:`~leapp.spec.containment` (every file a spec names lies inside its folder),
:mod:`~leapp.spec.checksums`, :mod:`~leapp.spec.system`, :mod:`~leapp.spec.examples` (the
``<name>_examples.safetensors`` file next to the spec), and :mod:`~leapp.spec.picture` (the
pipeline picture, ``<name>.png`` and ``<name>.svg``: its ``picture_*`` modules; the PNG needs
Pillow, imported only there).
"""

from leapp.spec.checksums import file_checksums
from leapp.spec.schema import (
    BACKENDS,
    DTYPES,
    LEAPP_CONFIG_VERSION,
    ModelParameters,
    ModelSpec,
    PipelineSpec,
    Spec,
    TensorSpec,
)
from leapp.spec.system import system_information
from leapp.spec.yaml_file import dump, load

__all__ = [
    "BACKENDS",
    "DTYPES",
    "LEAPP_CONFIG_VERSION",
    "ModelParameters",
    "ModelSpec",
    "PipelineSpec",
    "Spec",
    "TensorSpec",
    "dump",
    "file_checksums",
    "load",
    "system_information",
]
