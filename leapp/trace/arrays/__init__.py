"""NumPy tracing: traced arrays, and NumPy calls recorded as their torch equivalents.

Above :mod:`leapp.trace.tensors`: every NumPy call becomes torch calls on the arrays' traced
tensors, recorded by the torch recorder.

Bottom to top: :mod:`~leapp.trace.arrays.array_calls` (the traced array's dispatch table),
:mod:`~leapp.trace.arrays.array` (``TracedArray``, which hands NumPy's protocols and its
methods to the functions registered in that table),
:mod:`~leapp.trace.arrays.indexing` and :mod:`~leapp.trace.arrays.handover`,
:mod:`~leapp.trace.arrays.numpy_recorder` (calls) and :mod:`~leapp.trace.arrays.writes`
(writes), which register themselves in that table, and :mod:`~leapp.trace.arrays.crossing`.
Importing the package imports both recorders, so a TracedArray never exists without them.
"""

from leapp.trace.arrays import numpy_recorder as numpy_recorder
from leapp.trace.arrays import writes as writes
