"""The recorder: user code runs eagerly while every torch, NumPy and Warp call is recorded.

Sub-packages, bottom to top; each imports only those below it (``test/layout/test_layout.py``):

- :mod:`leapp.trace.tensors`: torch tracing.
  :class:`~leapp.trace.tensors.tensor.TracedTensor`, the traced torch value;
  :class:`~leapp.trace.tensors.node_trace.NodeTrace`, one node run's ``torch.fx`` graph, and
  :func:`~leapp.trace.tensors.recorder.dispatch`, which records torch calls (registered as the
  traced tensor's dispatch when imported); :mod:`~leapp.trace.tensors.operation`, what a torch
  call is; torch values between nodes (:mod:`~leapp.trace.tensors.handover`);
  :mod:`~leapp.trace.tensors.extensions`, what the recorder hands to the tracers above it,
  which register there when imported;
- :mod:`leapp.trace.arrays`: NumPy tracing.
  :class:`~leapp.trace.arrays.array.TracedArray`, the traced NumPy value; NumPy calls recorded
  as their torch equivalents (:mod:`~leapp.trace.arrays.numpy_recorder`, from the table in
  :mod:`leapp.numpy`; :mod:`~leapp.trace.arrays.indexing` for indexing and item assignment,
  :mod:`~leapp.trace.arrays.writes` for writes into traced arrays and the views they change);
  ``torch.from_numpy`` / ``np.asarray`` keep the trace (:mod:`~leapp.trace.arrays.crossing`);
  NumPy values between nodes and ``annotate.mirror_leapp_tags``
  (:mod:`~leapp.trace.arrays.handover`);
- :mod:`leapp.trace.scripts`: TorchScript modules and functions called on traced values,
  recorded as the ATen operations they run (:mod:`~leapp.trace.scripts.script_calls`; tensors
  they write become states), replayed by :mod:`~leapp.trace.scripts.script_replay`;
- :mod:`leapp.trace.segments`: Warp calls in a node recorded as Warp segments
  (:mod:`~leapp.trace.segments.warp_region`), from the patched Warp API
  (:mod:`~leapp.trace.segments.warp_calls`, :mod:`~leapp.trace.segments.warp_launch`), each one
  operator call in the graph (:mod:`~leapp.trace.segments.warp_op`) with its record
  (:mod:`~leapp.trace.segments.warp_segment`);
- :mod:`leapp.trace.pipeline`: :class:`~leapp.trace.pipeline.recording.Recording`, one
  pipeline's recording (node runs in order, their ports, which output fed which input);
  :mod:`~leapp.trace.pipeline.sources`, where each declared input comes from and what it may
  not be; :mod:`~leapp.trace.pipeline.states`, the rules for ``state_tensors`` /
  ``update_state``; :mod:`~leapp.trace.pipeline.buffers`, ``annotate.register_buffer`` and
  ``annotate.module``'s buffers; :mod:`~leapp.trace.pipeline.reruns`, a node's later runs
  checked against its first.

Modules beside them, used by all: :mod:`leapp.trace.location`, the user's file and line, for
error messages; for the annotations, :mod:`leapp.trace.payload`, what they accept (dicts, nested
containers, ``TensorSemantics``) as flat named ports, and :mod:`leapp.trace.ports`, the port
names (nested containers flattened by path, ``annotate.method``'s parameters and returns).

Nothing here imports the API layer (:mod:`leapp.session`, :mod:`leapp.annotate`, ``leapp``).
"""
