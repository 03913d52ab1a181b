"""The recorder: user code runs eagerly while every torch and NumPy call is recorded.

- :mod:`leapp.trace.recording`: :class:`~leapp.trace.recording.Recording`, one pipeline's
  recording (node runs in order, their ports, which output fed which input);
- :mod:`leapp.trace.recorder`: :class:`~leapp.trace.recorder.NodeTrace`, one node run's
  ``torch.fx`` graph, and :func:`~leapp.trace.recorder.dispatch`, which records torch calls;
- :mod:`leapp.trace.tensor`: :class:`~leapp.trace.tensor.TracedTensor`, the traced torch value;
- :mod:`leapp.trace.operation`: what a torch call is, for the recorder;
- :mod:`leapp.trace.array`: :class:`~leapp.trace.array.TracedArray`, the traced NumPy value;
- :mod:`leapp.trace.numpy_recorder`: NumPy calls recorded as their torch equivalents (from the
  table in :mod:`leapp.numpy`), :mod:`leapp.trace.indexing` for indexing and item assignment;
- :mod:`leapp.trace.crossing`: ``torch.from_numpy`` / ``np.asarray`` keep the trace;
- :mod:`leapp.trace.script_calls`: TorchScript modules and functions called on traced values,
  recorded as the ATen operations they run (tensors they write become states), replayed by
  :mod:`leapp.trace.script_replay`;
- :mod:`leapp.trace.sources`: where each declared input comes from (an edge, outside, the node
  itself) and what it may not be; :mod:`leapp.trace.handover`: published outputs between nodes
  (identity-like calls keep the edge) and ``annotate.mirror_leapp_tags``;
- :mod:`leapp.trace.states`: the rules for ``state_tensors`` / ``update_state``;
  :mod:`leapp.trace.buffers`: ``annotate.register_buffer`` and ``annotate.module``'s buffers;
- :mod:`leapp.trace.payload`: what the annotations accept (dicts, nested containers,
  ``TensorSemantics``) as flat named ports; :mod:`leapp.trace.ports`: the port names (nested
  containers flattened by path, ``annotate.method``'s parameters and returns);
- :mod:`leapp.trace.location`: the user's file and line, for error messages.

Nothing here imports the API layer (:mod:`leapp.session`, :mod:`leapp.annotate`, ``leapp``).
"""
