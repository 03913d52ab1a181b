"""NumPy tracing: traced arrays, and NumPy calls recorded as their torch equivalents.

Above :mod:`leapp.trace.tensors`: every NumPy call becomes torch calls on the arrays' traced
tensors, recorded by the torch recorder.
"""
