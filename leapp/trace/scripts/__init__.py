"""TorchScript calls on traced values, replayed as the ATen operations they run.

Above :mod:`leapp.trace.tensors`: each operation of the replay is an ordinary torch call.
"""
