"""Torch tracing: the traced torch value and the recorder of one node run's ``torch.fx`` graph.

The bottom of :mod:`leapp.trace`: it knows nothing of NumPy arrays, TorchScript or Warp; the
packages that trace them register with :mod:`leapp.trace.tensors.extensions`.
"""
