"""Torch tracing: the traced torch value and the recorder of one node run's ``torch.fx`` graph.

The bottom of :mod:`leapp.trace`: it knows nothing of NumPy arrays, TorchScript or Warp; the
packages that trace them register with :mod:`leapp.trace.tensors.extensions` and
:data:`leapp.trace.tensors.node_trace.CONSTANT_HOOKS`.

Bottom to top: :mod:`~leapp.trace.tensors.operation` (what a torch call is),
:mod:`~leapp.trace.tensors.tensor` (``TracedTensor``, which hands every torch call on it to
the function registered in its dispatch table), :mod:`~leapp.trace.tensors.node_trace` (one
node run's graph), :mod:`~leapp.trace.tensors.handover` (torch values between nodes),
:mod:`~leapp.trace.tensors.extensions` and :mod:`~leapp.trace.tensors.recorder`, which records
each call and registers itself as the tensor's dispatch. Importing the package imports the
recorder, so a TracedTensor never exists without it.
"""

from leapp.trace.tensors import recorder as recorder
