"""The table of NumPy calls and their torch equivalents, which traced arrays record.

- :mod:`leapp.numpy.operands`: NumPy values as torch operands (dtypes, constants, promotion);
- :mod:`leapp.numpy.functions`: ``__array_function__`` calls (``np.where``, ``np.einsum``...),
  with the reductions of :mod:`leapp.numpy.reductions` (``np.sum``, ``np.std``...) and the
  shapes and arrangement of :mod:`leapp.numpy.shapes` (``np.reshape``, ``np.concatenate``...);
- :mod:`leapp.numpy.ufuncs`: ufuncs, operators and ufunc methods.

The table knows nothing of tracing: the recorder (:mod:`leapp.trace.arrays.numpy_recorder`) runs
each entry on torch views of traced arrays and checks its result against NumPy's. Modules here
import NumPy itself with ``import numpy as np`` (absolute imports only).
"""
