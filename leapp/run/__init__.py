"""Running an export in-process: one artifact, the whole pipeline, and the proof it matches.

- :mod:`leapp.run.model`: :class:`~leapp.run.model.Model`, one node's loaded artifact
  (TorchScript, ONNX Runtime or pt2), checked against the spec;
- :mod:`leapp.run.pipeline`: :class:`~leapp.run.pipeline.Pipeline`, the reference runtime
  (``leapp.Pipeline``), every node per step in producer-before-consumer order;
- :mod:`leapp.run.validation`: every artifact re-run on the values captured while tracing.
"""
